"""SIGTERM ends a run as Ctrl-C does.

CI runners and ``timeout`` stop a job with SIGTERM, whose default action ends the process at
once: no report, the record log cut mid-line, the run's sandbox containers left running.  While
a run is in progress, :class:`TermAsInterrupt` turns the first SIGTERM into the
``KeyboardInterrupt`` pytest already handles for Ctrl-C: the item in progress is abandoned, the
session finishes (fixtures torn down, sandboxes removed, the report written with status
``interrupted``) and the exit status is 2.  Further SIGTERMs while the run finishes are ignored,
so the cleanup is not cut short; only SIGKILL leaves work for the next start's sweep.

A handler the process had already installed (the user's own, or a harness's) is left in place.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import pytest

__all__ = ["TermAsInterrupt"]


class TermAsInterrupt:
    """The plugin object that installs the SIGTERM handler for the run and restores the previous one.

    Attributes:
        received: a SIGTERM arrived during the run.
    """

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None
        self._installed = False
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # somebody else decides what SIGTERM does in this process
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self._installed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received:
            return  # the run is finishing already: let it remove what it started
        self.received = True
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Drop the traceback entries without a line number before pytest reports the interrupt.

        A signal can interrupt a frame at an instruction CPython (3.11) maps to no line
        (``tb_lineno`` is ``None``); pytest's report of the interrupt then fails with a
        ``TypeError`` and the run ends with exit status 1 and an internal error instead of 2.
        """
        def has_line(entry: Any) -> bool:
            try:
                return isinstance(entry.lineno, int)
            except TypeError:  # None - 1, inside pytest's TracebackEntry.lineno
                return False

        excinfo.traceback = excinfo.traceback.filter(has_line)

    def close(self) -> None:
        """Put the previous handler back (called at ``pytest_unconfigure``)."""
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
