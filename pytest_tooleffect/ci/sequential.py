"""The sequential paired gate's test: as paired decisions complete, **regression**, **no regression
beyond the margin**, **not yet**, or (a budget reached) **not settled**.

The method: two test martingales on the paired decisions, each a mixture of constant bets
(testing by betting: Ville, *Étude critique de la notion de collectif*, 1939; Shafer, "Testing by
betting", JRSS A 184(2), 2021; Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS B 86(1), 2024), stopped by Ville's inequality.  Each pair is
``X = +1`` (the baseline passed, the run failed: a regression), ``-1`` (an improvement) or ``0``;
``Δ = E[X] = p₁₀ - p₀₁`` is the pass rate's drop in rate points (as a fraction).

- **Regression** rejects ``H_R: Δ ≤ 0`` with ``M_R = Σ_k w_k Π_t (1 + λ_k X_t)``, ``λ_k ∈ (0, 1)``.
  A concordant pair leaves it unchanged, so it is a **mixture SPRT on the binomial of regressions
  among the discordant pairs**: each term is Wald's likelihood ratio of ``q = (1 + λ_k)/2``
  against ``q = 1/2`` (``q`` = the share of regressions among discordant pairs; Wald, *Sequential
  Analysis*, 1947; Robbins, "Statistical methods related to the law of the iterated logarithm",
  Ann. Math. Stat. 41(5), 1970, for mixtures).  Under ``H_R``, whatever the discordance, ``M_R`` is a
  non-negative supermartingale with ``M_R(0) = 1``, so ``P(∃t: M_R(t) ≥ 1/α) ≤ α`` (Ville): the
  false-regression rate is at most ``α`` at **every** stopping time, however the caller stops.
- **No regression beyond the margin** rejects ``H_N: Δ ≥ m`` (``m`` = :attr:`SequentialDesign.margin`,
  or :attr:`SequentialDesign.effect` when the margin is 0: a zero margin cannot be settled by an
  unchanged agent) with ``M_N = Σ_k v_k Π_t (1 + μ_k (m - X_t))``, ``μ_k ∈ (0, 1/(1 - m))``;
  ``E[m - X] ≤ 0`` under ``H_N``, so ``P(∃t: M_N(t) ≥ 1/β) ≤ β``: the rate of a "no regression"
  verdict on an agent that regressed by ``m`` or more is at most ``β`` at every stopping time.

The bets are the growth-optimal (Kelly) ones for the design.  With ``D`` the share of pairs an
*unchanged* agent flips (either way, half each: what a baseline's repeats or two A/A runs show), a
regression of ``effect`` is modelled as ``effect`` more regressions on top of that noise
(``p₁₀ = D/2 + effect``, ``p₀₁ = D/2``), whose Kelly bet is ``λ = effect / (D + effect)``; ``μ``
maximises ``E log(1 + μ(m - X))`` for the unchanged agent.  The mixture covers ``D/2, D, max(2D, effect/2)``
(weights 0.1, 0.8, 0.1) when the design names the discordance
(:attr:`SequentialDesign.discordance`, from ``tooleffect plan``), else ``D`` from ``effect/4``
to ``0.8`` by factors of 2 (equal weights).  The bets only change how fast a verdict comes, never
the error bounds.  Both statistics depend on the counts alone (every bet is constant), so
:func:`settle` needs no history and gives the same answer on every xdist worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["VERDICTS", "SequentialDesign", "bets", "log_wealth", "settle"]

Verdict = Literal["regression", "no_regression", "not_yet", "not_settled"]
VERDICTS: Final = ("regression", "no_regression", "not_yet", "not_settled")
#: the largest bet, as a share of the wealth that one pair can lose (a bet of 1 could lose it all)
_MAX_BET: Final = 0.9
#: the discordance grid when the design does not name one: from effect/4 up to this, by factors of 2
_MAX_DISCORDANCE: Final = 0.8


@dataclass(frozen=True)
class SequentialDesign:
    """A sequential paired gate's design.

    Attributes:
        alpha: the false-regression rate, held at every stopping time (0 < alpha < 1).
        margin: the non-inferiority margin as a fraction of the pass rate (0.02 = 2 points): a
            "no regression" verdict says the run's pass rate is less than ``margin`` below the
            baseline's.  0 means: the margin is ``effect``.
        beta: 1 - power at ``effect``; also the rate of a "no regression" verdict on an agent
            whose pass rate dropped by the margin or more, at every stopping time (0 < beta < 1).
        effect: the regression the design is powered for, as a fraction (0 < effect < 1).
        max_pairs: a budget of paired decisions; reaching it without a verdict is "not_settled".
        discordance: the share of paired decisions an unchanged agent flips (either way) that the
            bets are tuned for (``tooleffect plan`` measures it; 0 for a deterministic agent);
            ``None`` spreads the bets over effect/4..0.8.  It changes how fast a verdict comes,
            never the error bounds.

    Raises:
        ValueError: a field out of its range (named in the message).
    """

    alpha: float = 0.05
    margin: float = 0.0
    beta: float = 0.2
    effect: float = 0.05
    max_pairs: int | None = None
    discordance: float | None = None

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "effect"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"SequentialDesign.{name} must be in (0, 1), got {value!r}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"SequentialDesign.margin must be in [0, 1), got {self.margin!r}")
        if self.max_pairs is not None and self.max_pairs < 1:
            raise ValueError(f"SequentialDesign.max_pairs must be at least 1, got {self.max_pairs!r}")
        if self.discordance is not None and not 0.0 <= self.discordance <= 1.0:
            raise ValueError(f"SequentialDesign.discordance must be in [0, 1], got {self.discordance!r}")

    @property
    def no_regression_margin(self) -> float:
        """``m``: the regression a "no regression" verdict rules out (``margin``, or ``effect`` if 0)."""
        return self.margin if self.margin > 0 else self.effect


def _kelly_no_regression(m: float, d: float) -> float:
    """The bet ``μ`` maximising ``E log(1 + μ(m - X))`` when ``P(X=1) = P(X=-1) = d/2``."""
    from scipy.optimize import minimize_scalar

    hi = _MAX_BET / (1.0 - m)

    def neg_growth(mu: float) -> float:
        return -(d / 2 * math.log1p(-mu * (1 - m)) + d / 2 * math.log1p(mu * (1 + m)) + (1 - d) * math.log1p(mu * m))

    res = minimize_scalar(neg_growth, bounds=(1e-9, hi), method="bounded", options={"xatol": 1e-10})
    return float(res.x)


@lru_cache(maxsize=256)
def bets(design: SequentialDesign) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The design's mixtures of constant bets.

    Args:
        design: the design.

    Returns:
        ``(lambdas, log_weights_r, mus, log_weights_n)``: the regression side's bets and the logs
        of their weights (summing to 1), and the no-regression side's.
    """
    e, m = design.effect, design.no_regression_margin
    if design.discordance is not None:
        d = design.discordance
        grid, weights = [d / 2, d, min(1.0, max(2 * d, e / 2))], [0.1, 0.8, 0.1]
    else:
        grid = []
        d = e / 4
        while d < _MAX_DISCORDANCE:
            grid.append(d)
            d *= 2
        grid.append(_MAX_DISCORDANCE)
        weights = [1.0 / len(grid)] * len(grid)
    lambdas = tuple(min(_MAX_BET, e / (g + e)) for g in grid)
    mus = tuple(_kelly_no_regression(m, g) for g in grid)
    logw = tuple(math.log(w) for w in weights)
    return lambdas, logw, mus, logw


