"""The report's arithmetic: rates, averages, intervals, display rounding, the label-set fingerprint.

DESIGN.md "Report arithmetic": for classes ``i`` with ``n_i`` rows and ``c_i`` correct,
``r_i = c_i / n_i``; micro-average ``Σc_i / Σn_i = Σ w_i r_i`` with ``w_i = n_i / N``;
macro-average ``Σ r_i / k`` over the ``k`` classes that have rows.  Percentages display with
round-half-up on the exact fraction (71.25 → 71.3).  Class intervals, and the micro-average's
(a plain proportion Σc_i / Σn_i), are Wilson score intervals at 95 % (Wilson, JASA 22(158), 1927),
from the closed form with the standard library's normal quantile (the values of
``scipy.stats.binomtest(...).proportion_ci(method="wilson")``, without importing SciPy's statistics,
which costs seconds at the end of every run).  The macro-average's interval is
:func:`macro_interval`'s adjusted Wald interval for a linear function of independent proportions
(Price & Bonett 2004).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from statistics import NormalDist
from typing import Any, overload

__all__ = ["CLASSES", "exact_pct", "fingerprint", "macro_interval", "mcnemar_exact", "percent", "rate_table",
           "wilson_interval"]

#: The label classes, in report order (they partition every label set).
CLASSES = ("single", "several", "no_tool")


def percent(value: Fraction | float | None, digits: int = 1) -> str:
    """Format a proportion as a percentage, rounding half up (0.7125 → ``"71.3"``).

    Python's ``round`` and ``format`` round half to even on the binary float and print 71.2;
    this works on the exact fraction.

    Args:
        value: a proportion in [0, 1], or ``None`` (no rows).
        digits: digits after the decimal point.

    Returns:
        The percentage without its sign, or ``"–"`` for ``None``.
    """
    if value is None:
        return "–"
    frac = value if isinstance(value, Fraction) else Fraction(value)
    d = Decimal(frac.numerator) * 100 / Decimal(frac.denominator)
    return str(d.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


@overload
def exact_pct(value: Fraction) -> float: ...


@overload
def exact_pct(value: Fraction | None) -> float | None: ...


def exact_pct(value: Fraction | None) -> float | None:
    """A proportion as a percentage (float, unrounded), ``None`` for ``None``."""
    return None if value is None else float(Decimal(value.numerator) * 100 / Decimal(value.denominator))


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for ``correct`` successes in ``n`` trials.

    With ``p = correct / n`` and ``z`` the normal quantile at ``(1 + confidence) / 2``, the bounds
    are ``(p + z²/2n ∓ z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` (Wilson, JASA 22(158), 1927),
    clipped to [0, 1].

    Args:
        correct: successes.
        n: trials.
        confidence: the interval's confidence level.

    Returns:
        ``(low, high)`` as proportions, or ``None`` when ``n == 0``.
    """
    if n == 0:
        return None
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    p = correct / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = p + z2 / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - half) / denom), min(1.0, (centre + half) / denom)


