"""Tests for recagents.resources and the papers' tables read from it.

Each packaged JSON table loads and validates; a corrupted copy (a missing field, a wrong type,
an unknown field, not JSON) raises a ResourceError naming the file and the field; the loaded
values are the ones the papers use.
"""

import json
from pathlib import Path

import pytest

from recagents.papers.agent4rec import prompts
from recagents.papers.interecagent import demos
from recagents.papers.rec4agentverse import catalogue
from recagents.report import loading
from recagents.resources import ResourceError, read_resource, resource

#: name -> (loader, file)
TABLES = {
    "demos": (demos.load_demos, "interecagent_demos.json"),
    "agents": (catalogue.load_agent_specs, "rec4agentverse_agents.json"),
    "traits": (prompts.load_trait_sentences, "agent4rec_traits.json"),
}


def _copy(tmp_path: Path, name: str, change) -> Path:
    """A copy of the packaged ``name`` with ``change(data)`` applied, written to tmp_path."""
    data = json.loads(resource(name).read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _fails(loader, path: Path, field: str, what: str) -> str:
    with pytest.raises(ResourceError) as error:
        loader(path)
    message = str(error.value)
    assert str(path) in message
    assert f"  {field}: {what}" in message, message
    return message


# ------------------------------------------------------------------------- the shared reader


def test_the_report_uses_the_shared_reader():
    assert ResourceError is ResourceError is loading.ResourceError
    assert loading.read_resource is read_resource and loading.resource is resource
    assert issubclass(ResourceError, ValueError)


def test_every_packaged_table_is_a_file_and_loads():
    for loader, name in TABLES.values():
        assert resource(name).is_file()
        assert loader() is loader()  # read once, cached
        assert loader(resource(name)) == loader()  # an explicit path reads the same


def test_read_resource_names_file_and_field(tmp_path):
    path = tmp_path / "x.json"
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    path.write_text('{"a": "one"}')
    with pytest.raises(ResourceError, match=r"x\.json does not match its schema:\n  a: 'one'"):
        read_resource(path, schema)
    path.write_text("{}")
    with pytest.raises(ResourceError, match=r"  a: missing \(required\)"):
        read_resource(path, schema)
    path.write_text("{nope")
    with pytest.raises(ResourceError, match="not valid JSON at line 1, column 2"):
        read_resource(path, schema)
    with pytest.raises(ResourceError, match="cannot be read"):
        read_resource(tmp_path / "missing.json", schema)


# ------------------------------------------------------------------------- InteRecAgent demos


def test_demos_are_what_the_agent_uses():
    assert demos.load_demos() is demos.DEMOS
    assert len(demos.DEMOS) == 17 and all(isinstance(d, demos.Demo) for d in demos.DEMOS)
    assert demos.DEMOS[0].request == "Hi! How are you doing today?"
    assert not demos.DEMOS[0].is_plan and demos.DEMOS[0].reply["plan"] == []
    fargo = demos.DEMOS[3]
    assert fargo.request == "When was Fargo released?" and fargo.is_plan
    assert fargo.reply == {
        "kind": "plan",
        "answer": "",
        "plan": [
            {
                "tool_name": "lookup",
                "input": "SELECT title, release_year FROM items WHERE title LIKE '%Fargo%'",
            }
        ],
    }
    steps = {s["tool_name"]: s["input"] for d in demos.DEMOS for s in d.reply["plan"]}
    assert isinstance(steps["map_titles"], int)
    assert set(steps["rank"]) == {"schema", "prefer", "unwanted"}


def test_corrupted_demos_name_the_file_and_the_field(tmp_path):
    def drop_plan(data):
        del data["demos"][3]["reply"]["plan"]

    path = _copy(tmp_path, "interecagent_demos.json", drop_plan)
    _fails(demos.load_demos, path, "demos[3].reply.plan", "missing (required)")

    def request_number(data):
        data["demos"][1]["request"] = 7

    path = _copy(tmp_path, "interecagent_demos.json", request_number)
    _fails(demos.load_demos, path, "demos[1].request", "7 is not of type 'string'")

    def unknown_tool(data):
        data["demos"][5]["reply"]["plan"][0]["tool_name"] = "web_search"

    path = _copy(tmp_path, "interecagent_demos.json", unknown_tool)
    _fails(demos.load_demos, path, "demos[5].reply.plan[0].tool_name", "'web_search' is not one")

    def count_as_text(data):
        data["demos"][5]["reply"]["plan"][2]["input"] = "5"

    path = _copy(tmp_path, "interecagent_demos.json", count_as_text)
    _fails(demos.load_demos, path, "demos[5].reply.plan[2].input", "'5' is not of type")

    def plan_without_steps(data):
        data["demos"][3]["reply"]["plan"] = []

    path = _copy(tmp_path, "interecagent_demos.json", plan_without_steps)
    _fails(demos.load_demos, path, "demos[3].reply.plan", "[] should be non-empty")


# ------------------------------------------------------------------------- Rec4Agentverse agents


def test_agent_specs_are_what_the_catalogue_uses():
    assert catalogue.load_agent_specs() == (catalogue.AGENT_SPECS, catalogue.ADVERSARY_SPEC)
    assert isinstance(catalogue.AGENT_SPECS, tuple) and len(catalogue.AGENT_SPECS) == 10
    first = catalogue.AGENT_SPECS[0]
    assert first == catalogue.AgentSpec(
        "a01",
        "90s comedy hits",
        "The best-known comedies of the 1990s.",
        ("Comedy",),
        (1990, 1998),
        "mainstream",
    )
    assert catalogue.AGENT_SPECS[4].style == "broad"
    assert [s.agent_id for s in catalogue.AGENT_SPECS] == [f"a{i:02d}" for i in range(1, 11)]
    assert not any(s.adversarial for s in catalogue.AGENT_SPECS)
    adversary = catalogue.ADVERSARY_SPEC
    assert adversary.agent_id == "a11" and adversary.adversarial
    assert adversary.genres == ("Action", "Sci-Fi", "Thriller") and adversary.years == (1990, 1998)


def test_corrupted_agents_name_the_file_and_the_field(tmp_path):
    load = catalogue.load_agent_specs

    def drop_blurb(data):
        del data["agents"][2]["blurb"]

    path = _copy(tmp_path, "rec4agentverse_agents.json", drop_blurb)
    _fails(load, path, "agents[2].blurb", "missing (required)")

    def year_as_text(data):
        data["agents"][0]["years"][1] = "1998"

    path = _copy(tmp_path, "rec4agentverse_agents.json", year_as_text)
    _fails(load, path, "agents[0].years[1]", "'1998' is not of type 'integer'")

    def unknown_genre(data):
        data["adversary"]["genres"].append("Western Noir")

    path = _copy(tmp_path, "rec4agentverse_agents.json", unknown_genre)
    _fails(load, path, "adversary.genres[3]", "'Western Noir' is not one of")

    def honest_adversary(data):
        data["adversary"]["adversarial"] = False

    path = _copy(tmp_path, "rec4agentverse_agents.json", honest_adversary)
    _fails(load, path, "adversary.adversarial", "True was expected")

    def unknown_field(data):
        data["agents"][1]["colour"] = "red"

    path = _copy(tmp_path, "rec4agentverse_agents.json", unknown_field)
    _fails(load, path, "agents[1]", "Additional properties are not allowed ('colour'")

    def same_id(data):
        data["agents"][4]["agent_id"] = "a02"

    path = _copy(tmp_path, "rec4agentverse_agents.json", same_id)
    with pytest.raises(ResourceError, match=r"agents\[4\]\.agent_id: 'a02' .* agents\[1\]"):
        load(path)


# ------------------------------------------------------------------------- Agent4Rec traits


def test_trait_sentences_are_what_the_prompts_use():
    sentences = prompts.TRAIT_SENTENCES
    assert prompts.load_trait_sentences() is sentences
    assert list(sentences) == ["activity", "conformity", "diversity"]
    assert all(list(levels) == [1, 2, 3] for levels in sentences.values())
    assert sentences["diversity"][1] == (
        "You keep to a handful of favourite genres and rarely try anything else."
    )


def test_corrupted_traits_name_the_file_and_the_field(tmp_path):
    load = prompts.load_trait_sentences

    def drop_level(data):
        del data["traits"]["conformity"]["2"]

    path = _copy(tmp_path, "agent4rec_traits.json", drop_level)
    _fails(load, path, "traits.conformity.2", "missing (required)")

    def sentence_as_list(data):
        data["traits"]["activity"]["3"] = ["You watch a lot."]

    path = _copy(tmp_path, "agent4rec_traits.json", sentence_as_list)
    _fails(load, path, "traits.activity.3", "['You watch a lot.'] is not of type 'string'")

    def drop_trait(data):
        del data["traits"]["diversity"]

    path = _copy(tmp_path, "agent4rec_traits.json", drop_trait)
    _fails(load, path, "traits.diversity", "missing (required)")


def test_jsonschema_is_imported_without_the_iri_grammar_which_stays_importable() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from recagents.resources import import_jsonschema\n"
        "jsonschema = import_jsonschema()\n"
        "assert 'rfc3987_syntax' not in sys.modules\n"
        "jsonschema.validate({'a': 1}, {'type': 'object'})\n"
        "assert import_jsonschema() is jsonschema\n"
        "try:\n"
        "    import rfc3987_syntax  # noqa: F401  (installed with Jupyter's jsonschema extras)\n"
        "except ImportError as error:\n"
        "    assert 'rfc3987' in str(error) and 'None' not in str(error)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_run_notebook_is_papermills_command_line(tmp_path: Path) -> None:
    """``make`` runs notebooks with it: the same options, papermill's own errors."""
    import subprocess
    import sys

    run = [sys.executable, "-m", "recagents.run_notebook"]
    shown = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "Usage: papermill" in shown.stdout
    assert "--parameters" in shown.stdout and "--cwd" in shown.stdout
    missing = subprocess.run(
        [*run, str(tmp_path / "none.ipynb"), str(tmp_path / "out.ipynb")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode != 0 and "none.ipynb" in missing.stderr
    assert "recagents.run_notebook" in (Path(__file__).parents[2] / "Makefile").read_text()
