"""Effects: the world diff and the conditions on it (pure, table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tooleffect.formats import Effect
from pytest_tooleffect.oracle.effects import diff_worlds, judge_effects, value_matches

LAYOUT = {
    "events": {"key": "event_id", "columns": {"event_id": "TEXT", "thread_id": "TEXT", "title": "TEXT",
                                              "start": "DATETIME", "attendees": "JSON"}},
    "replies": {"key": "reply_id", "columns": {"reply_id": "TEXT", "thread_id": "TEXT", "body": "TEXT"}},
}
EXISTING = {"event_id": "ev-1", "thread_id": "th-8831", "title": "Design review",
            "start": "2025-03-20T13:00:00+00:00", "attendees": ["a@x.eu"]}
BEFORE: dict[str, list[dict[str, Any]]] = {"events": [EXISTING], "replies": []}


def after(*events: dict[str, Any], replies: tuple[dict[str, Any], ...] = ()) -> dict[str, list[dict[str, Any]]]:
    return {"events": [EXISTING, *events], "replies": list(replies)}


def ev(eid: str, start: str, thread: str = "th-8831") -> dict[str, Any]:
    return {"event_id": eid, "thread_id": thread, "title": "Design review", "start": start, "attendees": ["a@x.eu"]}


ONE_AT_14_MADRID = Effect(table="events", where={"thread_id": "th-8831", "start": "2025-03-20T14:00:00"}, count=1)
NO_EVENT_CREATED = Effect(table="events", change="insert", description="no event created")
ONLY_EVENTS = Effect(only_changed=["events"])


@pytest.mark.parametrize(("world", "expected", "forbidden", "kind", "n_failures"), [
    # nothing happened: the existing 14:00 Madrid event (13:00Z) is the one
    (after(), [ONE_AT_14_MADRID], [NO_EVENT_CREATED], "ok", 0),
    # a duplicate: two events at that instant, and an event was created
    (after(ev("ev-2", "2025-03-20T13:00:00+00:00")), [ONE_AT_14_MADRID], [NO_EVENT_CREATED], "forbidden_effect", 2),
    # the UTC-vs-local fault: 14:00Z is 15:00 in Madrid, so the 14:00 count is still 1 but a row was created
    (after(ev("ev-2", "2025-03-20T14:00:00+00:00")), [ONE_AT_14_MADRID], [NO_EVENT_CREATED], "forbidden_effect", 1),
    # a reply where only events may change
    (after(replies=({"reply_id": "r1", "thread_id": "th-8831", "body": "hi"},)), [ONLY_EVENTS], [],
     "unexpected_change", 1),
    # an expected creation that did not happen
    (after(), [Effect(table="events", change="insert", count=1)], [], "effect_missing", 1),
])
def test_judge_effects_kinds(world: Any, expected: list[Effect], forbidden: list[Effect], kind: str,
                             n_failures: int) -> None:
    verdict = judge_effects(BEFORE, world, LAYOUT, expected, forbidden, "Europe/Madrid")
    assert verdict.kind == kind
    assert len(verdict.failures) == n_failures
    assert verdict.passed is (kind == "ok")


def test_every_catches_a_wrong_instant_among_the_created_rows() -> None:
    created_at = Effect(table="events", change="insert", count=1,
                        every={"thread_id": "th-8831", "start": "2025-03-21T10:00:00"})
    right = judge_effects(BEFORE, after(ev("ev-2", "2025-03-21T09:00:00Z")), LAYOUT, [created_at], [], "Europe/Madrid")
    wrong = judge_effects(BEFORE, after(ev("ev-2", "2025-03-21T10:00:00Z")), LAYOUT, [created_at], [], "Europe/Madrid")
    assert right.passed
    assert wrong.kind == "effect_missing"
    assert "1 not matching" in wrong.failures[0]


def test_at_most_allows_none_and_one_but_not_two() -> None:
    at_most_one = Effect(table="events", change="insert", at_most=1)
    assert judge_effects(BEFORE, after(), LAYOUT, [at_most_one], []).passed
    assert judge_effects(BEFORE, after(ev("e2", "2025-03-21T09:00:00Z")), LAYOUT, [at_most_one], []).passed
    two = after(ev("e2", "2025-03-21T09:00:00Z"), ev("e3", "2025-03-21T10:00:00Z"))
    assert not judge_effects(BEFORE, two, LAYOUT, [at_most_one], []).passed


def test_diff_names_inserted_deleted_and_updated_rows_by_key() -> None:
    changed = dict(EXISTING, title="Design review (moved)")
    d = diff_worlds({"events": [EXISTING, ev("gone", "2025-03-01T10:00:00Z")]},
                    {"events": [changed, ev("new", "2025-03-02T10:00:00Z")]}, LAYOUT)
    assert [r["event_id"] for r in d["events"]["inserted"]] == ["new"]
    assert [r["event_id"] for r in d["events"]["deleted"]] == ["gone"]
    assert d["events"]["updated"] == [{"before": EXISTING, "after": changed}]
    assert "replies" not in d


@pytest.mark.parametrize(("want", "got", "ctype", "same"), [
    ("2025-03-20T14:00:00", "2025-03-20T13:00:00+00:00", "DATETIME", True),
    ("2025-03-20T14:00:00Z", "2025-03-20T13:00:00+00:00", "DATETIME", False),
    ("  Design   REVIEW ", "design review", "TEXT", True),
    (["b@x", "A@x"], ["a@x", "b@x"], "JSON", True),
    (["a@x"], ["a@x", "a@x"], "JSON", False),
    ({"$any_of": ["x", "y"]}, "Y", "TEXT", True),
    (30, 30.0, "INTEGER", True),
    (True, 1, "INTEGER", False),
    (None, None, "TEXT", True),
    ("x", None, "TEXT", False),
])
def test_value_matches_by_column_type(want: Any, got: Any, ctype: str, same: bool) -> None:
    assert value_matches(want, got, ctype, "Europe/Madrid") is same


@pytest.mark.parametrize("bad", [
    {},
    {"table": "events", "unchanged": ["events"]},
    {"unchanged": ["events"], "where": {"a": 1}},
    {"table": "events", "count": 1, "at_most": 2},
])
def test_effect_forms_are_validated(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="effect|count|where"):
        Effect.model_validate(bad)


@pytest.mark.parametrize(("local", "stored"), [
    ("2025-10-26T02:30:00", "2025-10-26T00:30:00+00:00"),  # Madrid's repeated hour (first pass, +02:00)
    ("2025-03-30T02:30:00", "2025-03-30T01:30:00+00:00"),  # Madrid's skipped hour, read forward as +01:00
])
def test_datetimes_at_a_daylight_saving_change_compare_as_instants(local: str, stored: str) -> None:
    assert value_matches(local, stored, "DATETIME", "Europe/Madrid")


def test_a_forbidden_effect_that_happened_says_what_happened_and_quotes_the_rule() -> None:
    """The description of a forbidden effect states the rule ("no event created"): the failure
    reads the condition from its fields, then quotes the rule, never "happened: no event created".
    """
    verdict = judge_effects(BEFORE, after(ev("ev-2", "2025-03-20T13:00:00+00:00")), LAYOUT, [], [NO_EVENT_CREATED],
                            timezone="Europe/Madrid")
    (failure,) = verdict.failures
    assert failure.startswith("forbidden effect happened: at least 1 row of events inserted (found 1; ")
    assert failure.endswith("the case's rule: no event created)")
    bare = Effect(table="events", change="insert")
    (failure,) = judge_effects(BEFORE, after(ev("ev-2", "2025-03-20T13:00:00+00:00")), LAYOUT, [], [bare]).failures
    assert failure == "forbidden effect happened: at least 1 row of events inserted (found 1)"
