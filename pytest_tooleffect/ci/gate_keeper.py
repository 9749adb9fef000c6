"""Gates judged: each gate of :mod:`.gate_rules` against the report's own rates, intervals, kinds, regressions
(the records' baseline marks) and cost, one :class:`~.gate_verdicts.GateResult` per gate, on what the run selected
(:mod:`.gate_scope`); the session's exit status decided from them (:mod:`.gate_verdicts`); and :class:`GateKeeper`,
the controller's plugin object that writes the report's ``gates`` section (a report section of
:mod:`pytest_tooleffect.report.assembly`), prints one line per gate and sets ``session.exitstatus`` (unless ``-p
no:tooleffect-gates`` switched it off; with no gate set, only for a run of cases that scored nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import asdict, replace
from decimal import Decimal
from fractions import Fraction
from functools import partial
from typing import Any, Literal

import pytest

from pytest_tooleffect.ci.exit_status import unscored_exit
from pytest_tooleffect.ci.gate_drops import DROP_UNIT, drop_gate, judge_drop
from pytest_tooleffect.ci.gate_rules import (
    AVERAGES,
    EFFECT_KINDS,
    GATES_TABLE,
    LEVELS,
    CountCaps,
    GatesConfig,
    GateSet,
    LevelFloors,
    RateFloors,
    gates_of,
)
from pytest_tooleffect.ci.gate_scope import GateScope
from pytest_tooleffect.ci.gate_verdicts import (
    UNPAIRED,
    WORDS,
    GateResult,
    Status,
    decide_exit,
    gates_fail,
    judged_nothing,
    unpaired_why,
)
from pytest_tooleffect.ci.needless_gates import NEEDLESS_GATES, judge_needless, needless_gates
from pytest_tooleffect.ci.sequential_gate import design_of, judge_sequential
from pytest_tooleffect.collect.sharding import RunSelection
from pytest_tooleffect.collect.variants import no_variants_key
from pytest_tooleffect.oracle import KINDS
from pytest_tooleffect.outcomes import NOT_A_GAP
from pytest_tooleffect.report import CLASSES, percent
from pytest_tooleffect.report.ci_model import GatesApplied, GatesNotApplied
from pytest_tooleffect.report.effects_model import EffectRate
from pytest_tooleffect.report.model import Block, ClassRates, Rate, Report
from pytest_tooleffect.report.reporter import RunTally
from pytest_tooleffect.report.robustness import Robustness
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.settings import settings_key
from pytest_tooleffect.util.output_files import output_problems_key, shown_path

__all__ = ["PLUGIN_NAME", "GateKeeper", "GateResult", "RunTally", "decide_exit", "evaluate", "gates_fail",
           "gates_section", "judged_nothing", "nothing_scored", "unmatched_tables"]

_FAIL_KINDS = tuple(k for k in KINDS if k not in ("ok", "ok_no_tool"))
#: the gate ``max_approximate_reply_verdicts`` as its line names it
_APPROX_REPLIES = "approximate reply verdicts"
_BASELINE_HINT = "no baseline: run with --tooleffect-baseline PATH"
_NOT_APPLIED = "no decision was recorded in this run; pytest's exit status stands"
#: the name the gate keeper is registered under: ``-p no:tooleffect-gates`` switches the gates off
PLUGIN_NAME = "tooleffect-gates"
_SWITCHED_OFF = f"switched off by -p no:{PLUGIN_NAME}; pytest's exit status stands"
#: a record's ``baseline.status`` values that mean it was compared with the baseline
_COMPARED = ("regression", "changed", "known", "fixed", "passing")
#: a count gate's line names at most this many of its decisions, then counts the rest
_NAMED_IDS = 5

# ------------------------------------------------------------------------------ judging


def _shown(value_pct: float, threshold: float, ok: bool) -> str:
    """The report's rounding of a percentage (half up, one digit), with more digits when one
    digit would show it on the other side of the threshold than it was judged (89.96 vs 90).
    """
    for digits in (1, 2, 3, 4):
        text: str = percent(Fraction(repr(value_pct)) / 100, digits)
        if (Decimal(text) >= Decimal(repr(threshold))) == ok:
            return text
    return repr(value_pct)


def _ci_text(ci: Sequence[float] | None) -> str:
    if ci is None:
        return "Wilson –"
    lo, hi = (percent(Fraction(repr(x)) / 100) for x in ci)
    return f"Wilson {lo}-{hi}"


def _in_baseline(records: Sequence[Record]) -> bool:
    """Some decision of a block's is in the baseline (or the block scored none: nothing to say)."""
    return not records or any(r.baseline is not None and r.baseline.status != "new" for r in records)


