"""The fixed-n design the sequential gate is held against: how many paired decisions the exact
McNemar test (:func:`pytest_tooleffect.ci.comparison.mcnemar_exact`, McNemar 1947) needs to detect a
regression of a given size at a given α and power, from the discordance an unchanged agent shows.

The model (the same as the sequential design's, :mod:`.sequential`): an unchanged agent flips a
share ``D`` of its paired decisions, half each way; a regression of ``Δ`` adds ``Δ`` regressions on
top (``p₁₀ = D/2 + Δ``, ``p₀₁ = D/2``).  The test is one-sided at ``α`` (a regression is the only
direction a gate fails on): reject when ``P[Binomial(b + c, ½) ≥ b] ≤ α``, which is the shipped
two-sided :func:`mcnemar_exact` at ``2α`` with ``b > c``.  Power is exact: the sum over the number
of discordant pairs ``k ~ Binomial(n, p₁₀ + p₀₁)`` of ``P[Binomial(k, p₁₀/(p₁₀ + p₀₁)) ≥ b*_k]``.
The normal approximation of Connor, "Sample size for testing differences in proportions for the
paired-sample design", Biometrics 43(1), 207-211 (1987), gives the search its start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

__all__ = ["FixedN", "alternative", "fixed_n", "fixed_n_power", "mcnemar_critical"]

#: no search beyond this many pairs
MAX_N = 200_000


@lru_cache(maxsize=64)
def _critical(n_max: int, alpha: float) -> tuple[int, ...]:
    from scipy.stats import binom

    k = np.arange(n_max + 1)
    # isf(α) is the smallest x with P[X > x] ≤ α: the regressions needed are one more
    crit = binom.isf(alpha, k, 0.5) + 1
    # isf works in floating point: step back while b - 1 still rejects, forward while b does not
    crit = np.where(binom.sf(crit - 2, k, 0.5) <= alpha, crit - 1, crit)
    crit = np.where(binom.sf(crit - 1, k, 0.5) > alpha, crit + 1, crit)
    return tuple(int(c) for c in crit)


def mcnemar_critical(n_max: int, alpha: float) -> NDArray[np.int64]:
    """The fewest regressions ``b*_k`` for which the one-sided exact McNemar test at ``alpha`` rejects,
    for every number of discordant pairs ``k = 0 … n_max`` (``k + 1`` when no ``b`` rejects).

    Args:
        n_max: the largest number of discordant pairs.
        alpha: the one-sided level (the shipped two-sided :func:`mcnemar_exact` at ``2·alpha``).

    Returns:
        An integer array of length ``n_max + 1``.
    """
    return np.minimum(np.asarray(_critical(int(n_max), float(alpha)), dtype=np.int64), np.arange(n_max + 1) + 1)


def alternative(discordance: float, effect: float) -> tuple[float, float]:
    """``(p₁₀, p₀₁)`` of an agent that regressed by ``effect`` over an unchanged one's ``discordance``.

    Raises:
        ValueError: ``discordance`` not in [0, 1], ``effect`` not in [0, 1), or the two add up to a
            share of pairs above 1.
    """
    if not 0.0 <= discordance <= 1.0 or not 0.0 <= effect < 1.0:
        raise ValueError(f"discordance must be in [0, 1] and effect in [0, 1), got {discordance}, {effect}")
    if discordance + effect > 1.0:
        raise ValueError(f"discordance {discordance} plus a regression of {effect} flips more than every pair")
    return discordance / 2 + effect, discordance / 2


def fixed_n_power(n: int, alpha: float, p10: float, p01: float) -> float:
    """The exact power of the one-sided exact McNemar test on ``n`` pairs (module docstring).

    Args:
        n: paired decisions.
        alpha: one-sided level.
        p10: the share of pairs that are regressions.
        p01: the share that are improvements.

    Returns:
        ``P(reject)`` in [0, 1] (the false-regression rate when ``p10 <= p01``).
    """
    from scipy.stats import binom

    d = p10 + p01
    if n < 1 or d <= 0:
        return 0.0
    k = np.arange(n + 1)
    crit = mcnemar_critical(n, alpha)
    q = p10 / d
    return float(np.sum(binom.pmf(k, n, d) * binom.sf(crit - 1, k, q)))


@dataclass(frozen=True)
class FixedN:
    """A fixed-n design: ``n`` paired decisions, the exact ``power`` there, the normal-approximation
    ``approx_n`` (Connor 1987) and the alternative ``(p10, p01)`` it was computed at.
    """

    n: int
    power: float
    approx_n: int
    p10: float
    p01: float


def fixed_n(alpha: float, beta: float, effect: float, discordance: float) -> FixedN:
    """The fewest paired decisions whose one-sided exact McNemar test at ``alpha`` has power
    ``1 - beta`` against a regression of ``effect`` over an unchanged agent's ``discordance``.

    Args:
        alpha: one-sided level (0 < alpha < 1).
        beta: 1 - power (0 < beta < 1).
        effect: the regression, as a fraction (0 < effect < 1).
        discordance: the share of pairs an unchanged agent flips (0 <= discordance <= 1).

    Returns:
        The design (:class:`FixedN`).

    Raises:
        ValueError: an argument out of range, or no ``n`` up to :data:`MAX_N` reaches the power.
    """
    from scipy.stats import norm

    if not (0 < alpha < 1 and 0 < beta < 1 and 0 < effect < 1):
        raise ValueError(f"alpha, beta and effect must be in (0, 1), got {alpha}, {beta}, {effect}")
    p10, p01 = alternative(discordance, effect)
    d = p10 + p01
    za, zb = float(norm.isf(alpha)), float(norm.isf(beta))
    approx = math.ceil((za * math.sqrt(d) + zb * math.sqrt(max(d - effect ** 2, 0.0))) ** 2 / effect ** 2)
    def reaches(m: int) -> bool:
        return fixed_n_power(m, alpha, p10, p01) >= 1 - beta

    lo, hi = 1, max(2, approx)
    while not reaches(hi):
        lo, hi = hi, hi * 2
        if hi > MAX_N:
            raise ValueError(f"no n up to {MAX_N} reaches power {1 - beta} against {effect} at discordance "
                             f"{discordance}")
    while hi - lo > 1:  # the first n that reaches it, as if the power rose with n
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    # the power is not monotone in n (the test is discrete): an earlier n may reach it too
    n = next((m for m in range(max(1, hi - max(20, hi // 10)), hi) if reaches(m)), hi)
    return FixedN(n, fixed_n_power(n, alpha, p10, p01), approx, p10, p01)
