"""Each deliberate difference from BFCL's AST checker, as docs/importers/bfcl.md's "How we differ from BFCL"
lists it, pinned by a test of the oracle's own verdict."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tooleffect.data.importers.bfcl import bfcl_tool, label_from_ground_truth, omit_required_empty
from pytest_tooleffect.oracle import RuleSet, score

RULES = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}}})


def _verdict(params: dict[str, Any], required: list[str], truth: dict[str, Any], args: Any) -> str:
    tools = [bfcl_tool({"name": "f", "parameters": {"type": "dict", "properties": params, "required": required}})]
    label = label_from_ground_truth([{"f": truth}])
    omit_required_empty(label, tools)
    calls = [{"name": "f", "arguments": a} for a in (args if isinstance(args, list) else [args])]
    return score({"tool_calls": calls}, label, tools, RULES).kind


def test_enum_values_compare_exactly() -> None:
    params = {"method": {"type": "string", "enum": ["GET", "POST"]}}
    assert _verdict(params, ["method"], {"method": ["POST"]}, {"method": "POST"}) == "ok"
    assert _verdict(params, ["method"], {"method": ["POST"]}, {"method": "post"}) == "right_tool_wrong_args"
    assert _verdict(params, ["method"], {"method": ["POST"]}, {"method": " POST "}) == "right_tool_wrong_args"


def test_strings_keep_punctuation_and_inner_spaces() -> None:
    params = {"city": {"type": "string"}}
    assert _verdict(params, ["city"], {"city": ["New York"]}, {"city": " new york "}) == "ok"  # case, outer space
    assert _verdict(params, ["city"], {"city": ["New York"]}, {"city": "NewYork"}) == "right_tool_wrong_args"
    assert _verdict(params, ["city"], {"city": ["St. Louis"]}, {"city": "St Louis"}) == "right_tool_wrong_args"


def test_explicit_default_equals_omitted() -> None:
    params = {"q": {"type": "string"}, "limit": {"type": "integer", "default": 10}}
    assert _verdict(params, ["q"], {"q": ["x"], "limit": [""]}, {"q": "x", "limit": 10}) == "ok"
    assert _verdict(params, ["q"], {"q": ["x"], "limit": [""]}, {"q": "x", "limit": 5}) == "right_tool_wrong_args"


def test_parallel_calls_by_optimal_assignment() -> None:
    params = {"company": {"type": "string"}, "date": {"type": "string"}}
    truth = [{"f": {"company": ["Apple", "AAPL"], "date": ["2022-02-01"]}},
             {"f": {"company": ["Apple"], "date": ["2022-01-01"]}}]
    tools = [bfcl_tool({"name": "f", "parameters": {"type": "dict", "properties": params, "required": ["company"]}})]
    label = label_from_ground_truth(truth)
    # first fit pairs the first emitted call with the first expected one and gives up
    emitted = {"tool_calls": [{"name": "f", "arguments": {"company": "Apple", "date": "2022-01-01"}},
                              {"name": "f", "arguments": {"company": "AAPL", "date": "2022-02-01"}}]}
    assert score(emitted, label, tools, RULES).kind == "ok"


@pytest.mark.shared
def test_schema_breaking_ground_truth_is_not_a_case(tmp_path: Any) -> None:
    import json

    from pytest_tooleffect.data.importers.bfcl import import_bfcl
    from tests.conftest import SHARED

    import_bfcl(SHARED / "datasets" / "bfcl", tmp_path, ["live_multiple"])
    rejected = {r["id"]: r["problems"] for r in json.loads((tmp_path / "live_multiple" / "rejected.json").read_text())}
    assert any("'dontcare' must be integer" in p for p in rejected["live_multiple_306-131-5"])
    assert any("not in the schema" in p for p in rejected["live_multiple_189-83-0"])


def test_required_argument_with_a_default_must_be_sent() -> None:
    params = {"location": {"type": "string"}, "rooms": {"type": "integer", "default": 1}}
    assert _verdict(params, ["location", "rooms"], {"location": ["x"], "rooms": [1]}, {"location": "x"}) == \
        "right_tool_wrong_args"


def test_unparsable_call_on_irrelevance_is_malformed_not_abstention() -> None:
    label = {"valid_actions": [{"tool": None}]}
    kind = score({"content": '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'}, label,
                 [{"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}]).kind
    assert kind == "malformed_call"
