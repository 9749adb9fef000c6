"""The order that settles a sequential gate sooner: the most informative items first.

A sequential paired test (``ci/sequential_gate.py``) learns only from discordant pairs: a decision
that passed in the baseline and fails now, or the reverse.  A case that was discordant among the
baseline's repeats (it passed in one trial and failed in another) or that failed in the baseline is
where a new run differs most often, so it runs first; the rest follow.  So that no class waits for
the others, the order is stratified by the label's class: the first item of every class comes
first, then, tier by tier, each class's items are interleaved in proportion to their number (a
class with half the tier's items has every other place).

The order depends only on the items and the tiers the baseline gives them (ties keep collection
order), so every xdist worker, which collects on its own, gets the same order, and so does the
next run with the same baseline.  Node ids are not changed: only the list's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["TIERS", "Ordered", "informative_first"]

#: the tiers, most informative first: a case discordant among the baseline's trials, one that failed
#: in it, and the rest (passed, or not in the baseline)
TIERS = ("discordant", "failing", "rest")

T = TypeVar("T")


@dataclass(frozen=True)
class Ordered:
    """What :func:`informative_first` did.

    Attributes:
        order: the new positions (``order[i]`` is the index of the item now at ``i``).
        tiers: items per tier (:data:`TIERS`).
        moved: items whose position changed.
    """

    order: tuple[int, ...]
    tiers: dict[str, int]
    moved: int


def informative_first(items: Sequence[T], tier: Callable[[T], str], stratum: Callable[[T], str]) -> Ordered:
    """Order items most informative first, stratified by class.

    Args:
        items: the items, in collection order.
        tier: an item's tier (one of :data:`TIERS`).
        stratum: an item's stratum (its label's class).

    Returns:
        The order (indices into ``items``), the count per tier and how many items moved.

    Raises:
        ValueError: a tier not in :data:`TIERS`.
    """
    tiers = [tier(it) for it in items]
    bad = sorted(set(tiers) - set(TIERS))
    if bad:
        raise ValueError(f"unknown tiers {bad}: the tiers are {list(TIERS)}")
    strata = [stratum(it) for it in items]
    # each stratum's items, most informative first (collection order within a tier)
    by_stratum: dict[str, list[int]] = {}
    for i in sorted(range(len(items)), key=lambda i: (TIERS.index(tiers[i]), i)):
        by_stratum.setdefault(strata[i], []).append(i)
    heads = sorted((idx[0] for idx in by_stratum.values()), key=lambda i: (TIERS.index(tiers[i]), i))
    keys: dict[int, tuple[int, float, int]] = {}
    for t, name in enumerate(TIERS):
        for idx in by_stratum.values():
            rest = [i for i in idx if tiers[i] == name and i not in heads]
            for k, i in enumerate(rest):  # evenly spread over the tier: the k-th of n at (k + 0.5) / n
                keys[i] = (t, (k + 0.5) / len(rest), i)
    order = tuple(heads) + tuple(sorted(keys, key=lambda i: keys[i]))
    return Ordered(order=order, tiers={name: tiers.count(name) for name in TIERS},
                   moved=sum(1 for pos, i in enumerate(order) if pos != i))
