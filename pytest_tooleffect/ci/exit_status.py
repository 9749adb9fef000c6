"""The session's exit status with no gate set: never 0 for a run of cases that scored nothing
(:func:`unscored_exit`).  Under gates, the gates decide it (:func:`~.gate_verdicts.decide_exit`).

Part of the ci stage: :class:`~pytest_tooleffect.ci.gate_keeper.GateKeeper` calls it in its
``pytest_sessionfinish`` wrapper, once the report is made.
"""

from __future__ import annotations

import pytest

from pytest_tooleffect.report.model import Report

__all__ = ["unscored_exit"]


def unscored_exit(pytest_status: int, report: Report) -> tuple[int, str] | None:
    """The exit status of a run with no gate whose case items were collected and none scored.

    pytest exits 0 when every test it ran was skipped; a run of cases that scored no decision
    (every case item skipped: no recorded action to replay, a fixture that skips without an API
    key, every case unlabelled) has an ``incomplete`` report and measured nothing, so it must not
    look green.  It exits 5, pytest's own status for a run in which nothing was tested
    (``pytest.ExitCode.NO_TESTS_COLLECTED``).  Under gates the gates decide (:func:`~.gate_verdicts.decide_exit`:
    such a run fails them, or is let through by ``unjudged = "pass"``); with the gates switched off
    (``-p no:tooleffect-gates``) pytest's status stands.

    Args:
        pytest_status: the status pytest decided.
        report: the run's report.

    Returns:
        ``(5, why)`` when pytest's status is 0, some case item was skipped and no decision was
        scored (errors and invalid cases already fail the run); else ``None`` (the status stands).
    """
    if pytest_status != pytest.ExitCode.OK:
        return None
    skipped = sum(s.count for s in report.skipped)
    if not skipped or any(b.n_scored for b in report.blocks):
        return None
    reasons: dict[str, int] = {}
    for s in report.skipped:
        for reason, n in s.reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
    why = ", ".join(f"{r} {n}" for r, n in reasons.items())
    return (int(pytest.ExitCode.NO_TESTS_COLLECTED),
            f"tooleffect: no decision was scored ({skipped} case item{'s' if skipped != 1 else ''} skipped: {why}); "
            "report incomplete; exit 5, as pytest's when nothing was tested")
