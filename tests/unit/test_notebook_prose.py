"""Hand-written markdown explains the method and the paper; it never states this run's result.

Issue #39: what a run found is generated from its records (``display(Markdown(...))`` built
from the numbers), next to the table or figure it reads, so it cannot contradict them. This
test reads every markdown cell of every notebook and fails on a sentence that states a run
result: a decimal interval ("[0.346, 0.423]"), a p-value ("p = 0.07"), a first-person
finding ("we found", "you should see" unless the text that follows is generated), a claim
about what the model does ("the embedded model always picks ..."), or a bare decimal number
in a sentence that cites neither the paper, a table, figure or section, chance, nor a setting.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

INTERVAL = re.compile(r"\[\s*-?\d*\.\d+\s*,\s*-?\d*\.\d+\s*\]")
P_VALUE = re.compile(r"\bp\s*[=<]\s*0?\.\d+")
DECIMAL = re.compile(r"(?<![\w.])-?\d{0,3}\.\d+(?![\w.%])")
FINDING = re.compile(
    r"\b(in our run|our run (shows|finds)|the run shows|we (find|found|see|observe)"
    r"|you (will|should) see(?![*_\s]*\(generated)"
    r"|the (embedded |small )?model (always|never|mostly|usually|takes|picks|chooses|accepts"
    r"|keeps|prefers|rates|leaves))\b",
    re.IGNORECASE,
)
#: A decimal number in a sentence that names one of these is a paper value, a setting or math.
CITED = re.compile(
    r"arxiv|section|\bdoi\b|paper|table|fig\.|figure|author|report|chance|random|expected"
    r"|temperature|default|seed|skill|probab|e\.g\.|threshold|alpha|price|\$|cost|version"
    r"|gpt|rate limit|setting|level|weight|cutoff|top_p|greedy|sizes?\b|minutes|runtime"
    r"|says yes|prevalence|share of positives|ml-1m|ml-10m|lastfm|cds",
    re.IGNORECASE,
)


def sentences(markdown: str) -> list[str]:
    """The prose sentences of a markdown cell: no code, math, inline code or headings."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.DOTALL)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.DOTALL)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
    text = re.sub(r"`[^`\n]+`", " ", text)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.MULTILINE)
    parts = re.split(r"(?<=[.!?])\s+|\n\s*[-*]\s+|\n\s*\n", text)
    return [" ".join(part.split()) for part in parts if part.strip()]


def run_result(sentence: str) -> str | None:
    """Why ``sentence`` reads as a statement of this run's result, or None."""
    if INTERVAL.search(sentence):
        return "an interval"
    if P_VALUE.search(sentence):
        return "a p-value"
    if FINDING.search(sentence):
        return "a finding"
    if DECIMAL.search(sentence) and not CITED.search(sentence):
        return "a number"
    return None


def test_the_rule_finds_results_and_lets_method_text_pass():
    assert run_result("Random scores 0.39 [0.346, 0.423] here.") == "an interval"
    assert run_result("The difference is small (p = 0.076).") == "a p-value"
    assert run_result("The embedded model always picks the first option.") == "a finding"
    assert run_result("We found that B+R beats B.") == "a finding"
    assert run_result("B+R reaches 0.41 on these users.") == "a number"
    assert run_result("**What you should see** (generated from this run's values):") is None
    assert run_result("The paper reports 0.95 on CDs.") is None
    assert run_result("A random order of 1+9 has expected NDCG@10 of 0.4544.") is None
    assert run_result("Sampling uses temperature 0.7 and seed 303.") is None
    assert sentences("# 5.1 Results\nText with `0.5` and $x = 0.3$.") == ["Text with and ."]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_hand_written_markdown_states_no_run_result(path):
    found = []
    for index, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for sentence in sentences("".join(cell["source"])):
            why = run_result(sentence)
            if why:
                found.append(f"cell {index}: {why}: {sentence[:160]}")
    assert not found, (
        f"{path.name}: hand-written markdown states a run result (generate it from the "
        "records instead):\n" + "\n".join(found)
    )
