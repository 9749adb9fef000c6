"""The no-tool failure breakdown is exhaustive (scoring rule 7), and calls to tools not offered are counted apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_tooleffect.collect.cases import load_case_file, load_family
from pytest_tooleffect.formats import Case, Label
from pytest_tooleffect.oracle import CompareContext, score
from pytest_tooleffect.report import summarise
from pytest_tooleffect.report.model import NoToolFailures
from pytest_tooleffect.scoring.build import build_record
from pytest_tooleffect.scoring.no_tool import NO_TOOL_BUCKETS
from tests.conftest import REPO

FAMILIES = sorted(p.parent for p in (REPO / "cases").glob("*/family.yaml"))


def _harness_predicates() -> dict[str, Any]:
    """The predicates this repository's conftest.py registers for its families' rules."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tooleffect_harness_conftest", REPO / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.pytest_tooleffect_predicates())


def _failures(block: dict[str, Any], records: list[dict[str, Any]]) -> int:
    """The no-tool class's failures at any level: the kind, or the effect."""
    return sum(1 for r in records if r["family"] == block["family"] and r["class"] == "no_tool"
               and (r["verdict"]["kind"] not in ("ok", "ok_no_tool")
                    or (r.get("effect") is not None and not r["effect"]["passed"])))


def _check(records: list[dict[str, Any]]) -> None:
    report = summarise(records).model_dump(mode="json")
    for block in report["blocks"]:
        buckets = block["no_tool_failures"]
        assert list(buckets) == list(NO_TOOL_BUCKETS) == list(NoToolFailures.model_fields)
        assert sum(buckets.values()) == _failures(block, records), (block["family"], buckets)
        nt = block["classes"]["no_tool"]
        # every failure at the name and the name + args level is in some bucket
        assert sum(buckets.values()) >= nt["n"] - nt["name"]["correct"]
        assert sum(buckets.values()) >= nt["n"] - nt["name_args"]["correct"]
        for r in records:
            failed = r["class"] == "no_tool" and r["verdict"]["kind"] not in ("ok", "ok_no_tool")
            assert (r["no_tool_failure"] is not None) == failed or r.get("effect") is not None, r["id"]


@pytest.mark.parametrize("directory", FAMILIES, ids=[p.name for p in FAMILIES])
def test_the_buckets_sum_to_the_no_tool_failures_of_every_shipped_family(directory: Path) -> None:
    fam = load_family(directory)
    records = []
    for path in sorted(directory.iterdir()):
        if path.suffix not in (".jsonl", ".yaml") or path.name == "family.yaml" or path.resolve() in {p.resolve() for p in fam.referenced_files}:
            continue
        cases, problems = load_case_file(path, fam)
        assert problems == []
        for case in cases:
            if case.recorded is None or case.label is None:
                continue
            tools = list(case.tools) if case.tools is not None else list(fam.tools)
            ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages,
                                 predicates=_harness_predicates())
            verdict = score(case.recorded.model_dump(exclude_none=True), case.label, tools, fam.rules, ctx)
            records.append(build_record(family=fam.name, case=case, policy="replay", verdict=verdict,
                                        tools={t.name: t for t in tools}).to_json())
    if not records:
        pytest.skip(f"{directory.name} has nothing recorded to replay")
    _check(records)


TOOLS = [
    {"name": "read", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "peek", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "write", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}},
]
NAMES = ["read", "peek", "write", "made_up"]  # made_up is never offered

null_actions = st.fixed_dictionaries({"tool": st.none()}, optional={
    "reply": st.sampled_from(["ask", "refuse", "answer"]),
    "must": st.sampled_from(["states the fare is $10", "names the meeting"]),
    "must_not": st.sampled_from(["promises a refund"]),
})
tool_actions = st.builds(lambda t, x: {"tool": t, "args": {"x": x}}, st.sampled_from(NAMES[:3]), st.sampled_from("ab"))
labels = st.builds(
    lambda null, tools, forbidden: {"valid_actions": [null, *tools],
                                    "forbidden_actions": [f for f in forbidden
                                                          if f not in {a["tool"] for a in tools}]},
    null_actions, st.lists(tool_actions, max_size=2), st.lists(st.sampled_from(NAMES[:3]), max_size=2, unique=True))
calls = st.one_of(
    st.builds(lambda n, x: {"name": n, "arguments": {"x": x}}, st.sampled_from(NAMES), st.sampled_from("ab")),
    st.builds(lambda n: {"name": n, "arguments": '{"x": '}, st.sampled_from(NAMES)),   # truncated JSON
    st.just({"name": "", "arguments": "{}"}),                                           # no name
)
turns = st.one_of(
    st.builds(lambda t: {"content": t}, st.sampled_from([
        "Which one do you mean?", "I can't do that.", "The fare is $10.", "Done, booked it.", "",
        "We promise a refund.", "Could you confirm the meeting?"])),
    st.builds(lambda cs: {"tool_calls": cs}, st.lists(calls, min_size=1, max_size=2)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(labels, turns), min_size=1, max_size=12))
def test_the_buckets_sum_to_the_no_tool_failures_on_generated_decisions(rows: list[tuple[Any, Any]]) -> None:
    records = []
    tools = {t["name"]: t for t in TOOLS}
    for i, (lab, turn) in enumerate(rows):
        case = Case.model_validate({"id": f"c{i}", "placement": {"step": 0, "run_length": 1, "bucket": "first"},
                                    "messages": [{"role": "user", "content": "hi"}], "source": "authored",
                                    "label": lab})
        verdict = score(turn, Label.model_validate(lab), TOOLS)
        from pytest_tooleffect.formats import ToolSpec

        records.append(build_record(family="gen", case=case, policy="p", verdict=verdict,
                                    tools={n: ToolSpec.model_validate(t) for n, t in tools.items()}).to_json())
    _check(records)


def test_a_call_to_a_tool_not_offered_is_flagged_in_every_class_and_reported() -> None:
    made_up = {"tool_calls": [{"name": "made_up", "arguments": {}}]}
    single = score(made_up, {"valid_actions": [{"tool": "read", "args": {"x": "a"}}]}, TOOLS)
    no_tool = score(made_up, {"valid_actions": [{"tool": None}]}, TOOLS)
    malformed = score({"tool_calls": [{"name": "made_up", "arguments": "{"}]}, {"valid_actions": [{"tool": None}]},
                      TOOLS)
    offered = score({"tool_calls": [{"name": "read", "arguments": {"x": "b"}}]}, {"valid_actions": [{"tool": None}]},
                    TOOLS)
    assert (single.kind, single.hallucinated) == ("wrong_tool", ("made_up",))
    assert (no_tool.kind, no_tool.hallucinated) == ("tool_when_none_needed", ("made_up",))
    assert (malformed.kind, malformed.hallucinated) == ("malformed_call", ("made_up",))
    assert offered.hallucinated == ()
    assert "not offered: made_up" in no_tool.one_line(Label.model_validate({"valid_actions": [{"tool": None}]}))
    from pytest_tooleffect.formats import ToolSpec

    specs = {t["name"]: ToolSpec.model_validate(t) for t in TOOLS}
    rows = [("s", {"valid_actions": [{"tool": "read", "args": {"x": "a"}}]}, made_up),
            ("n", {"valid_actions": [{"tool": None}]}, made_up),
            ("o", {"valid_actions": [{"tool": None}]}, {"content": "fine"})]
    records = []
    for cid, lab, turn in rows:
        case = Case.model_validate({"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "first"},
                                    "messages": [{"role": "user", "content": "hi"}], "source": "authored",
                                    "label": lab})
        records.append(build_record(family="f", case=case, policy="p", verdict=score(turn, case.label, TOOLS),
                                    tools=specs))
    block = summarise(records).model_dump(mode="json")["blocks"][0]
    assert block["hallucinated_tools"] == {"classes": {"single": 1, "several": 0, "no_tool": 1},
                                           "tools": {"made_up": 2}}
    assert block["no_tool_failures"]["tool_not_offered"] == 1
    from pytest_tooleffect.report.markdown import render_markdown
    from pytest_tooleffect.report.terminal import render_terminal

    report = summarise(records)
    line = "calls to tools not offered (hallucinated): single 1, several 0, no_tool 1"
    assert line + " (made_up 2)" in render_terminal(report, width=200)
    assert "Calls to tools not offered (hallucinated): single 1, several 0, no_tool 1 (`made_up` 2)." in \
        render_markdown(report)
