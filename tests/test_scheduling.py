"""The authored scheduling family: valid, all three classes, and its deliberate faults."""

from __future__ import annotations

from pytest_tooleffect.cases import load_case_file, load_family
from pytest_tooleffect.oracle import CompareContext, score
from tests.conftest import REPO

FAMILY = REPO / "cases" / "scheduling"


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
                  CompareContext(timezone=c.timezone, state=c.state, messages=c.messages))
        kinds[c.id] = v
    dup = [v for cid, v in kinds.items() if cid.startswith("sch-dup")]
    assert dup and all(v.kind == "forbidden" for v in dup)
    tz = [v for v in kinds.values() if v.kind == "right_tool_wrong_args"]
    assert tz and all(any(f.path == "calendar.create_event.start" and "different instants" in f.reason
                          for f in v.failing_fields) for v in tz)