def evaluate(report: Report, records: Sequence[Record],
             config: GatesConfig, scope: GateScope | None = None) -> list[GateResult]:
    """Judge every gate on every block of the report.

    Args:
        report: the report (its ``blocks``, one per family × policy).
        records: the run's records (for the regression count: ``baseline.status``).
        config: the gates.
        scope: what the run selected: a gate on a class, policy or family it deselected (or a
            policy it could have run and did not) is NOT APPLICABLE, and an average over a block
            whose classes it deselected says what it covers; ``None`` (a report made from record
            logs): every gate applies.

    Returns:
        The results, block by block in the report's order, then one NOT JUDGED result per gate of
        every table that matches no block of the run: one that names a family and a policy the run
        did not score, a wildcard table that matches nothing (a typo such as ``"*/Replay"``), and
        ``"*"`` itself when the run scored nothing (every item skipped).  A gate never passes on
        nothing: these fail the run unless their table says ``unjudged = "pass"``.  A table whose
        family × policy the run did not select gives NOT APPLICABLE results instead.
    """
    scope = scope if scope is not None else GateScope(None)
    out: list[GateResult] = []
    blocks = report.blocks
    by_block: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        by_block.setdefault((r.family, r.policy), []).append(r)
    paired = any(r.baseline is not None for r in records)
    for block in blocks:
        fam, pol = block.family, block.policy
        gates = config.for_block(fam, pol)
        out.extend(unpaired_why(_judge_block(block, by_block.get((fam, pol), []), gates, scope,
                                             partial(judge_sequential, report.sequential, fam, pol, has_baseline=paired,
                                                     block_in_baseline=_in_baseline(by_block.get((fam, pol), []))),
                                             report.robustness), report.baseline))
    shown = ", ".join(f"{b.family}/{b.policy}" for b in blocks)
    for fam, pol in config.tables:
        if any(fam in ("*", b.family) and pol in ("*", b.policy) for b in blocks):
            continue
        gates = config.for_block(fam, pol)
        listed = list(_listed(gates))
        if "*" in (fam, pol):  # a wildcard table's own gates (the less specific ones judge the blocks there are)
            own = {g[0] for g in _listed(config.tables[(fam, pol)])}
            listed = [g for g in listed if g[0] in own]
        left_out = scope.table_not_selected(fam, pol) if blocks else None
        if left_out is not None:
            out.extend(GateResult(fam, pol, gate, op, threshold, unit, bound, "not_applicable", False, None, None,
                                  left_out) for gate, op, threshold, unit, bound in listed)
            continue
        if not blocks:
            reason = nothing_scored(report)
        elif "*" not in (fam, pol):
            reason = f"no decisions of family {fam} and policy {pol} in the run"
        else:
            reason = f'table "{fam}/{pol}" matches no family x policy of the run (blocks: {shown})'
        if blocks and (patterns := [p for p in (fam, pol) if "*" in p and p != "*"]):  # "*/my-*": no pattern
            reason += f"; {patterns[0]} is no pattern: each part of a table's key is a name or * alone"
        out.extend(GateResult(fam, pol, gate, op, threshold, unit, bound, "not_judged",
                              gates.unjudged != "pass", None, None, _unjudged(reason, gates))
                   for gate, op, threshold, unit, bound in listed)
    return out


def nothing_scored(report: Report) -> str:
    """Why a run's report holds no block: ``nothing was judged: the run scored no decision (8 skipped)``."""
    parts = [f"{n} {what}" for n, what in ((sum(s.count for s in report.skipped), "skipped"),
                                          (sum(f.count for f in report.invalid), "invalid cases"),
                                          (sum(u.count for u in report.unrecorded), "without a record")) if n]
    return "nothing was judged: the run scored no decision" + (f" ({', '.join(parts)})" if parts else "")


