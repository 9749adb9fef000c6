"""Effects: what a decision's tool calls did to the world, judged against the case's conditions.

Pure: takes two snapshots (``{table: [row]}``) and the world's table layout
(``{table: {"key": column, "columns": {column: type}}}``, as ``sandbox/worlds/*.py`` declare
it); imports no pytest, litellm or docker.

Values in ``where`` and ``every`` compare by column type:

* ``DATETIME``: as instants; a naive value is read in the case's time zone (stored values are UTC).
* ``TEXT``: after NFKC, trimming, collapsing runs of whitespace and casefolding.
* ``JSON``: lists as multisets of such values (order ignored), objects key by key.
* ``INTEGER`` / ``REAL``: numerically.

A condition value may also be ``{"$any_of": [v1, v2, ...]}``.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pytest_tooleffect.oracle.values import parse_datetime

__all__ = ["EFFECT_KINDS", "EffectVerdict", "diff_worlds", "judge_effects", "reference_key"]

EffectKind = Literal["ok", "forbidden_effect", "unexpected_change", "effect_missing"]
#: effect verdict kinds, most serious first
EFFECT_KINDS: tuple[str, ...] = ("forbidden_effect", "unexpected_change", "effect_missing", "ok")

Rows = Sequence[Mapping[str, Any]]
Snapshot = Mapping[str, Rows]
Layout = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class EffectVerdict:
    """The effect-level verdict of one item.

    Attributes:
        kind: ``ok``, or the most serious failure (:data:`EFFECT_KINDS`).
        failures: one line per condition that failed: which, and how many rows were found.
        diff: ``{table: {"inserted": [row], "deleted": [row], "updated": [{"before", "after"}]}}``
            for the tables that changed.
    """

    kind: EffectKind
    failures: tuple[str, ...] = ()
    diff: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """``kind == "ok"``."""
        return self.kind == "ok"

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        return {"passed": self.passed, "kind": self.kind, "failures": list(self.failures), "diff": dict(self.diff)}


def diff_worlds(before: Snapshot, after: Snapshot, layout: Layout) -> dict[str, dict[str, list[Any]]]:
    """Rows inserted, deleted and updated per table, matched by each table's key column.

    Returns:
        Only the tables that changed: ``{table: {"inserted": [...], "deleted": [...],
        "updated": [{"before": row, "after": row}]}}``.
    """
    out: dict[str, dict[str, list[Any]]] = {}
    for table, spec in layout.items():
        key = spec["key"]
        old = {row[key]: row for row in before.get(table, ())}
        new = {row[key]: row for row in after.get(table, ())}
        inserted = [new[k] for k in new if k not in old]
        deleted = [old[k] for k in old if k not in new]
        updated = [{"before": old[k], "after": new[k]} for k in new if k in old and old[k] != new[k]]
        if inserted or deleted or updated:
            out[table] = {"inserted": inserted, "deleted": deleted, "updated": updated}
    return out


def _text(value: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", value).split()).casefold()


def _instant(value: Any, zone: str) -> datetime | None:
    """``value`` as an aware instant (naive: read in ``zone``), or ``None`` when it is not one."""
    try:
        return parse_datetime(value, zone)
    except ValueError:
        return None


def _canon(value: Any) -> Any:
    """A hashable, normalised form of a JSON value (for multiset comparison)."""
    if isinstance(value, str):
        return ("s", _text(value))
    if isinstance(value, bool) or value is None:
        return ("v", value)
    if isinstance(value, int | float):
        return ("n", float(value))
    if isinstance(value, Mapping):
        return ("o", tuple(sorted((str(k), _canon(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("l", tuple(sorted(Counter(_canon(v) for v in value).items(), key=repr)))
    return ("r", repr(value))


def value_matches(want: Any, got: Any, column_type: str, zone: str) -> bool:
    """Whether a stored value ``got`` matches the condition value ``want`` (see module docstring)."""
    if isinstance(want, Mapping) and set(want) == {"$any_of"}:
        return any(value_matches(w, got, column_type, zone) for w in want["$any_of"])
    if want is None or got is None:
        return want is None and got is None
    if column_type == "DATETIME":
        a, b = _instant(want, zone), _instant(got, zone)
        # as timestamps: Python never calls a repeated or skipped local time equal across zones
        return a is not None and b is not None and a.timestamp() == b.timestamp()
    if column_type == "TEXT":
        return isinstance(want, str) and isinstance(got, str) and _text(want) == _text(got)
    if column_type in ("INTEGER", "REAL"):
        return (isinstance(want, int | float) and isinstance(got, int | float) and not isinstance(want, bool)
                and float(want) == float(got))
    return bool(_canon(want) == _canon(got))


def _matches(row: Mapping[str, Any], where: Mapping[str, Any], columns: Mapping[str, str], zone: str) -> bool:
    return all(value_matches(want, row.get(col), columns.get(col, "JSON"), zone) for col, want in where.items())


def reference_key(calls: Sequence[Any]) -> str:
    """The key of a reference trajectory (``Effect.same_as_after``) in ``judge_effects``'s
    ``references``: its calls as canonical JSON.
    """
    import json

    return json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls], sort_keys=True)


def _holds(effect: Any, before: Snapshot, after: Snapshot, changes: Mapping[str, Any], layout: Layout,
           zone: str, references: Mapping[str, Snapshot]) -> tuple[bool, str]:
    """Whether one condition holds, and what was found (for the failure line)."""
    if getattr(effect, "same_as_after", None) is not None:
        reference = references.get(reference_key(effect.same_as_after))
        if reference is None:
            return False, "the reference trajectory was not run"
        differ = diff_worlds(reference, after, layout)
        if not differ:
            return True, "same state"
        parts = []
        for table, entry in differ.items():
            key = layout[table]["key"]
            rows = [r["after"][key] for r in entry["updated"]] + [r[key] for r in entry["inserted"]] + \
                [r[key] for r in entry["deleted"]]
            parts.append(f"{table}: {', '.join(map(str, rows[:5]))}" + (" ..." if len(rows) > 5 else ""))
        return False, "differs at " + "; ".join(parts)
    if effect.unchanged is not None or effect.only_changed is not None:
        if effect.unchanged is not None:
            tables = list(effect.unchanged)
        else:
            tables = [t for t in layout if t not in effect.only_changed]
        changed = [t for t in tables if t in changes]
        return (not changed, f"changed: {', '.join(changed)}" if changed else "unchanged")
    columns = layout[effect.table]["columns"]
    if effect.change is None:
        pool = list(after.get(effect.table, ()))
    else:
        entry = changes.get(effect.table, {})
        if effect.change == "update":
            pool = [u["after"] for u in entry.get("updated", [])]
        else:
            pool = list(entry.get("inserted" if effect.change == "insert" else "deleted", []))
    rows = [r for r in pool if _matches(r, effect.where, columns, zone)]
    n = len(rows)
    if effect.count is not None:
        ok = n == effect.count
    else:
        low = effect.at_least if effect.at_least is not None else (0 if effect.at_most is not None else 1)
        ok = n >= low and (effect.at_most is None or n <= effect.at_most)
    bad = [r for r in rows if not _matches(r, effect.every, columns, zone)] if effect.every else []
    found = f"found {n}" + (f", {len(bad)} not matching {dict(effect.every)}" if bad else "")
    return ok and not bad, found


def judge_effects(before: Snapshot, after: Snapshot, layout: Layout, expected: Sequence[Any],
                  forbidden: Sequence[Any], timezone: str | None = None,
                  references: Mapping[str, Snapshot] | None = None) -> EffectVerdict:
    """Judge the world change against the expected and forbidden conditions.

    Args:
        before: the seeded world.
        after: the world after the calls ran.
        layout: the world's tables (key column and column types).
        expected: :class:`~pytest_tooleffect.formats.Effect` conditions that must all hold.
        forbidden: conditions none of which may hold.
        timezone: the zone naive date-times are read in (default UTC).
        references: the end state of each reference trajectory a ``same_as_after`` condition
            names, keyed by :func:`reference_key`; compared exactly, table by table.

    Returns:
        The :class:`EffectVerdict` (``forbidden_effect`` > ``unexpected_change`` > ``effect_missing``).

    Raises:
        KeyError: a condition names a table the layout does not have (validated at load time).
    """
    zone = timezone or "UTC"
    changes = diff_worlds(before, after, layout)
    failures: list[str] = []
    kinds: set[str] = set()
    for effect in forbidden:
        holds, found = _holds(effect, before, after, changes, layout, zone, references or {})
        if holds:
            # what happened, from the fields: a description states the rule ("no event created")
            rule = f"; the case's rule: {effect.describe()}" if effect.description else ""
            failures.append(f"forbidden effect happened: {effect.reading()} ({found}{rule})")
            kinds.add("forbidden_effect")
    for effect in expected:
        holds, found = _holds(effect, before, after, changes, layout, zone, references or {})
        if not holds:
            failures.append(f"expected effect missing: {effect.describe()} ({found})")
            kinds.add("unexpected_change" if effect.table is None and effect.same_as_after is None
                      else "effect_missing")
    kind = next((k for k in EFFECT_KINDS if k in kinds), "ok")
    return EffectVerdict(kind, tuple(failures), changes)  # type: ignore[arg-type]
