"""One line for a run that replayed cases with nothing recorded: how to choose a policy.

A new user's first ``pytest`` runs every case under ``replay``, the offline default, which scores the
decision the case recorded.  Cases written by hand usually record none, so every item is skipped
and the gates say only that nothing was judged.  :func:`replay_hint` says why, and what to do, in
one line the terminal (after the gates' decision: :class:`ReplayHint`) and the Markdown summary print.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_tooleffect.options import OPT_AGENT, OPT_POLICY, REPLAY
from pytest_tooleffect.outcomes import NOTHING_TO_REPLAY

if TYPE_CHECKING:
    from pytest_tooleffect.report.model import Report

__all__ = ["CHOOSE_A_POLICY", "ReplayHint", "replay_hint"]

#: how a run names the policy it runs, in the words the hint ends with
CHOOSE_A_POLICY = (f"run your agent with {OPT_AGENT} MODULE:FUNCTION or {OPT_POLICY} NAME, or set "
                   'default_policies = ["NAME"] in [tool.tooleffect] of pyproject.toml')


def replay_hint(report: Report) -> str | None:
    """The hint, when replay was the run's only policy and some of its items had nothing recorded.

    The run's policies are read from the report: its blocks' and its skipped items' policies.

    Args:
        report: the run's report.

    Returns:
        ``tooleffect: nothing recorded to replay for N decisions (FAMILY, …), and replay, the
        offline default, is this run's only policy: run your agent with …``, or ``None`` when the
        run had another policy or every replayed case had a recorded decision.
    """
    policies = {b.policy for b in report.blocks} | {s.policy for s in report.skipped}
    if policies != {REPLAY.name}:
        return None
    by_family = {s.family: s.reasons.get(NOTHING_TO_REPLAY, 0) for s in report.skipped}
    n = sum(by_family.values())
    if not n:
        return None
    families = ", ".join(sorted(f for f, count in by_family.items() if count))
    return (f"tooleffect: nothing recorded to replay for {n} decision{'s' if n != 1 else ''} ({families}), and "
            f"replay, the offline default, is this run's only policy: {CHOOSE_A_POLICY}")


class ReplayHint:
    """Controller-only: prints :func:`replay_hint` as the run's last tooleffect line.

    Registered before the gate keeper: both print in a ``trylast`` wrapper of
    ``pytest_terminal_summary``, and of two such wrappers pluggy calls the one registered first
    outermost (its code after ``yield`` runs last), so the hint follows the gates' decision line
    ("no gate judged anything").

    Args:
        config: pytest's config (the report is the ``tooleffect-reporter`` plugin's).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        result = yield
        report = getattr(self.config.pluginmanager.get_plugin("tooleffect-reporter"), "report", None)
        hint = replay_hint(report) if report is not None else None
        if hint is not None:
            terminalreporter.write_line(hint, yellow=True, bold=True)
        return result