def unmatched_tables(report: Report, config: GatesConfig) -> list[str]:
    """The gate tables with a wildcard that match no block of the report (a typo such as
    ``"*/Replay"`` would otherwise judge nothing while every gate "passed"), as ``FAMILY/POLICY``.

    Args:
        report: the report (its ``blocks``).
        config: the gates.

    Returns:
        The tables' keys, in the file's order; ``"*"`` (every block) is never among them.
    """
    blocks = [(b.family, b.policy) for b in report.blocks]
    return [f"{fam}/{pol}" for fam, pol in config.tables
            if "*" in (fam, pol) and (fam, pol) != ("*", "*")
            and not any(fam in ("*", f) and pol in ("*", p) for f, p in blocks)]


def _listed(gates: GateSet) -> Iterable[tuple[str, str, float, str, str | None]]:
    """Every gate a set holds, in the order lines are printed: (gate, op, threshold, unit, bound)."""
    bound = gates.bound or "point"
    floors = gates.min_pct or RateFloors()
    for subject in (*CLASSES, *AVERAGES):
        levels = getattr(floors, subject) or LevelFloors()
        for level in LEVELS:
            t = getattr(levels, level)
            if t is not None and t != "off":
                yield (f"{subject} {level}", ">=", float(t), "%", bound if subject in CLASSES else None)
    caps = gates.max_count or CountCaps()
    for kind in (*_FAIL_KINDS, *EFFECT_KINDS):
        c = getattr(caps, kind)
        if c is not None and c != "off":
            yield (kind, "<=", float(c), "", None)
    if gates.max_regressions is not None and gates.max_regressions != "off":
        yield ("regressions", "<=", float(gates.max_regressions), "", None)
    if gates.max_changed is not None and gates.max_changed != "off":
        yield ("changed", "<=", float(gates.max_changed), "", None)
    if gates.max_approximate_reply_verdicts is not None and gates.max_approximate_reply_verdicts != "off":
        yield (_APPROX_REPLIES, "<=", float(gates.max_approximate_reply_verdicts), "", None)
    if gates.max_cost_usd_per_decision is not None and gates.max_cost_usd_per_decision != "off":
        yield ("cost per decision", "<=", float(gates.max_cost_usd_per_decision), "USD", None)
    if gates.max_cost_usd is not None and gates.max_cost_usd != "off":
        yield ("cost", "<=", float(gates.max_cost_usd), "USD", None)
    for key, most in sorted((gates.max_drop or {}).items()):
        if most != "off":
            yield (drop_gate(key), "<=", float(most), DROP_UNIT, None)
    yield from needless_gates(gates)
    if gates.sequential is not None and gates.sequential_on:
        yield ("sequential", "at alpha", design_of(gates.sequential).alpha, "alpha", None)


def _unjudged(reason: str, gates: GateSet) -> str:
    return reason + ('; let through by unjudged = "pass"' if gates.unjudged == "pass" else "")


def _judge_block(block: Block, records: Sequence[Record], gates: GateSet, scope: GateScope,
                 sequential: Callable[[_Make], GateResult] | None = None,
                 robustness: Robustness | None = None) -> list[GateResult]:
    min_n = gates.min_n or 1
    results = []
    # a filter that left out part of a class (-k, --deselect, -m on a marker of some cases): every gate
    # judged on what is left says how much the filter left out, and which filter
    partly = scope.partly(block.family, block.policy)
    for gate, op, threshold, unit, bound in _listed(gates):
        result = _maker(block.family, block.policy, gates, gate, op, threshold, unit, bound)
        if gate in NEEDLESS_GATES:  # over the no-tool class
            got = judge_needless(block, gate, threshold, min_n, result)
            note = scope.partly(block.family, block.policy, "no_tool")
        elif unit == "%":
            subject, level = gate.split(" ")
            left_out = scope.class_not_selected(block.family, block.policy, subject)
            if left_out is not None:
                results.append(result("not_applicable", left_out))
                continue
            got = _judge_rate(block, subject, level, threshold, bound, min_n, result,
                              scope.coverage(block.family, block.policy, _classes_with_rows(block, level)))
            note = scope.partly(block.family, block.policy, subject) if subject in CLASSES else partly
        elif unit == "":
            got, note = _judge_count(block, records, gate, threshold, result), partly
        elif unit == "alpha":
            got = sequential(result) if sequential is not None else result("not_judged", "no tally")
            note = partly
        elif unit == DROP_UNIT:
            got, note = judge_drop(block.family, block.policy, gate, threshold, robustness, records, result), partly
            why_none = scope.no_variants.get(block.family)
            if got.status == "not_judged" and why_none is not None:  # the family's cases, not a filter
                got, note = result("not_judged", f"no variant of family {block.family}: {why_none}"), ""
        else:
            got, note = _judge_cost(block, gate, threshold, result), partly
        results.append(replace(got, detail=f"{got.detail}, {note}") if note else got)
    return results


