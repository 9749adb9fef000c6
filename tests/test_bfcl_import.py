"""BFCL import: dialect mapping, alternatives, parallel groups, irrelevance, rejected entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.data.importers.bfcl import convert_schema, label_from_ground_truth
from pytest_tooleffect.oracle import score
from tests.conftest import SHARED


def _cases(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in map(json.loads, path.read_text().splitlines())}


def test_schema_dialect() -> None:
    got = convert_schema({"type": "dict", "properties": {
        "x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "integer"}}, "a": {"type": "any"},
        "m": {"type": "array", "items": {"type": "string"}, "enum": ["u", "v"]}}})
    assert got == {"type": "object", "properties": {
        "x": {"type": "number"}, "t": {"type": "array", "items": {"type": "integer"}}, "a": {},
        "m": {"type": "array", "items": {"type": "string", "enum": ["u", "v"]}}}}


def test_alternatives_and_groups() -> None:
    one = label_from_ground_truth([{"f": {"a": [1], "b": ["x", "X", ""], "c": ["", None], "d": [{"k": ["v", "w"]}]}}])
    assert one["valid_actions"] == [{"tool": "f", "args": {
        "a": 1, "b": {"$any_of": ["x", "X", {"$omitted": True}]}, "c": {"$any_of": [{"$omitted": True}, None]},
        "d": {"k": {"$any_of": ["v", "w"]}}}}]
    two = label_from_ground_truth([{"f": {"a": [1]}}, {"g": {"b": [2]}}])
    assert two["valid_actions"] == [{"parallel": [{"tool": "f", "args": {"a": 1}}, {"tool": "g", "args": {"b": 2}}],
                                     "order_matters": False}]


@pytest.mark.shared
def test_import_and_score(tmp_path: Path) -> None:
    assert main(["import", "bfcl", "--shared", str(SHARED), "--out", str(tmp_path), "--category", "simple",
                 "--category", "parallel", "--category", "irrelevance", "--category", "live_simple"]) == 0
    simple = _cases(tmp_path / "simple" / "cases.jsonl")
    case = simple["simple_python_0"]
    assert case["tools"][0]["parameters"]["type"] == "object"
    label, tools = case["label"], case["tools"]
    ok = {"tool_calls": [{"name": "calculate_triangle_area", "arguments": '{"base": 10, "height": 5}'}]}
    assert score(ok, label, tools).kind == "ok"  # unit may be omitted ("" among its alternatives)
    bad = {"tool_calls": [{"name": "calculate_triangle_area", "arguments": '{"base": 10, "height": 5, "unit": "cm"}'}]}
    assert score(bad, label, tools).kind == "right_tool_wrong_args"
    parallel = _cases(tmp_path / "parallel" / "cases.jsonl")
    assert all("parallel" in c["label"]["valid_actions"][0] for c in parallel.values())
    irrelevance = _cases(tmp_path / "irrelevance" / "cases.jsonl")
    assert len(irrelevance) == 240 and all(c["label"]["valid_actions"][0]["tool"] is None for c in irrelevance.values())
    rejected = json.loads((tmp_path / "live_simple" / "rejected.json").read_text())
    assert rejected and all(r["problems"] for r in rejected)
    assert len(_cases(tmp_path / "live_simple" / "cases.jsonl")) + len(rejected) == 258


def _first(value: object) -> object:
    """The label's first acceptable value (``$omitted`` skipped), nested objects included."""
    if isinstance(value, dict) and "$any_of" in value:
        taken = [v for v in value["$any_of"] if not (isinstance(v, dict) and "$omitted" in v)]
        return _first(taken[0]) if taken else None
    if isinstance(value, dict):
        return {k: _first(v) for k, v in value.items()}
    return value


def _turns(label: dict) -> list[dict]:
    """The label's first values as a turn, and the same with every top-level string upper-cased."""
    alt = label["valid_actions"][0]
    calls = alt.get("parallel", [alt])
    first = [{"name": c["tool"], "arguments": _first(c.get("args", {}))} for c in calls]
    shouted = [{**c, "arguments": {k: v.upper() if isinstance(v, str) else v for k, v in c["arguments"].items()}}
               for c in first]
    return [{"tool_calls": first}, {"tool_calls": shouted}, {"tool_calls": first[::-1]}]


@pytest.mark.shared
def test_scoring_a_label_again_through_its_compiled_calls_gives_the_same_verdicts(tmp_path: Path) -> None:
    # the first use of a label call goes to the comparator, later ones to the compiled call
    from pytest_tooleffect.formats import Label, ToolSpec
    from pytest_tooleffect.oracle import RuleSet

    rules = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}}})

    assert main(["import", "bfcl", "--shared", str(SHARED), "--out", str(tmp_path), "--category", "multiple",
                 "--category", "parallel_multiple"]) == 0
    n = 0
    for category in ("multiple", "parallel_multiple"):
        for case in _cases(tmp_path / category / "cases.jsonl").values():
            label = Label.model_validate(case["label"])
            tools = [ToolSpec.model_validate(t) for t in case["tools"]]
            for turn in _turns(case["label"]):
                # a fresh copy of the label is scored through the comparator (its calls' first use)
                reference = score(turn, label.model_copy(deep=True), tools, rules).to_dict()
                assert score(turn, label, tools, rules).to_dict() == reference
                assert score(turn, label, tools, rules).to_dict() == reference
                n += 1
    assert n == 3 * (199 + 192)  # every imported case (the rest are rejected on import)
