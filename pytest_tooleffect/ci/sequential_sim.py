"""The sequential gate's error rates and sample numbers by simulation, beside the fixed-n exact
McNemar test on the same simulated runs (``docs/sequential.md`` has the table; ``bench/sequential.py``
prints it).

A simulated run is a stream of paired decisions, each independently a regression (``p10``), an
improvement (``p01``) or concordant; the verdicts are :func:`pytest_tooleffect.ci.sequential.log_wealth`'s
statistics against the thresholds :func:`~pytest_tooleffect.ci.sequential.settle` uses (the same code),
after every pair.  Vectorised with numpy over runs × pairs, in chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pytest_tooleffect.ci.sample_size import mcnemar_critical
from pytest_tooleffect.ci.sequential import SequentialDesign, log_wealth

__all__ = ["SimResult", "simulate"]


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` measured (shares of runs in [0, 1]; pairs are counts).

    Attributes:
        runs: simulated runs.
        horizon: pairs each run could use (``max_pairs`` if the design has one).
        regression: share of runs whose gate said "regression" (the first verdict reached).
        no_regression: share whose gate said "no regression".
        not_settled: share with no verdict within the horizon.
        ever_regression: share whose regression statistic reached its threshold at any pair up to the
            horizon, whatever the other side said: the false-regression rate of the worst stopping
            time (the largest over every stopping time, a gate that ignored "no regression" included).
        mean_pairs: average pairs to the verdict (the horizon for a run with none): the average sample number.
        fixed_n: the fixed-n design's pairs compared on the same runs (``None`` when not asked).
        fixed_reject: share of runs whose first ``fixed_n`` pairs the one-sided exact McNemar test rejects.
    """

    runs: int
    horizon: int
    regression: float
    no_regression: float
    not_settled: float
    ever_regression: float
    mean_pairs: float
    fixed_n: int | None
    fixed_reject: float | None

    def se(self, share: float) -> float:
        """The binomial standard error of a share measured over :attr:`runs`."""
        return math.sqrt(max(share * (1 - share), 0.0) / self.runs)


def simulate(design: SequentialDesign, p10: float, p01: float, runs: int, horizon: int, seed: int,
             fixed_n: int | None = None, chunk: int = 500) -> SimResult:
    """Simulate ``runs`` gated runs.

    Args:
        design: the sequential design (its ``max_pairs``, when set, caps ``horizon``).
        p10: the share of pairs that are regressions.
        p01: the share that are improvements.
        runs: how many runs.
        horizon: the most pairs a run may use.
        seed: numpy's seed (the same seed, the same figures).
        fixed_n: also test the first ``fixed_n`` pairs with the one-sided exact McNemar test at
            ``design.alpha`` (raises the horizon to ``fixed_n`` if needed).
        chunk: runs simulated at once (memory: about ``chunk × horizon × 60`` bytes).

    Returns:
        The measured rates (:class:`SimResult`).

    Raises:
        ValueError: ``p10``, ``p01`` or ``runs``/``horizon`` out of range.
    """
    if p10 < 0 or p01 < 0 or p10 + p01 > 1 or runs < 1 or horizon < 1:
        raise ValueError(f"simulate: need p10, p01 >= 0 with p10 + p01 <= 1 and runs, horizon >= 1, got "
                         f"{p10}, {p01}, {runs}, {horizon}")
    if design.max_pairs is not None:
        horizon = min(horizon, design.max_pairs)
    width = max(horizon, fixed_n or 0)
    rng = np.random.default_rng(seed)
    log_a, log_b = math.log(1 / design.alpha), math.log(1 / design.beta)
    crit = mcnemar_critical(fixed_n, design.alpha) if fixed_n else None
    counts = {"regression": 0, "no_regression": 0, "ever": 0, "fixed": 0}
    pairs_total = 0.0
    n = np.arange(1, horizon + 1)[None, :]
    for start in range(0, runs, chunk):
        size = min(chunk, runs - start)
        u = rng.random((size, width))
        reg, imp = u < p10, (u >= p10) & (u < p10 + p01)
        r, i = np.cumsum(reg, axis=1), np.cumsum(imp, axis=1)
        if crit is not None and fixed_n:
            b, k = r[:, fixed_n - 1], r[:, fixed_n - 1] + i[:, fixed_n - 1]
            counts["fixed"] += int(np.sum(b >= crit[k]))
        lr, ln = log_wealth(design, r[:, :horizon], i[:, :horizon], n)
        hit_r, hit_n = lr >= log_a, ln >= log_b
        first_r = np.where(hit_r.any(axis=1), hit_r.argmax(axis=1), horizon)
        first_n = np.where(hit_n.any(axis=1), hit_n.argmax(axis=1), horizon)
        # settle() looks at the regression side first: a pair where both cross is a regression
        regression = (first_r < horizon) & (first_r <= first_n)
        no_regression = (first_n < horizon) & (first_n < first_r)
        counts["regression"] += int(regression.sum())
        counts["no_regression"] += int(no_regression.sum())
        counts["ever"] += int((first_r < horizon).sum())
        pairs_total += float(np.where(regression | no_regression, np.minimum(first_r, first_n) + 1, horizon).sum())
    settled = counts["regression"] + counts["no_regression"]
    return SimResult(runs=runs, horizon=horizon, regression=counts["regression"] / runs,
                     no_regression=counts["no_regression"] / runs, not_settled=(runs - settled) / runs,
                     ever_regression=counts["ever"] / runs, mean_pairs=pairs_total / runs, fixed_n=fixed_n,
                     fixed_reject=None if fixed_n is None else counts["fixed"] / runs)