_Make = Callable[..., GateResult]


def _maker(family: str, policy: str, gates: GateSet, gate: str, op: str, threshold: float, unit: str,
           bound: str | None) -> _Make:
    """A maker of one gate's result: ``make(status, detail, value=None, n=None, ids=None)``."""

    def make(status: Status, detail: str, value: float | None = None, n: int | None = None,
             ids: tuple[str, ...] | None = None) -> GateResult:
        if status == "not_judged":
            detail = _unjudged(detail, gates)
        fails = status == "failed" or (status == "not_judged" and gates.unjudged != "pass")  # never not_applicable
        return GateResult(family, policy, gate, op, threshold, unit, bound, status, fails, value, n, detail, ids)

    return make


def _classes_with_rows(block: Block, level: str) -> int:
    """The classes of a block with rows at a level (an average is over those)."""
    effects = block.effects
    if effects is not None and level == "effect":
        return sum(1 for c in CLASSES if getattr(effects.classes, c).n)
    return sum(1 for c in CLASSES if getattr(block.classes, c).n)


def _judge_rate(block: Block, subject: str, level: str, threshold: float, bound: str | None,
                min_n: int, result: _Make, coverage: str = "") -> GateResult:
    effects = block.effects
    if level == "effect" and not effects:
        return result("not_judged", "no decisions were run in a sandbox")
    if subject in CLASSES:
        row: Rate | EffectRate
        if effects is not None and level == "effect":
            effect_row: EffectRate = getattr(effects.classes, subject)
            row, n = effect_row, effect_row.n
        else:
            rates: ClassRates = getattr(block.classes, subject)
            row, n = getattr(rates, level), rates.n
        if n == 0:
            return result("not_judged", f"n=0: no {subject} rows")
        if n < min_n:
            return result("not_judged", f"n={n} < min_n {min_n}", n=n)
        ci = row.wilson95_pct
        judged = ci[0] if bound == "wilson" and ci is not None else row.rate_pct
        if judged is None:
            return result("not_judged", f"n=0: no {subject} rows")
        ok = judged >= threshold
        shown = _shown(judged, threshold, ok) if bound != "wilson" else row.rate_display
        ci_text = _ci_text(ci)
        if bound == "wilson" and ci is not None:  # the lower end as judged, with more digits if one would mislead
            ci_text = f"Wilson {_shown(ci[0], threshold, ok)}-{ci_text.split('-')[-1]}"
        return result("passed" if ok else "failed", f"{shown} %, {ci_text}, n={n}", judged, n)
    # an average: judged as a point (the report gives no interval for an average)
    value: float | None
    if effects is not None and level == "effect":
        value = effects.micro_pct if subject == "micro" else effects.macro_pct
        counts = {c: getattr(effects.classes, c).n for c in CLASSES}
    else:
        value = getattr(block.micro if subject == "micro" else block.macro, f"{level}_pct")
        counts = {c: getattr(block.classes, c).n for c in CLASSES}
    total = sum(counts.values())
    if value is None or total == 0:
        return result("not_judged", "n=0: no rows")
    if subject == "micro":
        if total < min_n:
            return result("not_judged", f"n={total} < min_n {min_n}", n=total)
        detail_n = f"n={total}" + (f", {coverage}" if coverage else "")
    else:
        small = [f"{c} n={n}" for c, n in counts.items() if 0 < n < min_n]
        if small:
            return result("not_judged", f"{', '.join(small)} < min_n {min_n}", n=total)
        detail_n = f"{coverage or f'over {sum(1 for n in counts.values() if n)} classes'}, n={total}"
    ok = value >= threshold
    return result("passed" if ok else "failed", f"{_shown(value, threshold, ok)} %, point estimate, {detail_n}",
                  value, total)


