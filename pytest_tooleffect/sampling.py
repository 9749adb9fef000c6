"""Stratified sampling of decision points by position bucket.

Drawing a fixed quota from each position bucket (instead of a uniform sample) puts enough
final "stop" decisions into the set to compute a rate on, at the price of making the class
proportions a property of the quota rather than of production; the sampler therefore
returns the population count per bucket beside the sample, and the family records both.

Per bucket the sampler keeps a reservoir (Vitter's Algorithm R, "Random sampling with a
reservoir", ACM TOMS 11(1), 1985) so memory is bounded by the quota, not the input.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["StratifiedSample", "stratified_sample"]

T = TypeVar("T")


@dataclass(frozen=True)
class StratifiedSample(Generic[T]):
    """The drawn items per bucket, the quota asked for, and how many items each bucket held."""

    items: dict[str, list[T]]
    quota: dict[str, int]
    population: dict[str, int]


def stratified_sample(
    items: Iterable[tuple[str, T]], quota: Mapping[str, int], seed: int = 0
) -> StratifiedSample[T]:
    """Draw up to ``quota[b]`` items uniformly from each bucket ``b``, in one streaming pass.

    Args:
        items: ``(bucket, item)`` pairs, in a stable order (the draw depends on it).
        quota: items wanted per bucket; buckets absent from the quota are counted, not drawn.
        seed: seed of the pseudo-random generator (same input + seed → same sample).

    Returns:
        The sample; within a bucket items keep their input order.

    """
    rng = random.Random(seed)
    reservoirs: dict[str, list[tuple[int, T]]] = {b: [] for b in quota}
    population: dict[str, int] = {}
    for bucket, item in items:
        seen = population.get(bucket, 0)
        population[bucket] = seen + 1
        k = quota.get(bucket, 0)
        if k <= 0:
            continue
        res = reservoirs[bucket]
        if len(res) < k:
            res.append((seen, item))
        else:
            j = rng.randrange(seen + 1)
            if j < k:
                res[j] = (seen, item)
    drawn = {b: [it for _, it in sorted(r, key=lambda p: p[0])] for b, r in reservoirs.items()}
    return StratifiedSample(items=drawn, quota=dict(quota), population=population)
