"""A family's ``quota`` and ``population`` checked against the cases its files hold.

Part of the collection stage.  ``family.yaml`` may say, per position bucket, how many states were
drawn (``quota``) and how many the bucket held (``population``); the report prints both beside
the bucket's rows and weighs its production estimate by the population.  Numbers that disagree
with the case files would be printed as facts, so a family whose numbers disagree is refused at
collection, as any other error of its family file is.

What must hold, per bucket ``b`` (a bucket missing from ``quota`` has quota 0, one missing from
``population`` has population 0):

* ``quota``: the family's case files hold exactly ``quota[b]`` cases in ``b``, or
  ``population[b]`` when the population is smaller (a sampler takes every state of a bucket that
  held fewer than its quota);
* ``population``: the case files hold at most ``population[b]`` cases in ``b``, and at least one
  when ``population[b] > 0``: the report's post-stratified estimate of the production rate weighs
  each bucket's rate by its population, and a bucket with states but no case has no rate, so the
  estimate would leave its states out while its label says it covers them all (an estimate
  over some buckets only lists only those buckets in ``population``).

A ``quota`` bucket with no case is an error by the first rule, unless the population says the
bucket held no state (a sampler found none to draw): then no state is left out of the estimate.

Every case of the family's files is counted, those that fail validation too (their bucket as
written); a duplicate id is not counted twice.  While some entry cannot be read at all (no bucket
can be told), nothing is checked: that entry is already an error of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from pytest_tooleffect.util.display import shown

__all__ = ["census_problems"]


def census_problems(family_file: Path, quota: Mapping[str, int] | None, population: Mapping[str, int] | None,
                    counts: Counter[str], unreadable: int = 0) -> list[str]:
    """The ways a family's ``quota`` and ``population`` disagree with its cases.

    Args:
        family_file: the family file (named in each problem).
        quota: ``quota`` of the family file (cases drawn per bucket), or ``None`` when not given.
        population: ``population`` of the family file (states per bucket), or ``None`` when not given.
        counts: the cases the family's case files hold, per bucket.
        unreadable: entries of the case files whose bucket cannot be told (nothing is checked when
            there are some).

    Returns:
        One line per disagreement naming the file, the field (``quota.middle``) and both numbers,
        bucket by bucket in sorted order; empty when they agree or nothing is given.
    """
    if unreadable:
        return []
    problems: list[str] = []
    if quota is not None:
        for bucket in sorted(set(quota) | set(counts)):
            n = counts.get(bucket, 0)
            want = quota.get(bucket, 0)
            cap = population.get(bucket, 0) if population is not None else None
            if cap is not None and cap < want:
                want = cap
            if n == want:
                continue
            given = f"{quota[bucket]}" if bucket in quota else "0 (the bucket is not listed)"
            if cap is not None and cap < quota.get(bucket, 0):
                given += f", capped at population.{shown(bucket)} {cap}"
            problems.append(f"{family_file}: quota.{shown(bucket)}: {given}, but the family's case files hold {n} "
                            f"case{'s' if n != 1 else ''} in bucket {shown(bucket)}")
    if population is not None:
        total = sum(population.values())
        for bucket in sorted(set(population) | set(counts)):
            n, pop = counts.get(bucket, 0), population.get(bucket, 0)
            if n == 0 and pop > 0:
                problems.append(f"{family_file}: population.{shown(bucket)}: {pop} states, but the family's case "
                                f"files hold no case in bucket {shown(bucket)}: the post-stratified estimate of "
                                f"the production rate would leave out {pop} of the {total} states (draw cases from "
                                "the bucket, or leave it out of population to estimate over the other buckets only)")
            if n > pop:
                given = f"{pop}" if bucket in population else "0 (the bucket is not listed)"
                problems.append(f"{family_file}: population.{shown(bucket)}: {given} states, but the family's case "
                                f"files hold {n} cases in bucket {shown(bucket)} (a bucket holds at least the cases "
                                "drawn from it)")
    return problems