def _judge_count(block: Block, records: Sequence[Record], gate: str, threshold: float,
                 result: _Make) -> GateResult:
    if gate in ("regressions", "changed"):
        if not any(r.baseline is not None for r in records):
            return result("not_judged", _BASELINE_HINT)
        marked = [r for r in records if r.baseline is not None and r.baseline.status in _COMPARED]
        if not marked:  # a baseline that pairs no decision (another family, policy or repeats) judges nothing
            return result("not_judged", UNPAIRED)
        status = "regression" if gate == "regressions" else "changed"
        ids = tuple(sorted(r.id for r in marked if r.baseline is not None and r.baseline.status == status))
        shown = f"{len(ids)} of {len(marked)} decisions compared with the baseline" + _named(ids, len(ids))
        return result("passed" if len(ids) <= threshold else "failed", shown, float(len(ids)), len(marked), ids)
    if gate == _APPROX_REPLIES:
        ids = tuple(sorted(r.id for r in records if r.outcome == "scored" and r.verdict is not None
                           and r.verdict.reply is not None and r.verdict.reply.low_precision))
        count = block.approximate_replies.low_precision if block.approximate_replies is not None else len(ids)
        return result("passed" if count <= threshold else "failed",
                      f"{count} of {block.n_scored} decisions rest on a fallback reply kind of precision under 0.8"
                      + _named(ids, count), float(count), block.n_scored, ids)
    if gate in EFFECT_KINDS:
        effects = block.effects
        if not effects:
            return result("not_judged", "no decisions were run in a sandbox")
        count, n = getattr(effects.kinds, gate, 0), effects.n
        ids = tuple(sorted(r.id for r in records if r.outcome == "scored" and r.effect is not None
                           and r.effect.kind == gate))
    else:
        count, n = getattr(block.kinds, gate, 0), block.n_scored
        ids = tuple(sorted(r.id for r in records if r.outcome == "scored" and r.verdict is not None
                           and r.verdict.kind == gate))
    if n == 0:  # "0 of 0 decisions" is no evidence that none failed
        return result("not_judged", "no scored decisions")
    return result("passed" if count <= threshold else "failed", f"{count} of {n} decisions" + _named(ids, count),
                  float(count), n, ids)


def _named(ids: Sequence[str], count: int) -> str:
    """``: a, b, c and 4 more``: the first :data:`_NAMED_IDS` record ids behind a count, the rest counted
    (``count`` is the gate's own count: a report judged without its records names none of them).
    """
    if not count or not ids:
        return ""
    shown = ids[:_NAMED_IDS]
    rest = count - len(shown)
    return ": " + ", ".join(shown) + (f" and {rest} more" if rest > 0 else "")


def _judge_cost(block: Block, gate: str, threshold: float, result: _Make) -> GateResult:
    cost, n = block.cost, block.n_scored
    if n == 0:
        return result("not_judged", "no scored decisions")
    known = cost.cost_usd or 0.0
    unknown = cost.cost_usd_unknown or 0
    per = gate == "cost per decision"
    value = known / n if per else known  # mean over the scored decisions, or the total (USD)
    shown = f"${value:.6f}" + (" mean" if per else "") + f" over {n} decisions"
    if unknown:  # unpriced decisions cost >= 0: the known part is a lower bound
        if value > threshold:
            return result("failed", f"at least {shown}; cost unknown for {unknown} of {n} decisions", value, n)
        return result("not_judged", f"cost unknown for {unknown} of {n} decisions")
    return result("passed" if value <= threshold else "failed", shown, value, n)


# ------------------------------------------------------------------------------ plugin