def macro_interval(counts: Iterable[tuple[int, int]], confidence: float = 0.95) -> tuple[float, float] | None:
    """Confidence interval of the macro-average ``Σ r_i / k`` over the classes that have rows.

    The macro-average is a linear function ``Σ a_i π_i`` of ``k`` independent binomial proportions
    with ``a_i = 1/k``.  Its interval is the adjusted Wald interval of Price & Bonett, "An improved
    confidence interval for a linear function of binomial proportions", *Computational Statistics
    & Data Analysis* 45(3), 2004, pp. 449-456: each class gets ``2/k`` added successes and ``4/k``
    added trials, ``p̃_i = (c_i + 2/k) / (n_i + 4/k)``, and the interval is
    ``Σ a_i p̃_i ± z·sqrt(Σ a_i² p̃_i (1 - p̃_i) / (n_i + 4/k))``, clipped to [0, 1].  For ``k = 2`` it
    is Agresti & Caffo's interval for a difference (2000).  Why this and not the plain Wald
    interval over per-class variances: a small class at 0 % or 100 % (4 of 4) has a plain
    variance of zero, so the interval would ignore exactly the class that makes the macro-average
    uncertain; the adjustment gives it the width its few rows warrant, and Price & Bonett's
    simulations show near-nominal coverage down to a few rows per class.  It is computed in closed
    form (no resampling, so the same records always give the same interval).

    Args:
        counts: ``(correct, n)`` per class; classes with ``n == 0`` are left out, as they are of the
            macro-average.
        confidence: the interval's confidence level.

    Returns:
        ``(low, high)`` as proportions, or ``None`` when no class has rows.
    """
    rows = [(c, n) for c, n in counts if n]
    if not rows:
        return None
    k = len(rows)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    centre = variance = 0.0
    for c, n in rows:
        trials = n + 4 / k
        p = (c + 2 / k) / trials
        centre += p / k
        variance += p * (1 - p) / trials / k**2
    half = z * math.sqrt(variance)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_table(counts: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """Per-class rates with micro- and macro-average from ``{class: (correct, n)}``.

    Args:
        counts: ``(correct, n)`` per class.

    Returns:
        ``{"classes": {name: {n, correct, rate, weight}}, "micro": Fraction, "macro": Fraction,
        "N": int}``; rates are :class:`~fractions.Fraction` (``None`` for an empty class).
        Classes with no rows are left out of the macro-average's ``k``.
    """
    total_n = sum(n for _, n in counts.values())
    total_c = sum(c for c, _ in counts.values())
    classes: dict[str, dict[str, Any]] = {}
    rates = []
    for name, (c, n) in counts.items():
        r = Fraction(c, n) if n else None
        classes[name] = {"n": n, "correct": c, "rate": r, "weight": Fraction(n, total_n) if total_n else None}
        if r is not None:
            rates.append(r)
    micro = Fraction(total_c, total_n) if total_n else None
    macro = sum(rates, Fraction(0)) / len(rates) if rates else None
    return {"classes": classes, "micro": micro, "macro": macro, "N": total_n}


def fingerprint(labels: Iterable[tuple[str, str]]) -> str:
    """Label-set fingerprint: SHA-256 over sorted ``(case id, label hash)`` pairs.

    Args:
        labels: ``(case id, label hash)`` pairs.

    Returns:
        16 hex digits.
    """
    h = hashlib.sha256()
    for cid, lh in sorted(labels):
        h.update(f"{cid}\t{lh}\n".encode())
    return h.hexdigest()[:16]


def mcnemar_exact(table: Sequence[Sequence[int]]) -> float:
    """Two-sided p-value of McNemar's test in its exact (binomial) form.

    McNemar, "Note on the sampling error of the difference between correlated proportions or
    percentages", Psychometrika 12(2), 153-157 (1947).  Of the paired decisions, ``b`` passed
    before and fail now and ``c`` failed before and pass now; under the null hypothesis (the same
    pass rate before and after) each discordant pair goes either way with probability 1/2, so
    ``min(b, c) ~ Binomial(b + c, 1/2)`` and ``p = min(1, 2 P[X <= min(b, c)])`` (``p = 1`` when
    ``b + c = 0``).  Computed as the two-sided exact binomial test of ``b`` successes in ``b + c``
    trials at 1/2 (:func:`scipy.stats.binomtest`): the figures of
    ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``, except that where
    ``|b - c| = 1`` (p exactly 1) statsmodels' ``2 P[X <= min]`` can round to 0.9999999999999998
    and this gives 1.0.

    Args:
        table: ``[[both pass, pass→fail], [fail→pass, both fail]]``, counts of decisions (rows:
            before; columns: after).

    Returns:
        The p-value in [0, 1].
    """
    b, c = int(table[0][1]), int(table[1][0])
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(min(b, c), b + c, 0.5).pvalue)
