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
from typing import Any, Generic, TypeVar

__all__ = ["StratifiedSample", "sample_cases", "stratified_sample"]

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


def _case_id(run_id: str, step: int) -> str:
    import re

    base = re.sub(r"[^A-Za-z0-9_.:-]+", "-", run_id).strip("-") or "run"
    if not base[0].isalnum():
        base = "r" + base
    return f"{base}-s{step:02d}"


def sample_cases(
    paths: Iterable[str], quota: Mapping[str, int], fmt: str = "auto", buckets: int | None = None, seed: int = 0
) -> tuple[list[dict[str, Any]], StratifiedSample[Any], dict[str, Any]]:
    """Sample decision points from trace files into unlabelled case dicts.

    Args:
        paths: trace files, read in order (each streamed where its format allows).
        quota: decision points wanted per position bucket.
        fmt: ``auto``, ``openai``, ``tau-bench`` or ``otel`` (see :func:`~pytest_tooleffect.traces.read_runs`).
        buckets: ``None`` for first / middle / last, else ``N`` quantile buckets ``q1``..``qN``.
        seed: sampling seed.

    Returns:
        ``(cases sorted by id, the sample with quota and population, family hints)``; the hints
        hold the first system prompt and tool list seen.
    """
    from .traces import decision_points, position_bucket, read_runs, recorded_from_message

    hints: dict[str, Any] = {"system_prompt": None, "tools": None}

    def keyed() -> Any:
        for path in paths:
            for run in read_runs(path, fmt):
                if hints["system_prompt"] is None and run.system_prompt:
                    hints["system_prompt"] = run.system_prompt
                if hints["tools"] is None and run.tools:
                    hints["tools"] = run.tools
                for dp in decision_points(run):
                    yield position_bucket(dp.step, dp.run_length, buckets), (str(path), dp)

    sample = stratified_sample(keyed(), quota, seed=seed)
    cases = []
    for bucket, drawn in sample.items.items():
        for path, dp in drawn:
            cases.append({
                "id": _case_id(dp.run_id, dp.step),
                "placement": {"step": dp.step, "run_length": dp.run_length, "bucket": bucket},
                "messages": dp.messages,
                "recorded": recorded_from_message(dp.recorded),
                "source": {"kind": "trace", "dataset": path.rsplit("/", 1)[-1], "trace_id": dp.run_id,
                           "position": dp.position},
            })
    cases.sort(key=lambda c: c["id"])
    return cases, sample, hints
