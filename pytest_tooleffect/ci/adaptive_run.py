"""Adaptive repeats at run time (``--tooleffect-repeats adaptive``): each case gets another trial only
while :func:`~.adaptive_repeats.next_step` says ``repeat``, so flakiness is measured where it lives.

The design (alpha, tolerance ε, max_trials) is ``[tool.tooleffect.repeats]`` (:func:`design_of_table`).
pytest collects items up front, so each case × policy is collected ``min(k*, max_trials)`` times (no case
can need more: at k* identical verdicts it is stable) and the trials a case does not need are skipped in
their setup, before their fixtures and their model turn, with the reason
:data:`~pytest_tooleffect.outcomes.REPEATS_SETTLED` (not failed, not passed, no gap in the run: the
sequential gate's ``settled`` mechanism).  A trial runs only once the one before it was scored:

- its model turn is never prefetched (:data:`~pytest_tooleffect.decide.stopping.stop_key` says so for every
  trial of a case but the first one asked), so it is asked in its own setup;
- under ``-n W`` a case's trials are one work unit, run by one worker in their order
  (:func:`~pytest_tooleffect.collect.chunks.case_positions`), so each worker keeps its cases' tallies in
  memory.

A trial that ends in an error (provider, agent, sandbox) is no verdict: it is neither a pass nor a fail and
uses up its item; a case whose items run out before it is stable or flaky is ``not settled``.

On the controller the report's ``repeats`` section rewrites each block's :class:`~pytest_tooleffect.report.
repeats_model.Repeats` from the records in the order they arrived (a case's trials in the order they ran):
each case's trials, passes, errors and step; pass^k for k = 1…k* as the share of cases whose first k
trials all passed (known for every case, whatever its stop: ``docs/repeats.md``); the flip share; and the
trials saved against k* trials everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_tooleffect.ci.adaptive_repeats import RepeatDesign, next_step, trials_to_stable
from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.decide.stopping import stop_key
from pytest_tooleffect.outcomes import REPEATS_SETTLED
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.repeats_model import AdaptiveCase, AdaptiveRepeats, CaseStep, Repeats
from pytest_tooleffect.scoring.record import AdaptiveDesignRecord, Record
from pytest_tooleffect.settings import Settings, settings_key

__all__ = ["AdaptiveRepeatsRun", "adaptive_summary", "design_of_table", "first_k_pass_hat", "items_per_case",
           "summary_line", "with_adaptive_repeats"]

#: the keys of ``[tool.tooleffect.repeats]``
TABLE_KEYS = ("alpha", "tolerance", "max_trials")
#: a verdict kind that passes (as the report's pass^k counts it)
PASSING = ("ok", "ok_no_tool")
#: what the prefetch is told for a trial whose case has a trial before it (its turn is asked in its setup)
WAITS = "adaptive repeats: waits for the case's earlier trial"


def design_of_table(table: Any, path: Path) -> RepeatDesign:
    """The adaptive repeats' design from ``[tool.tooleffect.repeats]`` (absent keys: :class:`RepeatDesign`'s
    defaults, alpha 0.05, tolerance 0.1, max_trials 50).

    Args:
        table: the table as TOML reads it, or ``None`` (absent).
        path: the file it was read from (named in errors).

    Returns:
        The design.

    Raises:
        pytest.UsageError: the table is not a table, holds an unknown key, or a value of the wrong type
            or out of its range (the message names the file, the table and the key).
    """
    where = f"{path}: [tool.tooleffect.repeats]"
    if table is None:
        return RepeatDesign()
    if not isinstance(table, Mapping):
        raise pytest.UsageError(f"{where} must be a table (alpha, tolerance, max_trials)")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise pytest.UsageError(f"{where} has {', '.join(map(repr, unknown))}, which it does not know "
                                f"(its keys: {', '.join(TABLE_KEYS)})")
    values: dict[str, Any] = {}
    for key in TABLE_KEYS:
        if key not in table:
            continue
        value = table[key]
        whole = key == "max_trials"
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
            raise pytest.UsageError(f"{where}: {key} must be {'a whole number' if whole else 'a number'}, "
                                    f"got {value!r}")
        values[key] = value if whole else float(value)
    try:
        return RepeatDesign(**values)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None


def with_adaptive_repeats(settings: Settings) -> Settings:
    """The run's settings with the items per case adaptive repeats collect (``min(k*, max_trials)``), or
    as they are when the run's repeats are fixed (a ``[tool.tooleffect.repeats]`` table is still checked).

    Raises:
        pytest.UsageError: as :func:`design_of_table`.
    """
    design = design_of_table(settings.repeats_table, settings.pyproject)
    if not settings.adaptive_repeats:
        return settings
    return dataclasses.replace(settings, repeats=items_per_case(design))


def items_per_case(design: RepeatDesign) -> int:
    """``min(k*, max_trials)``: the most trials one case may need (at k* identical verdicts it is stable)."""
    return min(trials_to_stable(design), design.max_trials)


def _step(design: RepeatDesign, passes: int, trials: int, items_left: bool) -> CaseStep | Literal["repeat"]:
    step = next_step(design, passes, trials)
    if step == "repeat" and not items_left:
        return "not_settled"
    return step


@dataclasses.dataclass
class _Case:
    verdicts: list[bool] = dataclasses.field(default_factory=list)
    errors: int = 0


class AdaptiveRepeatsRun:
    """The plugin object of adaptive repeats (built at configure time on the controller and on each xdist
    worker when the run's repeats are ``adaptive``): a record section on every process, a report section on
    the controller.

    Args:
        config: pytest's config (its settings already :func:`with_adaptive_repeats`).
    """

    section: Literal["repeats"] = "repeats"

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings: Settings = config.stash[settings_key]
        self.design = design_of_table(self.settings.repeats_table, self.settings.pyproject)
        self.items = items_per_case(self.design)
        #: this process's cases by (family, policy, case id): the verdicts in the order they came, the errors
        self.cases: dict[tuple[str, str, str], _Case] = {}
        #: the cases one of whose trials the prefetch was allowed to queue
        self.asked: set[tuple[str, str, str]] = set()
        self.lines: list[str] = []
        before = config.stash.get(stop_key, None)

        def stop(item: CaseItem) -> str | None:
            return (before(item) if before is not None else None) or self.stop(item)

        config.stash[stop_key] = stop

    @staticmethod
    def key(item: CaseItem) -> tuple[str, str, str]:
        return (item.family.name, item.policy.name, item.ref.id)

    def step(self, key: tuple[str, str, str], ran: int) -> CaseStep | Literal["repeat"]:
        """The case's step after its trials so far in this process (``ran``: its items run, errors included)."""
        case = self.cases.get(key, _Case())
        return _step(self.design, sum(case.verdicts), len(case.verdicts), ran < self.items)

    def stop(self, item: CaseItem) -> str | None:
        """Asked before a trial's turn is prefetched: only the first trial of a case may be queued ahead."""
        key = self.key(item)
        if key in self.asked or key in self.cases:
            return WAITS
        self.asked.add(key)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip a trial its case does not need, before its fixtures and its model turn."""
        if not isinstance(item, CaseItem):
            return
        key = self.key(item)
        case = self.cases.get(key, _Case())
        if self.step(key, len(case.verdicts) + case.errors) == "repeat":
            return
        turns = self.config.pluginmanager.get_plugin("tooleffect-model-turns")
        if turns is None or turns.withdraw(item):
            pytest.skip(REPEATS_SETTLED)

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write the run's design into the record (``adaptive``) and count the trial in its case's tally (a record
        section): a scored trial's verdict, or an error.
        """
        record.adaptive = AdaptiveDesignRecord(alpha=self.design.alpha, tolerance=self.design.tolerance,
                                               max_trials=self.design.max_trials)
        case = self.cases.setdefault((record.family, record.policy, record.case_id), _Case())
        if record.outcome == "scored" and record.verdict is not None:
            case.verdicts.append(record.verdict.kind in PASSING)
        else:
            case.errors += 1

    # ------------------------------------------------------------------ report

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Rewrite each block's ``repeats`` from the trials actually run (a report section, on the controller)."""
        skipped = {(s.family, s.policy): s.reasons.get(REPEATS_SETTLED, 0) for s in report.skipped}
        self.lines = []
        for block in report.blocks:
            mine = [r for r in records if (r.family, r.policy) == (block.family, block.policy)]
            block.repeats = adaptive_summary(self.design, mine, skipped.get((block.family, block.policy), 0))
            if block.repeats.adaptive is not None:
                self.lines.append(f"{block.family}/{block.policy}: " + summary_line(block.repeats))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.lines:
            return
        terminalreporter.write_sep("-", "tooleffect adaptive repeats")
        for line in self.lines:
            terminalreporter.write_line(line)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """On the xdist controller (when the model turns' chunk scheduler does not apply): a case's trials
        are one work unit, run by one worker in their order.
        """
        if config.getvalue("dist") in ("each", "no"):  # every item on every worker, or none spread
            return None
        from pytest_tooleffect.collect.chunks import chunk_scheduler

        return chunk_scheduler(config, log, together=True)

    def close(self) -> None:
        if stop_key in self.config.stash:
            del self.config.stash[stop_key]


def first_k_pass_hat(sequences: Sequence[Sequence[bool]], k_max: int) -> dict[str, float]:
    """pass^k for k = 1…``k_max`` from adaptive trials: the share of cases whose first k trials all passed.

    A case stops at its first flip or at k* identical verdicts, so "its first k trials all passed" is known
    for every k ≤ k*: a case that flipped at trial n ≤ k did not pass all of its first k; one that flipped
    later, or never, passed all of them exactly when its first trial passed.  The first k trials of a case
    are k independent trials whatever the stop, so the share is an unbiased estimate of pass^k = E[π^k]
    over cases (Yao et al. 2024, τ-bench, define pass^k as E[C(c, k) / C(n, k)] over tasks for n fixed
    trials; under a data-dependent stop that estimate is biased, this one is not).

    Args:
        sequences: each case's verdicts in the order they were reached (``True``: passed); a case whose
            verdicts run out before k without a flip (not settled) is left out of pass^k for that k.
        k_max: the largest k (k*, or the items per case).

    Returns:
        ``{"1": …, "2": …}`` (fractions in [0, 1]); a k no case decides is left out.
    """
    out: dict[str, float] = {}
    for k in range(1, k_max + 1):
        known = [all(v[:k]) for v in sequences if len(v) >= k or (v and not all(x == v[0] for x in v))]
        if known:
            out[str(k)] = sum(known) / len(known)
    return out


def adaptive_summary(design: RepeatDesign, records: Sequence[Record], skipped: int = 0) -> Repeats:
    """One block's :class:`Repeats` under adaptive repeats, from its records in the order they arrived.

    Args:
        design: the run's design.
        records: the block's records (scored and errors), a case's in the order its trials ran.
        skipped: the block's items skipped as ``repeats settled``.

    Returns:
        The block's repeats, with ``adaptive`` set.
    """
    items = items_per_case(design)
    seq: dict[str, list[bool]] = {}
    errors: dict[str, int] = {}
    for r in records:
        seq.setdefault(r.case_id, [])
        errors.setdefault(r.case_id, 0)
        if r.outcome == "scored" and r.verdict is not None:
            seq[r.case_id].append(r.verdict.kind in PASSING)
        else:
            errors[r.case_id] += 1
    rows = []
    for cid in sorted(seq):
        v = seq[cid]
        step = _step(design, sum(v), len(v), len(v) + errors[cid] < items)
        rows.append(AdaptiveCase(case_id=cid, trials=len(v), passes=sum(v), errors=errors[cid],
                                 step="not_settled" if step == "repeat" else step,
                                 verdicts="".join("P" if x else "F" for x in v)))
    scored = [seq[c.case_id] for c in rows if c.trials]
    trials_run = sum(c.trials for c in rows)
    n_errors = sum(c.errors for c in rows)
    saved = len(rows) * items - trials_run - n_errors
    tokens = [sum(int(t) for t in (r.cost.input_tokens, r.cost.output_tokens) if t is not None) for r in records
              if r.outcome == "scored" and (r.cost.input_tokens is not None or r.cost.output_tokens is not None)]
    usd = [float(r.cost.cost_usd) for r in records if r.outcome == "scored" and r.cost.cost_usd is not None]
    adaptive = AdaptiveRepeats(
        alpha=design.alpha, tolerance=design.tolerance, max_trials=design.max_trials,
        k_star=trials_to_stable(design), items_per_case=items,
        stable=sum(c.step == "stable" for c in rows), flaky=sum(c.step == "flaky" for c in rows),
        not_settled=sum(c.step == "not_settled" for c in rows), trials_run=trials_run, errors=n_errors,
        skipped=skipped, full_trials=len(rows) * items, trials_saved=saved,
        saved_tokens=round(saved * sum(tokens) / len(tokens)) if tokens else None,
        saved_cost_usd=round(saved * sum(usd) / len(usd), 9) if usd else None, cases=rows)
    return Repeats(trials=max((len(v) for v in scored), default=0), cases=len(scored),
                   pass_hat_k=first_k_pass_hat(scored, items),
                   flip_share=sum(len(set(v)) > 1 for v in scored) / len(scored) if scored else 0.0,
                   estimator="first_k", adaptive=adaptive)


def summary_line(rep: Repeats) -> str:
    """One line: the cases' steps, the trials run against k* everywhere, pass^1, pass^k*, the flip share
    (:meth:`~pytest_tooleffect.report.repeats_model.Repeats.adaptive_line`).

    Raises:
        ValueError: ``rep`` is not of adaptive repeats.
    """
    line = rep.adaptive_line()
    if line is None:
        raise ValueError("summary_line: the repeats are not adaptive")
    return line
