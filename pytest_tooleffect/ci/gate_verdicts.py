"""One gate's verdict (:class:`GateResult`), and the session's exit status decided from the gates'
verdicts: whether they fail the run (:func:`gates_fail`: a gate never passes on nothing) and the
status with its reason (:func:`decide_exit`).  The gates are judged in :mod:`.gate_keeper`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any, Literal

import pytest

from pytest_tooleffect.ci.gate_rules import GatesConfig
from pytest_tooleffect.report.ci_model import BaselineComparison, BaselineUnreadable
from pytest_tooleffect.report.reporter import RunTally

__all__ = ["UNPAIRED", "WORDS", "GateResult", "Status", "decide_exit", "gates_fail", "judged_nothing", "unpaired_why"]

Status = Literal["passed", "failed", "not_judged", "not_applicable"]
#: the words of a gate's line
WORDS = {"passed": "PASSED", "failed": "FAILED", "not_judged": "NOT JUDGED", "not_applicable": "NOT APPLICABLE"}
#: why a regression or changed gate was not judged: the baseline paired no decision of its block
UNPAIRED = "no decision of the run was compared with the baseline"


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict on one family × policy.

    Attributes:
        family: the family (``*`` in a key that matched no block).
        policy: the policy (likewise).
        gate: what is judged, e.g. ``no_tool name`` or ``forbidden``.
        op: ``>=`` (a floor), ``<=`` (a ceiling) or ``at alpha`` (a sequential gate).
        threshold: the floor (percent) or ceiling (decisions, or USD).
        unit: ``%``, ``""`` (a count), ``USD``, ``alpha`` (a sequential gate, judged at that level) or
            ``pts`` (percentage points: a drop).
        bound: ``point`` or ``wilson`` for a class rate; ``None`` otherwise.
        status: ``passed``, ``failed``, ``not_judged`` or ``not_applicable`` (its class, policy or family
            was not selected by this run: :mod:`.gate_scope`).
        fails_run: a failed gate, or a NOT JUDGED one under ``unjudged = "fail"`` (a not applicable
            gate never does; a run whose gates judged nothing fails all the same: :func:`gates_fail`).
        value: the judged value (percent, count or USD), ``None`` when not judged.
        n: the rows behind the value, when it is a rate.
        detail: the parenthesised part of the line.
        ids: record ids behind a count gate (the regressions, the changed known failures, the
            decisions of a kind), sorted; ``None`` for a rate or a cost.
    """

    family: str
    policy: str
    gate: str
    op: str
    threshold: float
    unit: str
    bound: str | None
    status: Status
    fails_run: bool
    value: float | None
    n: int | None
    detail: str
    ids: tuple[str, ...] | None = None

    @property
    def line(self) -> str:
        """``gate FAMILY/POLICY GATE OP THRESHOLD: STATUS (detail)``, the terminal line."""
        word = WORDS[self.status]
        judged = " Wilson lower bound" if self.bound == "wilson" else ""
        return (f"gate {self.family}/{self.policy} {self.gate}{judged} {self.op} "
                f"{_show_threshold(self.threshold, self.unit)}: {word} ({self.detail})")

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the report's ``gates.results`` entries), with the terminal line."""
        out = asdict(self)
        out["ids"] = list(self.ids) if self.ids is not None else None
        out["line"] = self.line
        return out


def _show_threshold(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:.1f} %" if value * 10 == int(value * 10) else f"{_plain(value)} %"
    if unit == "USD":
        return f"${_plain(value)}"
    if unit == "alpha":  # a sequential gate's level
        return _plain(value)
    if unit == "pts":
        return f"{_plain(value)} pts"
    return str(int(value))


def _plain(value: float) -> str:
    return format(Decimal(repr(value)).normalize(), "f")


def judged_nothing(results: Sequence[GateResult]) -> bool:
    """No gate was judged: there are none, or every one is NOT JUDGED or NOT APPLICABLE."""
    return not any(r.status in ("passed", "failed") for r in results)


def gates_fail(results: Sequence[GateResult], config: GatesConfig) -> bool:
    """The gates fail the run: some gate failed it (failed, or NOT JUDGED under ``unjudged = "fail"``),
    there is no gate at all, or no gate judged anything (a gate never passes on nothing, even when
    every one is NOT APPLICABLE to a filtered run) and some table of theirs does not say
    ``unjudged = "pass"``.
    """
    if not results or any(r.fails_run for r in results):
        return True
    return judged_nothing(results) and any(config.for_block(r.family, r.policy).unjudged != "pass"
                                           for r in results if r.status == "not_applicable")



def decide_exit(pytest_status: int, gates_fail: bool, tally: RunTally, stopped: bool,
                judged: bool = True) -> tuple[int, str]:
    """The session's exit status when gates are configured.

    Decision failures alone do not fail the run; the gates do, and errors still do.  A status
    other than ``OK`` or ``TESTS_FAILED`` (interrupted, internal error, usage error, no tests
    collected) is kept, and so is the status of a run stopped early by ``-x``/``--maxfail``:
    the gates judge complete runs only.

    Args:
        pytest_status: the status pytest decided.
        gates_fail: some gate failed, or was not judged under ``unjudged = "fail"``.
        tally: the run's failures by what they are.
        stopped: the run was stopped early (``session.shouldfail`` or ``shouldstop``).
        judged: some gate was judged (not every one NOT JUDGED): a run whose gates judged nothing
            says so in its reason, whether its NOT JUDGED gates fail it (the default) or not.

    Returns:
        ``(status, why)``.
    """
    if pytest_status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return int(pytest_status), f"pytest's exit status {int(pytest_status)} kept (the run did not complete)"
    if stopped:
        return int(pytest_status), "pytest's exit status kept: the run was stopped early, and gates judge complete runs"
    why = []
    if tally.errors:
        parts = [f"{n} {what}" for n, what in ((tally.error_records, "error records"),
                                              (tally.collection_errors, "collection errors"),
                                              (tally.other_failures, "other failures")) if n]
        why.append(", ".join(parts))
    if gates_fail:
        why.append("gates failed" + ("" if judged else ": no gate judged anything, and a gate never passes on nothing"))
    if why:
        return int(pytest.ExitCode.TESTS_FAILED), "exit 1: " + "; ".join(why)
    if not judged:
        return int(pytest.ExitCode.OK), 'exit 0: no gate judged anything, let through by unjudged = "pass"'
    note = f" ({tally.decision_failures} failed decisions are judged by the gates)" if tally.decision_failures else ""
    return int(pytest.ExitCode.OK), "exit 0: every gate passed and nothing errored" + note




def unpaired_why(results: Sequence[GateResult],
                 baseline: BaselineComparison | BaselineUnreadable | None) -> list[GateResult]:
    """The results of one block, the NOT JUDGED ones for want of a paired decision (:data:`UNPAIRED`)
    naming why when the baseline section knows: the two sides' repeats differ (record ids under
    ``--tooleffect-repeats`` name the trial: :func:`~pytest_tooleffect.ci.comparison.repeats_mismatches`).

    Args:
        results: one block's results.
        baseline: the report's ``baseline`` section, if any.
    """
    mismatches = baseline.repeats_mismatches if isinstance(baseline, BaselineComparison) else []
    out = []
    for r in results:
        why = next((m.line for m in mismatches if (m.family, m.policy) == (r.family, r.policy)), None)
        if why is not None and r.status == "not_judged" and r.detail.startswith(UNPAIRED):
            r = replace(r, detail=r.detail.replace(UNPAIRED, f"{UNPAIRED} (repeats differ: {why})", 1))
        out.append(r)
    return out
