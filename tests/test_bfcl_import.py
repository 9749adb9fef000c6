"""BFCL import: dialect mapping, alternatives, parallel groups, irrelevance, rejected entries."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_tooleffect.cli import main
from pytest_tooleffect.importers.bfcl import convert_schema, label_from_ground_truth
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
