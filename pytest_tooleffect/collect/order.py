"""The order that settles a sequential gate sooner without biasing it.

A sequential paired test (``ci/sequential_gate.py``) learns only from discordant pairs: a decision
that passed in the baseline and fails now (a regression), or the reverse (an improvement).  Its
error bounds hold at every stopping time only when every prefix of the run is a fair sample of the
block: a decision that failed in the baseline can only improve, one that passed can only regress,
so an order that put the baseline's failures first would show improvements first and could settle
"no regression" on an agent that regressed (and the reverse for passes first).  So the order keeps
every prefix representative, and puts first only what is informative in both directions alike:

1. **discordant** cases: cases whose trials in the baseline disagree (one passed, another failed,
   under ``--tooleffect-repeats``): where a new run flips most often, and, taken with all their
   trials, as likely to flip one way as the other when nothing changed;
2. the **rest**.

Within each tier the items are stratified by stratum (the label's class and the baseline's pass or
fail of the paired decision) and interleaved in proportion to each stratum's size (a stratum with a
fifth of the tier's items has every fifth place), each stratum's items in a pseudo-random order
seeded by ``seed`` (the baseline's identity): every class is reached at once, every prefix holds
the block's mix of passes and failures, and the order is the same on every xdist worker (each
collects on its own) and in the next run with the same baseline.  Node ids are not changed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["TIERS", "Ordered", "informative_first"]

#: the tiers, most informative first: cases discordant among the baseline's trials, then the rest
TIERS = ("discordant", "rest")

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


def informative_first(items: Sequence[T], tier: Callable[[T], str], stratum: Callable[[T], str],
                      seed: str = "") -> Ordered:
    """Order items tier by tier, each tier stratified and interleaved in proportion.

    Args:
        items: the items, in collection order.
        tier: an item's tier (one of :data:`TIERS`).
        stratum: an item's stratum (its label's class and its baseline pass or fail, e.g. ``single/pass``).
        seed: the seed of each stratum's pseudo-random order (the same seed, the same order).

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
    keys: dict[int, tuple[int, float, str, int]] = {}
    for t, name in enumerate(TIERS):
        groups: dict[str, list[int]] = {}
        for i in range(len(items)):
            if tiers[i] == name:
                groups.setdefault(strata[i], []).append(i)
        for label, idx in sorted(groups.items()):
            random.Random(f"{seed}|{name}|{label}").shuffle(idx)
            for k, i in enumerate(idx):  # evenly spread over the tier: the k-th of n at (k + 0.5) / n
                keys[i] = (t, (k + 0.5) / len(idx), label, i)
    order = tuple(sorted(keys, key=lambda i: keys[i]))
    return Ordered(order=order, tiers={name: tiers.count(name) for name in TIERS},
                   moved=sum(1 for pos, i in enumerate(order) if pos != i))
