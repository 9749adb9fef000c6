"""Planning a gated run (``tooleffect plan``): per family × policy, per class and for the block,
how many paired decisions detect a regression of a given size at α and power — fixed-n (exact
McNemar, :mod:`.sample_size`) and sequential (the expected number of decisions of
:mod:`.sequential`'s design, by simulation, :mod:`.sequential_sim`) — from the discordance the
baseline's repeated trials (``--tooleffect-repeats``) or two or more A/A runs actually show, and what
that costs at the tokens and price per decision the record logs measured.

**The discordance** ``D`` of a block: the probability that two runs of the unchanged agent give one
decision different verdicts, estimated per decision (record id without its trial) from its ``K ≥ 2``
verdicts with ``s`` passes as ``2 s (K - s) / (K (K - 1))`` (unbiased for ``2π(1-π)``, ``π`` the
decision's pass probability), averaged over the decisions that have two or more verdicts.  Every
run given (the baseline, each repeat run) and every trial in it is one verdict; error outcomes,
and verdicts under another label than the decision's first, are left out.  Decisions with one
verdict only leave ``D`` unmeasured: the plan says so instead of assuming one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_tooleffect.ci.baseline import CLASSES, Baseline
from pytest_tooleffect.ci.sample_size import FixedN, alternative, fixed_n
from pytest_tooleffect.ci.sequential import SequentialDesign
from pytest_tooleffect.ci.sequential_sim import simulate

__all__ = ["ALL", "MAX_SIM_RUNS", "MIN_SIM_RUNS", "Cost", "Discordance", "PlanRow", "costs_of", "discordance", "plan",
           "runs_needed"]

#: the block's row (every class)
ALL = "all"


@dataclass(frozen=True)
class Discordance:
    """A block's (or class's) measured pass rate and discordance.

    Attributes:
        decisions: distinct decisions (record ids without the trial) with a verdict.
        repeated: of which with two or more verdicts (the ones ``rate`` is measured on).
        pass_rate: passes over verdicts (every trial and run counted).
        rate: the discordance ``D`` (module docstring), ``None`` when no decision has two verdicts.
    """

    decisions: int
    repeated: int
    pass_rate: float
    rate: float | None


@dataclass(frozen=True)
class Cost:
    """Measured cost per decision of a block: tokens (input + output) and dollars, each ``None`` when
    no record states it; ``records`` is how many records the averages are over.
    """

    records: int
    tokens: float | None
    usd: float | None


@dataclass(frozen=True)
class PlanRow:
    """One line of the plan.

    Attributes:
        family: the family.
        policy: the policy.
        label_class: ``single``, ``several``, ``no_tool`` or ``all`` (the block).
        measured: the pass rate and discordance.
        fixed: the fixed-n design (``None`` when the discordance is not measured or the regression
            cannot happen: a pass rate below the effect).
        asn_unchanged: the sequential design's average decisions to a verdict for an unchanged agent.
        asn_regressed: the same for an agent that regressed by the effect.
        power: the sequential design's power at the effect (share of simulated runs that said regression).
        cost: the block's cost per decision.
        note: why a figure is missing, or ``""``.
    """

    family: str
    policy: str
    label_class: str
    measured: Discordance
    fixed: FixedN | None
    asn_unchanged: float | None
    asn_regressed: float | None
    power: float | None
    cost: Cost
    note: str


def _verdicts(runs: Sequence[Baseline]) -> dict[tuple[str, str, str], tuple[str, list[bool]]]:
    """Per (family, policy, case id): its class and every verdict of every run and trial under the
    label it has where first seen (a verdict under another label is another question: left out).
    """
    out: dict[tuple[str, str, str], tuple[str, list[bool]]] = {}
    labels: dict[tuple[str, str, str], str] = {}
    for run in runs:
        for d in run.decisions.values():
            if d.outcome != "scored" or d.passed is None:
                continue
            key = (d.family, d.policy, d.case_id)
            if labels.setdefault(key, d.label_hash) != d.label_hash:
                continue
            out.setdefault(key, (d.label_class, []))[1].append(d.passed)
    return out


def discordance(runs: Sequence[Baseline]) -> dict[tuple[str, str, str], Discordance]:
    """The measured discordance per ``(family, policy, class)`` and per ``(family, policy, "all")``.

    Args:
        runs: the baseline and the repeated runs (each a :class:`Baseline`, a record log read as one).

    Returns:
        By key, the :class:`Discordance` (module docstring), for every class that has a verdict.
    """
    acc: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0, 0])
    for (family, policy, _case), (cls, verdicts) in _verdicts(runs).items():
        k, s = len(verdicts), sum(verdicts)
        for key in ((family, policy, cls), (family, policy, ALL)):
            a = acc[key]
            a[0] += 1
            a[3] += s
            a[4] += k
            if k >= 2:
                a[1] += 1
                a[2] += 2 * s * (k - s) / (k * (k - 1))
    return {key: Discordance(decisions=int(a[0]), repeated=int(a[1]), pass_rate=a[3] / a[4],
                             rate=a[2] / a[1] if a[1] else None) for key, a in sorted(acc.items())}


def costs_of(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Cost]:
    """Tokens and dollars per decision per ``(family, policy)`` from records' ``cost`` (scored and
    error outcomes alike: an error's turn is paid too).

    Args:
        records: record-log objects (``family``, ``policy``, ``cost`` with ``input_tokens``,
            ``output_tokens``, ``cost_usd``).

    Returns:
        By block, the averages over the records that state them.
    """
    acc: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0, 0.0])
    for rec in records:
        if not isinstance(rec, Mapping) or "family" not in rec or "policy" not in rec:
            continue
        cost = rec.get("cost") if isinstance(rec.get("cost"), Mapping) else {}
        assert isinstance(cost, Mapping)
        a = acc[(str(rec["family"]), str(rec["policy"]))]
        a[0] += 1
        tin, tout, usd = cost.get("input_tokens"), cost.get("output_tokens"), cost.get("cost_usd")
        if isinstance(tin, int | float) and isinstance(tout, int | float):
            a[1] += 1
            a[2] += float(tin) + float(tout)
        if isinstance(usd, int | float):
            a[3] += 1
            a[4] += float(usd)
    return {key: Cost(records=int(a[0]), tokens=a[2] / a[1] if a[1] else None, usd=a[4] / a[3] if a[3] else None)
            for key, a in sorted(acc.items())}


#: the most simulated runs per sequential figure ``tooleffect plan --sim-runs`` takes (and the
#: least): each figure costs time linear in it, and past a million its Monte Carlo error (about
#: ``1 / sqrt(runs)`` of the spread) is far below any figure's printed precision
MIN_SIM_RUNS, MAX_SIM_RUNS = 100, 1_000_000


def plan(runs: Sequence[Baseline], effect: float = 0.05, alpha: float = 0.05, power: float = 0.8,
         margin: float = 0.0, costs: Mapping[tuple[str, str], Cost] | None = None, sim_runs: int = 2000,
         seed: int = 45, classes: Sequence[str] = (*CLASSES, ALL)) -> list[PlanRow]:
    """The plan's rows (module docstring).

    Args:
        runs: the baseline first, then repeated or A/A runs (all read as :class:`Baseline`).
        effect: the regression to detect, as a fraction (0.05 = 5 points).
        alpha: the false-regression rate (one-sided).
        power: the power at ``effect``.
        margin: the sequential design's no-regression margin (0: the effect).
        costs: per block, measured cost per decision (:func:`costs_of`).
        sim_runs: simulated runs per sequential figure (fixed seed ``seed``).
        seed: numpy's seed.
        classes: which classes to plan, ``all`` for the block.

    Returns:
        One row per family × policy × class present in the baseline, in that order.

    Raises:
        ValueError: ``effect``, ``alpha`` or ``power`` out of (0, 1), or ``sim_runs`` out of
            :data:`MIN_SIM_RUNS` to :data:`MAX_SIM_RUNS`.
    """
    if not (0 < effect < 1 and 0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"effect, alpha and power must be in (0, 1), got {effect}, {alpha}, {power}")
    if not MIN_SIM_RUNS <= sim_runs <= MAX_SIM_RUNS:
        raise ValueError(f"sim_runs must be from {MIN_SIM_RUNS:,} to {MAX_SIM_RUNS:,}, got {sim_runs:,}")
    measured = discordance(runs)
    present = {(d.family, d.policy) for d in runs[0].decisions.values()} if runs else set()
    rows: list[PlanRow] = []
    for (family, policy, cls), m in measured.items():
        if (family, policy) not in present or cls not in classes:
            continue
        cost = (costs or {}).get((family, policy), Cost(0, None, None))
        fixed = asn0 = asn1 = pw = None
        note = ""
        if m.rate is None:
            note = "discordance not measured: give repeated runs (--tooleffect-repeats K, or two A/A runs)"
        elif m.rate + effect > 1 or m.pass_rate < effect:
            note = f"a {effect:.0%} regression cannot happen at pass rate {m.pass_rate:.1%}"
        else:
            fixed = fixed_n(alpha, 1 - power, effect, m.rate)
            design = SequentialDesign(alpha=alpha, beta=1 - power, effect=effect, margin=margin,
                                      discordance=m.rate)
            horizon = 4 * fixed.n
            unchanged = simulate(design, m.rate / 2, m.rate / 2, sim_runs, horizon, seed)
            p10, p01 = alternative(m.rate, effect)
            regressed = simulate(design, p10, p01, sim_runs, horizon, seed + 1)
            asn0, asn1, pw = unchanged.mean_pairs, regressed.mean_pairs, regressed.regression
        rows.append(PlanRow(family, policy, cls, m, fixed, asn0, asn1, pw, cost, note))
    return sorted(rows, key=lambda r: (r.family, r.policy, list(classes).index(r.label_class)))


def runs_needed(pairs: float, decisions: int) -> int:
    """Whole runs of a block of ``decisions`` decisions that hold ``pairs`` paired decisions (at least 1)."""
    return max(1, math.ceil(pairs / decisions)) if decisions else 0
