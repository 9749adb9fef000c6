"""Every use of pytest's or the standard library's private names, in one module.

Each section says what the private name buys (measured), and the pytest versions it was checked
on; the rest of the package uses public API only.  A new pytest release that changes one of them
breaks here, and ``tests/test_compat.py`` runs against the oldest and newest supported pytest.

PhaseReports — pytest's own bookkeeping kept linear in the run's size.

pytest's terminal reporter keeps every passing setup and teardown report (``stats[""]``) only to
print a test's teardown output beside its failure, and looks them up by scanning the whole list
once per failure (``TerminalReporter._get_teardown_reports``): with thousands of failing
decisions the failure summary alone costs failures × items (25,000 × 100,000 comparisons for
50,000 decisions half failing, minutes after the report is written).  :class:`PhaseReports`
takes each passing setup or teardown report that has no teardown output back out of that list
as it arrives: pytest prints nothing else from it, so pytest's output is unchanged, and the scan per
failure is over the reports that have output only.

snapshot_logger_registry — logging's registry of loggers, safe to walk while a background import adds to it.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

__all__ = ["PhaseReports", "snapshot_logger_registry"]

class PhaseReports:
    """Controller-only plugin object: drops passing setup and teardown reports with no teardown output
    from the terminal reporter's ``stats[""]`` once the reporter has counted them.

    Args:
        config: pytest's config (its ``terminalreporter`` plugin, when there is one).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter filed the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or not report.passed or any("teardown" in name for name, _ in report.sections):
            return  # a teardown's own output is printed beside a failure: that report stays
        terminal: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        kept = getattr(terminal, "stats", {}).get("")
        if kept and kept[-1] is report:
            kept.pop()


class _SnapshotLoggers(dict):  # type: ignore[type-arg]  # logging's own registry type is a plain dict
    """logging's registry of loggers whose ``values()`` is a copy taken at once.

    pytest's log capture iterates ``logging.Logger.manager.loggerDict.values()`` each time it
    attaches its handlers (session start, collection, every test phase); the background import
    creates litellm's, httpx's and openai's loggers meanwhile, and a plain dict's view then raises
    ``RuntimeError: dictionary changed size during iteration`` (an INTERNALERROR).  ``list()`` of
    the values runs in C without releasing the GIL, so the copy cannot see a half-made change.
    """

    def values(self) -> list[Any]:  # type: ignore[override]
        return list(super().values())


def snapshot_logger_registry() -> None:
    """Make logging's registry of loggers safe to iterate while another thread adds to it (once)."""
    manager = logging.Logger.manager
    if type(manager.loggerDict) is dict:
        manager.loggerDict = _SnapshotLoggers(manager.loggerDict)
