"""A block's repeated trials as typed data: pass^k, the verdict flips, and under adaptive repeats
(``--tooleffect-repeats adaptive``) each case's trials and step and what stopping saved.

:class:`Repeats` is written by the assembler (:mod:`.summary`) for fixed repeats; under adaptive repeats
``ci/adaptive_run.py`` rewrites it through the report's section protocol (:mod:`.assembly`), from the
trials actually run (``docs/repeats.md`` defines pass^k there).
"""

from __future__ import annotations

from typing import Literal

from pytest_tooleffect.options import OPT_REPEATS
from pytest_tooleffect.outcomes import REPEATS_SETTLED
from pytest_tooleffect.report.parts import Count, Part

__all__ = ["AdaptiveCase", "AdaptiveRepeats", "CaseStep", "Repeats"]

#: where a case's adaptive repeats ended: ``stable`` (k* identical verdicts; wrong with probability at most
#: alpha), ``flaky`` (it flipped: certain), ``not_settled`` (its items ran out first: max_trials below k*,
#: or trials lost to errors)
CaseStep = Literal["stable", "flaky", "not_settled"]


class AdaptiveCase(Part):
    """One case's adaptive trials."""

    case_id: str
    """The case."""
    trials: Count
    """Trials with a verdict (errors are not trials)."""
    passes: Count
    """Trials that passed (kind ``ok`` or ``ok_no_tool``)."""
    errors: Count
    """Trials that ended in an error (provider, agent, sandbox): neither a pass nor a fail."""
    step: CaseStep
    """Where its repeats ended."""
    verdicts: str
    """Its verdicts in the order they were reached: ``P`` passed, ``F`` failed (``PPF``)."""


class AdaptiveRepeats(Part):
    """How adaptive repeats ran a block: the design, each case, and the trials saved against k* everywhere."""

    alpha: float
    """The rate of calling a flaky case stable."""
    tolerance: float
    """ε: a case is flaky when at least this share of its trials go the minority way."""
    max_trials: Count
    """The most trials of one case the design allows."""
    k_star: Count
    """k*: the fewest identical verdicts that call a case stable, ``(1 − ε)^k* + ε^k* ≤ alpha``."""
    items_per_case: Count
    """Items collected per case: ``min(k*, max_trials)`` (no case needs more)."""
    stable: Count
    """Cases called stable."""
    flaky: Count
    """Cases that flipped."""
    not_settled: Count
    """Cases whose items ran out before either."""
    trials_run: Count
    """Trials with a verdict, over all cases."""
    errors: Count
    """Trials that ended in an error, over all cases."""
    skipped: Count
    """Items skipped as ``repeats settled`` (no decision made for them)."""
    full_trials: Count
    """What k* trials everywhere would have run: cases × ``items_per_case``."""
    trials_saved: int
    """``full_trials − trials_run − errors``: the decisions the stop saved against k* everywhere."""
    saved_tokens: int | None = None
    """The saved decisions' input plus output tokens, estimated at this block's mean per scored trial
    (``null``: no trial counted tokens)."""
    saved_cost_usd: float | None = None
    """Their cost, USD, at this block's mean per priced trial (``null``: no trial was priced)."""
    cases: list[AdaptiveCase]
    """Each case, by id."""


class Repeats(Part):
    """Repeated trials of the same cases (``--tooleffect-repeats``)."""

    trials: int
    """Most trials of one case."""
    cases: Count
    """Cases scored."""
    pass_hat_k: dict[str, float]
    """pass^k: the chance that all of k trials pass, averaged over cases.  Fixed repeats: for k = 1…trials,
    the unbiased ``C(c, k) / C(n, k)`` of each case with n ≥ k trials (Yao et al. 2024).  Adaptive repeats:
    for k = 1…k*, the share of cases whose first k trials all passed (known for every case; see ``estimator``)."""
    flip_share: float
    """Share of cases whose verdict differs between trials."""
    estimator: Literal["combinatorial", "first_k"] = "combinatorial"
    """How ``pass_hat_k`` was estimated: ``combinatorial`` (fixed repeats), ``first_k`` (adaptive repeats)."""
    adaptive: AdaptiveRepeats | None = None
    """Under ``--tooleffect-repeats adaptive``: the design, each case's trials and step, and the trials saved."""

    def adaptive_line(self) -> str | None:
        """The adaptive part in one line, as the terminal, ``tooleffect report`` and the CI job summary show it:
        the cases' steps, the trials run against k* everywhere, pass^1, pass^k*, the flip share and the
        design; ``None`` under fixed repeats.
        """
        a = self.adaptive
        if a is None:
            return None
        ks = [k for k in ("1", str(a.items_per_case)) if k in self.pass_hat_k]
        passes = ", ".join(f"pass^{k} {100 * self.pass_hat_k[k]:.1f} %" for k in dict.fromkeys(ks))
        return (f"{a.stable} stable, {a.flaky} flaky, {a.not_settled} not settled of {len(a.cases)} cases; "
                f"{a.trials_run} trials run{_errors(a.errors)} against {a.full_trials} at k*={a.k_star} everywhere "
                f"({a.trials_saved} saved{_spend(a)}, {a.skipped} items skipped as {REPEATS_SETTLED!r}); {passes}; "
                f"verdict flips on {100 * self.flip_share:.1f} % of cases "
                f"({OPT_REPEATS} adaptive: alpha {a.alpha:g}, tolerance {a.tolerance:g}, max_trials {a.max_trials})")


def _errors(n: int) -> str:
    return "" if not n else " and 1 error" if n == 1 else f" and {n} errors"


def _spend(a: AdaptiveRepeats) -> str:
    parts = ([f"~{a.saved_tokens:,} tokens"] if a.saved_tokens is not None else []) + (
        [f"~${a.saved_cost_usd:.4f}"] if a.saved_cost_usd is not None else [])
    return f": {' and '.join(parts)}" if parts else ""