class GateKeeper:
    """Controller-only: the gates judged on the report, and the exit status under gates.

    The report's ``gates`` section is written through the internal section protocol
    (:class:`~pytest_tooleffect.report.assembly.ReportSection`, after the baseline's); the
    reporter writes it out (JSON, HTML, Markdown summary); this object sets ``session.exitstatus``
    and prints one line per gate.

    Args:
        config: pytest's config (the gates are the ``[tool.tooleffect.gates]`` its settings read from the
            rootdir's ``pyproject.toml``, validated here, at configure time).
        tally: the run's failures by what they are (counted by the reporter).
        selection: what the run selected (its ``scope`` by family × policy and class, known once
            collection is done); ``None``: every gate applies.

    Raises:
        pytest.UsageError: ``[tool.tooleffect.gates]`` is invalid.
    """

    section: Literal["gates"] = "gates"

    def __init__(self, config: pytest.Config, tally: RunTally, selection: RunSelection | None = None) -> None:
        self.config = config
        self.selection = selection
        self.gates = gates_of(config.stash[settings_key])
        self.settings = config.stash[settings_key]
        self.tally = tally
        self.session: pytest.Session | None = None
        self.report: Report | None = None
        self.records: Sequence[Record] = []
        self.results: list[GateResult] | None = None
        self.exit: tuple[int, str] | None = None
        self.unscored: tuple[int, str] | None = None
        #: ``-p no:tooleffect-gates``: the gates judge nothing, and the report says they were switched off
        self.off = config.pluginmanager.is_blocked(PLUGIN_NAME)

    @property
    def configured(self) -> bool:
        """Some gate is set in ``[tool.tooleffect.gates]``."""
        return self.gates is not None and self.gates.configured

    @property
    def applies(self) -> bool:
        """The gates decide this run's exit status: some gate is set, and the run made a report (it
        recorded decisions, or ``--tooleffect-report`` asked for one); not under ``--collect-only``.
        A run of other tests only (no case scored) keeps pytest's status, and so does a run with the
        gates switched off (``-p no:tooleffect-gates``).
        """
        return (self.configured and self.report is not None and not self.config.option.collectonly
                and not self.off)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Judge the gates on the report (its blocks, and the records' baseline statuses) and write
        ``report.gates``: the results when the gates apply, else (when some gate is set) why not.
        """
        made = bool(report.blocks or report.invalid or report.skipped or report.unrecorded
                    or self.settings.report is not None)
        self.report, self.records = (report if made else None), records
        if self.applies:
            self._judge()
            report.gates = self._section()
        elif self.configured:
            report.gates = GatesNotApplied(applied=False, note=_SWITCHED_OFF if self.off else _NOT_APPLIED)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """Set ``session.exitstatus`` after the report is made (the reporter's trylast
        ``pytest_sessionfinish`` runs inside this wrapper) and before the terminal summary
        (printed by the terminal reporter's wrapper, outside this one); pytest returns
        ``session.exitstatus`` once ``pytest_sessionfinish`` is done.
        """
        result = yield
        if self.applies:
            self._judge()
            assert self.exit is not None
            session.exitstatus = self.exit[0]
        elif self.report is not None and not self.configured and not self.config.option.collectonly:
            self.unscored = unscored_exit(session.exitstatus, self.report)
            if self.unscored is not None:
                session.exitstatus = self.unscored[0]
        problems = self.config.stash.get(output_problems_key, None)
        if problems and session.exitstatus == pytest.ExitCode.OK:  # outputs incomplete: never exit 0
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return result

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        """Print one line per gate and the decision, after every plugin's own section (this
        wrapper's code after ``yield`` runs once they are done) and before pytest's short summary.
        """
        result = yield
        if self.unscored is not None:
            terminalreporter.write_line(self.unscored[1], bold=True, red=True)
        if self.configured and not self.applies and not self.config.option.collectonly:
            terminalreporter.write_line(f"tooleffect gates: not applied: {_NOT_APPLIED}", yellow=True)
        if self.applies and self.results is not None and self.exit is not None:
            terminalreporter.write_sep("=", "tooleffect gates")
            for r in self.results:
                markup = ({"green": True} if r.status == "passed" else {"red": True} if r.fails_run
                          else {"yellow": True})
                terminalreporter.write_line(r.line, **markup)
            terminalreporter.write_line(self._decision_line(), bold=True, red=self.exit[0] != 0,
                                        green=self.exit[0] == 0)
        reporter = self.config.pluginmanager.get_plugin("tooleffect-reporter")
        summary_md = self.settings.summary_md
        if summary_md is not None and getattr(reporter, "summary_written", False):
            terminalreporter.write_line("tooleffect summary (Markdown) written to "
                                        f"{shown_path(summary_md, self.config.invocation_params.dir)}")
        return result

    def _decision_line(self) -> str:
        """``tooleffect gates: P passed, F failed, U not judged (…); E errors; exit S: why``."""
        assert self.results is not None and self.exit is not None
        counts = {s: sum(1 for r in self.results if r.status == s) for s in WORDS}
        failing = sum(1 for r in self.results if r.status == "not_judged" and r.fails_run)
        unjudged = f"{counts['not_judged']} not judged"
        if counts["not_judged"]:
            unjudged += f" ({failing} of them failing the run)" if failing else " (let through)"
        run = self._scope().run
        if counts["not_applicable"]:  # a filtered run: what it did not select is not judged, and not failed
            unjudged += (f", {counts['not_applicable']} not applicable (not selected by this run"
                         f"{': ' + run.filters if run is not None and run.filters else ''})")
        filtered = run.filtered if run is not None else ""
        if filtered and not counts["not_applicable"]:  # judged on part of what was collected: which filter
            unjudged += f", judged on a filtered run ({filtered})"
        unscored = ""
        if self.report is not None:  # collected and never decided: no gate judges them, and the report says so
            skipped = sum(n for s in self.report.skipped for why, n in s.reasons.items() if why not in NOT_A_GAP)
            invalid = sum(f.count for f in self.report.invalid)
            unrecorded = sum(u.count for u in self.report.unrecorded)
            parts = [f"{n} {what}" for n, what in ((skipped, "skipped"), (invalid, "invalid cases"),
                                                   (unrecorded, "without a record")) if n]
            if parts:
                unscored = f"; {', '.join(parts)} judged by no gate (report {self.report.status})"
        return (f"tooleffect gates: {counts['passed']} passed, {counts['failed']} failed, {unjudged}; "
                f"{self.tally.errors} errors; {self.exit[1]}{unscored}")

    def _judge(self) -> None:
        if self.results is None:
            assert self.gates is not None and self.report is not None
            self.results = evaluate(self.report, self.records, self.gates, self._scope())
        if self.exit is None:
            session = self.session
            assert session is not None and self.gates is not None
            stopped = bool(session.shouldfail or session.shouldstop)
            nothing = judged_nothing(self.results)
            fails = gates_fail(self.results, self.gates)
            self.exit = decide_exit(session.exitstatus, fails, self.tally, stopped, judged=not nothing)

    def _scope(self) -> GateScope:
        run = self.selection.scope if self.selection is not None else None
        return GateScope.of(run, self.settings.pyproject_policies, self.config.stash.get(no_variants_key, {}))

    def _section(self) -> GatesApplied:
        assert self.results is not None and self.exit is not None and self.gates is not None
        assert self.report is not None
        run = self._scope().run
        return gates_section(self.report, self.gates, self.results, self.tally, self.exit,
                             run.filtered if run is not None else "")


def gates_section(report: Report, gates: GatesConfig, results: Sequence[GateResult], tally: RunTally,
                  exit: tuple[int, str], filtered: str = "") -> GatesApplied:
    """The report's ``gates`` section of gates that applied.

    Args:
        report: the judged report.
        gates: the gates (``[tool.tooleffect.gates]`` and the file it came from).
        results: :func:`evaluate`'s results.
        tally: the run's failures by what they are.
        exit: :func:`decide_exit`'s ``(status, why)``.
        filtered: what left case items out of the run, in words
            (:attr:`~pytest_tooleffect.collect.scope.RunScope.filtered`); ``""``: nothing did.

    Returns:
        The typed section.
    """
    return GatesApplied.model_validate({
        "applied": True,
        "source": f"{gates.path} [{GATES_TABLE}]",
        "passed": not gates_fail(results, gates),
        "counts": {s: sum(1 for r in results if r.status == s) for s in WORDS},
        "errors": asdict(tally) | {"total": tally.errors},
        "exit_status": exit[0],
        "exit_reason": exit[1],
        "unmatched_tables": unmatched_tables(report, gates),
        "filtered": filtered or None,
        "results": [r.to_dict() for r in results],
    })
