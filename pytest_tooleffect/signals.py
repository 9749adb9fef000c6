"""SIGTERM ends a run as Ctrl-C does, and no signal cuts the run's finish short.

CI runners and ``timeout`` stop a job with SIGTERM, whose default action ends the process at
once: no report, the record log cut mid-line, the run's sandbox containers left running.  While
a run is in progress, :class:`TermAsInterrupt` turns the first SIGTERM into the
``KeyboardInterrupt`` pytest already handles for Ctrl-C: the item in progress is abandoned, the
session finishes (fixtures torn down, sandboxes removed, the report written with status
``interrupted``) and the exit status is 2.

Once the session finishes (from pytest's ``pytest_keyboard_interrupt`` or the start of
``pytest_sessionfinish``, whichever comes first, to the last of the config's cleanups), SIGINT
and SIGTERM no longer raise: pytest runs ``pytest_sessionfinish`` and ``pytest_unconfigure``
outside its own ``KeyboardInterrupt`` handling, so a Ctrl-C landing there (xdist stopping its
workers, the report being written, the sandboxes removed, the terminal summary, pytest's last
garbage collection) used to surface as a raw traceback with the cleanup cut short.  Such a signal
is noted instead: one line on stderr says the run finishes its report and cleanup first, and the
exit status is 2 (interrupted).  Three Ctrl-Cs while it finishes end the process at once, by
SIGINT's default action (what is left, containers included, is for the next start's sweep).

A handler the process had already installed (the user's own, or a harness's) is left in place:
SIGTERM's when it is not the default action, SIGINT's when it is not Python's
``KeyboardInterrupt`` handler.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any

import pytest

__all__ = ["FINISH_LINE", "SIGINTS_TO_QUIT", "TermAsInterrupt"]

#: written to stderr at the first signal noted while the run finishes
FINISH_LINE = ("tooleffect: {signal} while the run finishes: its report and cleanup are finished first "
               "(exit status 2); Ctrl-C {left} more times to stop at once")
#: the SIGINTs noted while the run finishes after which the process ends at once
SIGINTS_TO_QUIT = 3


class TermAsInterrupt:
    """The plugin object that owns the run's SIGTERM and, while the run finishes, SIGINT.

    Args:
        config: pytest's config: the handlers are restored by its last cleanup (after pytest's
            own, registered later), so no signal raises inside them; ``None``: restored by
            :meth:`close` only.

    Attributes:
        received: a SIGTERM arrived during the run.
        finishing: the session finishes: SIGINT and SIGTERM are noted, not raised.
        noted: the names of the signals noted while the run finished, in order.
    """

    def __init__(self, config: pytest.Config | None = None) -> None:
        self.received = False
        self.finishing = False
        self.noted: list[str] = []
        self._session: pytest.Session | None = None
        self._previous: Any = None
        self._installed = False
        self._int_previous: Any = None
        self._int_installed = False
        self._restored_by_cleanup = config is not None
        if config is not None:
            config.add_cleanup(self.restore)
        if not _main_thread():
            return  # signal handlers can only be set from the main thread
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # somebody else decides what SIGTERM does in this process
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self._installed = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.finishing:
            self._note(signum, frame)
            return
        if self.received:
            return  # the run is finishing already: let it remove what it started
        self.received = True
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    def _note(self, signum: int, frame: FrameType | None) -> None:
        """A signal while the run finishes: noted, one line on stderr (``os.write``: a signal
        handler must not re-enter a buffered stream the interrupted code may be writing).
        """
        name = signal.Signals(signum).name
        self.noted.append(name)
        sigints = self.noted.count("SIGINT")
        if len(self.noted) == 1:
            line = FINISH_LINE.format(signal=name, left=SIGINTS_TO_QUIT - sigints)
            _write_stderr(f"\n{line}\n")
        if signum == signal.SIGINT and sigints >= SIGINTS_TO_QUIT:
            _write_stderr(f"\ntooleffect: {SIGINTS_TO_QUIT} Ctrl-C while the run finished: stopped at once\n")
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)

    def shield(self) -> None:
        """From now on the run finishes: SIGINT (when Python's own handler has it) and this
        object's SIGTERM are noted, not raised.  Idempotent.
        """
        if self.finishing:
            return
        self.finishing = True
        if _main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._int_previous = signal.signal(signal.SIGINT, self._note)
            self._int_installed = True

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Start the finish (a second Ctrl-C is noted from here on), and drop the traceback entries
        without a line number before pytest reports the interrupt.

        A signal can interrupt a frame at an instruction CPython (3.11) maps to no line
        (``tb_lineno`` is ``None``); pytest's report of the interrupt then fails with a
        ``TypeError`` and the run ends with exit status 1 and an internal error instead of 2.
        """
        self.shield()

        def has_line(entry: Any) -> bool:
            try:
                return isinstance(entry.lineno, int)
            except TypeError:  # None - 1, inside pytest's TracebackEntry.lineno
                return False

        excinfo.traceback = excinfo.traceback.filter(has_line)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Any:
        """Outermost: the finish starts before any plugin's ``pytest_sessionfinish`` (the reporter's,
        the gate keeper's, the sandboxes', xdist's, the terminal summary) and a signal noted in
        them makes the exit status 2.
        """
        self._session = session
        self.shield()
        try:
            return (yield)
        finally:
            self._mark_interrupted()

    def _mark_interrupted(self) -> None:
        # pytest returns ``session.exitstatus`` once the config's cleanups are done: set here, it holds
        if self.noted and self._session is not None:
            self._session.exitstatus = pytest.ExitCode.INTERRUPTED

    def close(self) -> None:
        """Called at ``pytest_unconfigure``: the previous handlers are put back now, or (built with
        a config) by the config's last cleanup, after pytest's own.
        """
        if not self._restored_by_cleanup:
            self.restore()

    def restore(self) -> None:
        """Put the previous handlers back; a signal noted while the run finished makes the exit
        status 2.  Idempotent.
        """
        if self._int_installed:
            signal.signal(signal.SIGINT, self._int_previous)
            self._int_installed = False
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
        self._mark_interrupted()


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _write_stderr(text: str) -> None:
    try:
        os.write(2, text.encode("utf-8", "replace"))
    except OSError:  # stderr closed: the exit status still says it
        pass