def _logsumexp(terms: NDArray[np.float64]) -> NDArray[np.float64]:
    top = np.max(terms, axis=-1, keepdims=True)
    return np.asarray((top + np.log(np.sum(np.exp(terms - top), axis=-1, keepdims=True)))[..., 0], dtype=np.float64)


def log_wealth(design: SequentialDesign, regressions: ArrayLike, improvements: ArrayLike,
               pairs: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(log M_R, log M_N)`` at the given counts (arrays broadcast; the simulation calls this too).

    Args:
        design: the design.
        regressions: paired decisions the baseline passed and the run failed.
        improvements: paired decisions the baseline failed and the run passed.
        pairs: all paired decisions (concordant included).

    Returns:
        The natural logs of the two test martingales (module docstring), shaped as the broadcast counts.
    """
    lambdas, logw_r, mus, logw_n = bets(design)
    m = design.no_regression_margin
    r = np.asarray(regressions, dtype=np.float64)[..., None]
    i = np.asarray(improvements, dtype=np.float64)[..., None]
    c = np.asarray(pairs, dtype=np.float64)[..., None] - r - i
    lam, mu = np.asarray(lambdas), np.asarray(mus)
    reg = r * np.log1p(lam) + i * np.log1p(-lam) + np.asarray(logw_r)
    non = r * np.log1p(-mu * (1 - m)) + i * np.log1p(mu * (1 + m)) + c * np.log1p(mu * m) + np.asarray(logw_n)
    return _logsumexp(reg), _logsumexp(non)


def settle(design: SequentialDesign, regressions: int, improvements: int, pairs: int) -> Verdict:
    """The sequential gate's verdict on the paired decisions so far.

    Method and sources: the module docstring (mixtures of constant bets on the paired decisions;
    a mixture SPRT on the discordant pairs for the regression side; Ville's inequality).

    Args:
        design: the design.
        regressions: paired decisions the baseline passed and the run failed (``b`` of McNemar's table).
        improvements: paired decisions the baseline failed and the run passed (``c``).
        pairs: all paired decisions so far.

    Returns:
        ``"regression"`` when ``M_R ≥ 1/α`` (false-regression rate ≤ α at every stopping time);
        else ``"no_regression"`` when ``M_N ≥ 1/β`` (the pass rate is less than the margin below
        the baseline's; wrong with probability ≤ β at every stopping time); else ``"not_settled"``
        when ``pairs`` reached ``max_pairs``; else ``"not_yet"``.

    Raises:
        ValueError: a negative count, or ``regressions + improvements > pairs``.
    """
    if min(regressions, improvements, pairs) < 0 or regressions + improvements > pairs:
        raise ValueError(f"settle: counts must be non-negative with regressions + improvements <= pairs, got "
                         f"regressions={regressions}, improvements={improvements}, pairs={pairs}")
    log_r, log_n = log_wealth(design, regressions, improvements, pairs)
    if float(log_r) >= math.log(1.0 / design.alpha):
        return "regression"
    if float(log_n) >= math.log(1.0 / design.beta):
        return "no_regression"
    if design.max_pairs is not None and pairs >= design.max_pairs:
        return "not_settled"
    return "not_yet"
