"""recagents.llm.schemas: the reply schemas more than one paper asks for."""

from __future__ import annotations

import jsonschema
import pytest

from recagents.llm.schemas import list_schema, verdict_schema


def test_verdict_schema_reason_first_then_yes_or_no():
    schema = verdict_schema("comment", 12, "satisfied")
    assert list(schema["properties"]) == ["comment", "satisfied"]
    assert schema["required"] == ["comment", "satisfied"]
    jsonschema.validate({"comment": "fine", "satisfied": "yes"}, schema)
    for bad in (
        {"comment": "fine", "satisfied": "maybe"},
        {"comment": "x" * 13, "satisfied": "no"},
        {"satisfied": "no"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_verdict_schema_is_afls_decision_schema():
    from recagents.papers.afl.config import AFLConfig
    from recagents.papers.afl.prompts import decision_schema

    assert decision_schema(AFLConfig(reason_chars=77)) == {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 77},
            "decision": {"type": "string", "enum": ["yes", "no"]},
        },
        "required": ["reason", "decision"],
    }


@pytest.mark.parametrize(
    ("args", "named"),
    [(("r", -1, "v"), "reason_chars"), (("same", 10, "same"), "verdict_key")],
)
def test_verdict_schema_rejects_bad_arguments(args, named):
    with pytest.raises(ValueError, match=named):
        verdict_schema(*args)


def test_list_schema_holds_exactly_n_matching_entries():
    schema = list_schema("watch", {"type": "boolean"}, 3)
    assert schema["required"] == ["watch"]
    jsonschema.validate({"watch": [True, False, True]}, schema)
    for bad in ({"watch": [True, False]}, {"watch": [True, False, True, True]},
                {"watch": [True, "no", False]}, {"other": [True, True, True]}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    assert list_schema("x", {"type": "integer"}, 0)["properties"]["x"]["maxItems"] == 0
    with pytest.raises(ValueError, match="n must not be negative"):
        list_schema("x", {"type": "integer"}, -1)


def test_validate_json_matches_jsonschema_and_checks_each_schema_once() -> None:
    from recagents.llm.schemas import _validator, validate_json

    schema = verdict_schema("reason", 5, "decision")
    validate_json({"reason": "ok", "decision": "yes"}, schema)
    for bad in ({"reason": "too long", "decision": "yes"}, {"reason": "ok"}, []):
        with pytest.raises(jsonschema.ValidationError) as ours:
            validate_json(bad, schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(bad, schema)
        assert ours.value.message == theirs.value.message
    with pytest.raises(jsonschema.SchemaError):
        validate_json({}, {"type": "no such type"})
    before = _validator.cache_info()
    validate_json({"reason": "", "decision": "no"}, dict(reversed(list(schema.items()))))
    after = _validator.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses
