"""The authored scheduling family: valid, all three classes, and its deliberate faults."""

from __future__ import annotations

import importlib.util

from pytest_tooleffect.collect.cases import load_case_file, load_family
from pytest_tooleffect.oracle import CompareContext, compile_label, score
from tests.conftest import REPO

FAMILY = REPO / "cases" / "scheduling"


def _harness_predicates() -> dict:
    spec = importlib.util.spec_from_file_location("harness_conftest", REPO / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pytest_tooleffect_predicates()


def test_family_is_valid_and_covers_every_class() -> None:
    fam = load_family(FAMILY)
    cases, problems = load_case_file(FAMILY / "cases.yaml", fam)
    assert problems == []
    assert len(cases) >= 40
    assert all(c.source.kind == "authored" and c.recorded is not None for c in cases)
    classes = {c.label.label_class for c in cases if c.label}
    assert classes == {"single", "several", "no_tool"}
    kinds = {}
    for c in cases:
        assert c.label is not None
        v = score(c.recorded.model_dump(exclude_none=True) if c.recorded else None, c.label, fam.tools, fam.rules,
                  CompareContext(timezone=c.timezone, state=c.state, messages=c.messages,
                                 predicates=_harness_predicates()))
        kinds[c.id] = v
    dup = [v for cid, v in kinds.items() if cid.startswith("sch-dup")]
    assert dup and all(v.kind == "forbidden" for v in dup)
    tz = [v for v in kinds.values() if v.kind == "right_tool_wrong_args"]
    assert tz and all(any(f.path == "calendar.create_event.start" and "different instants" in f.reason
                          for f in v.failing_fields) for v in tz)


def test_working_hours_predicate() -> None:
    from pytest_tooleffect.oracle import CompareContext

    check = _harness_predicates()["working_hours"]
    ctx = CompareContext(timezone="Europe/Madrid")
    assert check("2025-03-19T14:00:00", ctx)[0]
    assert check("2025-03-19T13:00:00Z", ctx)[0]
    ok, reason = check("2025-03-19T20:30:00Z", ctx)
    assert not ok and "21:30 is outside" in reason


def test_compiled_labels_score_as_fresh_copies() -> None:
    fam = load_family(FAMILY)
    cases, _ = load_case_file(FAMILY / "cases.yaml", fam)
    predicates = _harness_predicates()
    compiled = 0
    for c in cases:
        assert c.label is not None
        tools = c.tools if c.tools is not None else fam.tools
        compile_label(c.label, tools, fam.rules)  # as the plugin does before a case's first decision
        form = c.label.__pydantic_private__["_oracle"]
        for alt in form.alternatives:
            for plans in alt.plans:
                ((rules, _schema, plan),) = plans
                assert rules is fam.rules
                compiled += plan.keys is not None
        turn = c.recorded.model_dump(exclude_none=True) if c.recorded else None
        ctx = CompareContext(timezone=c.timezone, state=c.state, messages=c.messages, predicates=predicates)
        fresh = c.label.model_copy(deep=True)  # a deep copy starts without the compiled form
        assert fresh.__pydantic_private__.get("_oracle") is None
        assert score(turn, c.label, tools, fam.rules, ctx).to_dict() == \
            score(turn, fresh, tools, fam.rules, ctx).to_dict(), c.id
    assert compiled >= 30
