"""Labeller agreement over set-valued labels.

Two labellers' labels of the same states are compared as sets of actions, at two levels:
*name* (the set of tool names, ``null`` for no tool) and *action* (names with arguments).

* exact-set agreement: the share of states whose two sets are equal;
* Krippendorff's alpha with the MASI distance (Passonneau, "Measuring agreement on
  set-valued items (MASI)", LREC 2006), computed by NLTK's ``AnnotationTask``;
* per-class agreement: for each class of labeller A, the share of its states where B's set is
  equal;
* disagreements, each marked ``both_defensible`` when the two sets share an action (each side
  accepts something the other accepts) and ``conflict`` when they are disjoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["agreement", "label_class", "name_set", "action_set"]


def _canon(args: Any) -> str:
    return json.dumps(args or {}, sort_keys=True, ensure_ascii=False).casefold()


def _members(label: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for a in label.get("valid_actions") or []:
        if "parallel" in a:
            out.append({"tool": "+".join(sorted(str(m["tool"]) for m in a["parallel"])),
                        "args": [m.get("args") for m in a["parallel"]]})
        else:
            out.append(a)
    return out


def name_set(label: Mapping[str, Any]) -> frozenset[str]:
    """The label's valid tool names (``"null"`` for no tool)."""
    return frozenset("null" if a.get("tool") is None else str(a["tool"]) for a in _members(label))


def action_set(label: Mapping[str, Any]) -> frozenset[str]:
    """The label's valid actions with canonical arguments."""
    return frozenset("null" if a.get("tool") is None else f"{a['tool']} {_canon(a.get('args'))}"
                     for a in _members(label))


def label_class(label: Mapping[str, Any]) -> str:
    """``no_tool``, ``several`` or ``single`` (DESIGN.md)."""
    acts = label.get("valid_actions") or []
    if any("parallel" not in a and a.get("tool") is None for a in acts):
        return "no_tool"
    return "several" if len(acts) >= 2 else "single"


def _alpha(pairs: Sequence[tuple[frozenset[str], frozenset[str]]]) -> float | None:
    from nltk.metrics.agreement import AnnotationTask
    from nltk.metrics.distance import masi_distance

    data = []
    for i, (a, b) in enumerate(pairs):
        data.append(("A", str(i), a))
        data.append(("B", str(i), b))
    if not data:
        return None
    try:
        return float(AnnotationTask(data=data, distance=masi_distance).alpha())
    except ZeroDivisionError:  # every set identical: no expected disagreement
        return 1.0


def agreement(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Compare two labellers' labels, keyed by case id (only shared ids are compared).

    Returns:
        ``{"n", "exact_name", "exact_action", "alpha_masi_name", "alpha_masi_action",
        "class_agreement", "per_class", "disagreements": [...]}``; shares are fractions in [0, 1].

    """
    ids = sorted(set(a) & set(b))
    n = len(ids)
    name_pairs = [(name_set(a[i]), name_set(b[i])) for i in ids]
    act_pairs = [(action_set(a[i]), action_set(b[i])) for i in ids]
    per_class: dict[str, dict[str, Any]] = {}
    for i, (x, y) in zip(ids, name_pairs):
        c = label_class(a[i])
        row = per_class.setdefault(c, {"n": 0, "exact_name": 0})
        row["n"] += 1
        row["exact_name"] += int(x == y)
    for row in per_class.values():
        row["exact_name"] = row["exact_name"] / row["n"]
    disagreements = []
    for i, (x, y), (xa, ya) in zip(ids, name_pairs, act_pairs):
        if xa != ya:
            disagreements.append({
                "id": i,
                "a": sorted(xa), "b": sorted(ya),
                "names_equal": x == y,
                "kind": "both_defensible" if xa & ya else "conflict",
            })
    return {
        "n": n,
        "exact_name": sum(x == y for x, y in name_pairs) / n if n else None,
        "exact_action": sum(x == y for x, y in act_pairs) / n if n else None,
        "alpha_masi_name": _alpha(name_pairs),
        "alpha_masi_action": _alpha(act_pairs),
        "class_agreement": sum(label_class(a[i]) == label_class(b[i]) for i in ids) / n if n else None,
        "per_class": per_class,
        "disagreements": disagreements,
    }
