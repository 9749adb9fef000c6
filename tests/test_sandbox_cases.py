"""World, effects and faults in case files: checked at load time against the world's tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.collect.cases import load_case_file, load_family
from tests.conftest import REPO


def _load(tmp_path: Path, **fields: Any) -> tuple[list[str], list[str]]:
    """The ids of the usable cases and the problems of a case file holding one world case, ``w1``."""
    fam_dir = tmp_path / "cases" / "scheduling"
    fam_dir.mkdir(parents=True)
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "scheduling.yaml").write_text((REPO / "oracle" / "scheduling.yaml").read_text())
    (fam_dir / "family.yaml").write_text((REPO / "cases" / "scheduling" / "family.yaml").read_text())
    case = {"id": "w1", "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "source": "authored",
            "messages": [{"role": "user", "content": "hi"}], "label": {"valid_actions": [{"tool": None}]},
            "world": {"threads": [{"thread_id": "th-1"}]}, **fields}
    (fam_dir / "c.yaml").write_text(yaml.safe_dump([case]))
    cases, problems = load_case_file(fam_dir / "c.yaml", load_family(fam_dir))
    return [c.id for c in cases], [f"{p.field}: {p.message}" for p in problems]


@pytest.mark.parametrize(("fields", "expected"), [
    ({}, []),
    ({"world": {"events": [{"event_id": "e1", "start": "next Tuesday"}]}},
     ["world.events[0].start: a DATETIME column takes an ISO 8601 date-time, not 'next Tuesday'"]),
    ({"world": {"events": [{"event_id": "e1", "duration_minutes": "30"}]}},
     ["world.events[0].duration_minutes: an INTEGER column takes a whole number, not str"]),
    ({"world": {"threads": [{"thread_id": 7}]}},
     ["world.threads[0].thread_id: a TEXT column takes a string, not int"]),
    ({"world": {"threads": [{"thread_id": "a"}, {"thread_id": "a"}]}},
     ["world.threads[1].thread_id: duplicate key 'a'"]),
    ({"world": {"threads": [{"subject": "no key"}]}}, ["world.threads[0]: missing key column 'thread_id'"]),
    ({"expected_effects": [{"unchanged": ["calendar"]}]},
     ["expected_effects[0]: no table 'calendar' (tables: threads, events, busy, replies)"]),
    ({"expected_effects": [{"table": "events", "every": {"room": "A"}}]},
     ["expected_effects[0].every.room: no column 'room' in events"]),
    ({"faults": {"calendar.create_event": {"kind": "explode"}}}, ["faults.calendar.create_event.kind"]),
    ({"faults": {"read_thread": {"kind": "slow", "ms": -5}}}, ["faults.read_thread.ms"]),
    ({"faults": {"read_thread": 200}}, ["faults.read_thread.status"]),
    ({"world": {"threads": [{"thread_id": None}]}}, ["world.threads[0]: missing key column 'thread_id' (or null)"]),
    ({"world": {"events": [{"event_id": "e", "duration_minutes": 2**70}]}},
     ["world.events[0].duration_minutes: 1180591620717411303424 does not fit an INTEGER column"]),
    ({"expected_effects": [{"table": "events", "where": {"start": {"$any_of": 5}}}]},
     ["expected_effects[0].where.start: $any_of takes a non-empty list"]),
    ({"expected_effects": [{"table": "events", "where": {"start": {"$any_of": ["2025-03-20T10:00:00", "soon"]}}}]},
     ["expected_effects[0].where.start: $any_of: a DATETIME column takes an ISO 8601 date-time, not 'soon'"]),
    ({"expected_effects": [{"table": "events", "where": {"duration_minutes": {"$gt": 10}}}]},
     ["expected_effects[0].where.duration_minutes: only $any_of is understood here, not $gt"]),
    ({"expected_effects": [{"table": "events", "every": {"start": "tomorrow", "title": True}}]},
     ["expected_effects[0].every.start: a DATETIME column", "expected_effects[0].every.title: a TEXT column"]),
    ({"expected_effects": [{"table": "events", "at_least": 3, "at_most": 1}]},
     ["expected_effects[0]: at_least 3 is more than at_most 1"]),
    ({"expected_effects": [{"table": "events", "count": True}]}, ["expected_effects[0].count"]),
    ({"expected_effects": [{"unchanged": []}]}, ["expected_effects[0].unchanged"]),
    ({"forbidden_effects": [{"unchanged": ["busy"]}]},
     ["forbidden_effects[0]: unchanged / only_changed / same_as_after are conditions to expect, not to forbid"]),
    ({"tools": [{"name": "weird.tool", "parameters": {"type": "object", "properties": {}}}],
      "faults": {"weird.tool": 503}}, ["faults.weird.tool: the sandbox world does not implement 'weird.tool'"]),
    ({"world": None, "expected_effects": [{"unchanged": ["events"]}], "faults": {"read_thread": 503}},
     ["expected_effects: needs a world", "faults: needs a world"]),
    ({"expected_effects": [{"table": "events", "count": 1, "at_most": 2}]},
     ["expected_effects[0]: give count, or at_least / at_most, not both"]),
])
def test_world_problems_name_the_field(tmp_path: Path, fields: dict[str, Any], expected: list[str]) -> None:
    loaded, problems = _load(tmp_path, **fields)
    assert loaded == ([] if expected else ["w1"])  # a case with a problem is not run; a clean one is
    assert len(problems) == len(expected), problems
    for got, want in zip(problems, expected):
        assert got.startswith(want), (got, want)
