"""Adaptive repeats: another trial of a case only while its verdict is not yet known to be stable or
flaky, with the error of calling a case stable held at ``alpha`` (``docs/sequential.md``).

A case's trials are independent, each passing with probability ``π`` (its own, unknown).  It is
**flaky at tolerance ε** when ``min(π, 1 − π) ≥ ε``: at least a share ε of its trials go the
minority way.  After ``k`` trials with ``s`` passes:

- ``0 < s < k``: it flipped.  That is certain, not an estimate: **flaky** (no error), and its
  trials so far give its pass^k and flip figures.
- ``s ∈ {0, k}`` and ``k ≥ k*``: **stable**, where ``k*`` is the fewest trials with
  ``(1 − ε)^k* + ε^k* ≤ α``.  A flaky case gives ``k*`` identical verdicts with probability
  ``π^k* + (1 − π)^k* ≤ (1 − ε)^k* + ε^k* ≤ α`` (largest at ``min(π, 1 − π) = ε``), so "stable" is wrong with
  probability at most ``α``, whenever the decision is read.  This is the exact binomial bound, so
  no approximation is made.
- otherwise **repeat**, until ``max_trials``, where the case is **not settled**.

Against ``k*`` trials everywhere (what telling stable from flaky at ε and α takes with a fixed
``k``), a flaky case stops at its first flip: ``E[trials] = Σ_{j<k*} P(no flip in j trials)``
(:func:`expected_trials`): 3 for a case at ``π = ½``, whatever ``k*``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["RepeatDesign", "expected_trials", "next_step", "trials_to_stable"]

Step = Literal["stable", "flaky", "repeat", "not_settled"]


@dataclass(frozen=True)
class RepeatDesign:
    """How adaptive repeats decide.

    Attributes:
        alpha: the rate of calling a flaky case stable (0 < alpha < 1).
        tolerance: ε, the minority share of trials that makes a case flaky (0 < tolerance <= 0.5).
        max_trials: the most trials of one case (at least 2).

    Raises:
        ValueError: a field out of its range (named in the message).
    """

    alpha: float = 0.05
    tolerance: float = 0.1
    max_trials: int = 50

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"RepeatDesign.alpha must be in (0, 1), got {self.alpha!r}")
        if not 0 < self.tolerance <= 0.5:
            raise ValueError(f"RepeatDesign.tolerance must be in (0, 0.5], got {self.tolerance!r}")
        if self.max_trials < 2:
            raise ValueError(f"RepeatDesign.max_trials must be at least 2, got {self.max_trials!r}")


def trials_to_stable(design: RepeatDesign) -> int:
    """``k*``: the fewest identical verdicts that call a case stable (module docstring).

    Returns:
        The smallest ``k >= 1`` with ``(1 - ε)^k + ε^k <= alpha``.
    """
    eps, k = design.tolerance, max(1, math.floor(math.log(design.alpha) / math.log1p(-design.tolerance)) - 1)
    while (1 - eps) ** k + eps ** k > design.alpha:
        k += 1
    return k


def next_step(design: RepeatDesign, passes: int, trials: int) -> Step:
    """What to do with a case after ``trials`` trials of which ``passes`` passed.

    Args:
        design: the design.
        passes: trials that passed (errors are not trials: leave them out).
        trials: trials with a verdict.

    Returns:
        ``flaky`` (it flipped), ``stable`` (``k*`` identical verdicts; wrong with probability at most
        ``alpha``), ``not_settled`` (``max_trials`` reached first) or ``repeat``.

    Raises:
        ValueError: ``passes`` not in ``0..trials``.
    """
    if not 0 <= passes <= trials:
        raise ValueError(f"next_step: passes must be in 0..trials, got passes={passes}, trials={trials}")
    if 0 < passes < trials:
        return "flaky"
    if trials >= trials_to_stable(design):
        return "stable"
    if trials >= design.max_trials:
        return "not_settled"
    return "repeat"


def expected_trials(design: RepeatDesign, pass_probability: float) -> float:
    """The expected trials the rule spends on a case that passes each trial with ``pass_probability``.

    Returns:
        ``Σ_{j=0}^{K-1} P(the first j trials agree)`` with ``K = min(k*, max_trials)`` (a case stops at
        its first flip, at ``k*`` identical verdicts, or at ``max_trials``).

    Raises:
        ValueError: ``pass_probability`` not in [0, 1].
    """
    p = pass_probability
    if not 0 <= p <= 1:
        raise ValueError(f"pass_probability must be in [0, 1], got {p}")
    cap = min(trials_to_stable(design), design.max_trials)
    return 1.0 + sum(p ** j + (1 - p) ** j for j in range(1, cap))
