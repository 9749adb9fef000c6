"""The gates judged on a report made from record logs (``tooleffect report --gates``), as a run's
gate keeper (:mod:`.gate_keeper`) judges them on a run; a report that lacks part of its run
(``incomplete``: a shard missing, fewer records than the run selected, logs that do not say what
their run selected) never passes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import pytest

from pytest_tooleffect.ci.gate_keeper import (
    GateResult,
    decide_exit,
    evaluate,
    gates_fail,
    gates_section,
    judged_nothing,
)
from pytest_tooleffect.ci.gate_rules import GatesConfig
from pytest_tooleffect.ci.gate_scope import GateScope
from pytest_tooleffect.collect.scope import RunScope
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.reporter import RunTally
from pytest_tooleffect.scoring.outcome import decision_passed, expected_failure
from pytest_tooleffect.scoring.record import Record

__all__ = ["INCOMPLETE_REASON", "LogGates"]

#: the exit reason of gates judged on an incomplete report (the gates' own reason follows it)
INCOMPLETE_REASON = ("the report is incomplete (part of the run has no record, or the logs do not say what the "
                     "run selected): gates judge complete runs only")


class LogGates:
    """The gates judged on a report made from record logs: a
    :class:`~pytest_tooleffect.report.assembly.ReportSection` written after the baseline's, as a
    run's gate keeper writes it.  The records stand for the run's outcomes: an error record fails
    the run whatever the gates say, as in a run; a report whose status is not ``complete`` fails
    them whatever they judged (``gates.passed`` false, exit status 1, the reason says why).

    Args:
        gates: the gates read from a ``pyproject.toml``.
        policies: the policies that file defines (``[tool.tooleffect.policies]``): a gate table on one
            of them (or ``replay``) that the logs hold no record of is NOT APPLICABLE, as it is in
            the run (the run could have run it and did not); a table on a policy nobody defined is
            NOT JUDGED.

    Attributes:
        results: the gates' results once contributed.
        exit: ``(status, why)`` once contributed: 0 when every gate passed, nothing errored and the
            report is complete, else 1.
    """

    section: Literal["gates"] = "gates"

    def __init__(self, gates: GatesConfig, policies: Iterable[str] = ()) -> None:
        self.gates = gates
        self.policies = frozenset(policies)
        self.results: list[GateResult] = []
        self.exit: tuple[int, str] = (0, "")

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Judge the gates on ``report`` and write ``report.gates``."""
        # a failed decision as pytest reported it: not an expected failure (pytest's XFAIL, as the
        # report's xfail count has it)
        failed = sum(1 for r in records if decision_passed(r) is False and not expected_failure(r))
        tally = RunTally(decision_failures=failed, error_records=sum(1 for r in records if r.outcome == "error"))
        counts: dict[tuple[str, str], Counter[str]] = {}
        for r in records:
            counts.setdefault((r.family, r.policy), Counter())[r.label_class] += 1
        held = {k: dict(v) for k, v in counts.items()}  # the logs say what their run selected: all of it is here
        scope = GateScope.of(RunScope(collected=held, selected=held), self.policies)
        self.results = evaluate(report, records, self.gates, scope)
        fails = gates_fail(self.results, self.gates)
        self.exit = decide_exit(int(pytest.ExitCode.OK), fails, tally, False, judged=not judged_nothing(self.results))
        incomplete = report.status != "complete"
        if incomplete:  # a report of part of a run never passes for the whole
            status, why = self.exit
            gates_said = why.split(": ", 1)[1] if status else "its gates alone would pass"
            self.exit = (int(pytest.ExitCode.TESTS_FAILED), f"exit 1: {INCOMPLETE_REASON}; {gates_said}")
        section = gates_section(report, self.gates, self.results, tally, self.exit)
        report.gates = section.model_copy(update={"passed": False}) if incomplete else section
