"""Threads an agent left running: named, and never allowed to keep the process alive after the run.

Python waits for every non-daemon thread before a process ends (and ``concurrent.futures`` for
every thread pool worker), so an agent that starts one and never ends it
(``threading.Thread(daemon=False)``, a pool task that never returns, a poller its framework
starts) keeps ``pytest`` alive after the report is written: a CI job that never finishes.  Each
agent turn notes the threads that appeared while it ran (:func:`note_new_threads`).  When the
interpreter starts to shut down, before it would wait for them, :func:`_exit_if_left_running` tells
idle pool workers to end and gives the rest :data:`GRACE_S` seconds (:data:`WORKER_GRACE_S` on an
xdist worker, which pytest-xdist kills 10 s after asking it to end); if some still run, it names
each on stderr (its name, and the agent whose turn started it), runs the ``atexit`` handlers,
flushes the standard streams and ends the process with the run's exit status.

An xdist worker's stderr reaches the terminal only while the controller has not closed its own
capture, so a worker also hands the non-daemon threads still running when it finishes to the
controller (``workeroutput``), whose terminal summary names them.

The check is armed by the outermost run of the process only (a run inside another, as pytester's
in-process runs are, leaves its threads to the outer one), so the status used is the one the
process would have ended with.  Threads that end by themselves, idle pool workers, daemon threads
no one joins, and the plugin's own threads (joined when the run closes) are never named.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.compat import at_thread_shutdown, joined_at_exit, release_pool_workers, run_exit_handlers

__all__ = ["GRACE_S", "WORKER_GRACE_S", "AgentThreads", "left_running", "note_new_threads"]

#: seconds the threads an agent left running get to end at shutdown before the process ends anyway
GRACE_S = 5.0
#: the same on an xdist worker: pytest-xdist kills a worker 10 s after asking it to end (its
#: ``EXIT_TIMEOUT``), and a killed worker would neither name the threads nor run its exit handlers
WORKER_GRACE_S = 1.0

_lock = threading.Lock()
# each thread noted -> the agents whose turn was running when it appeared (turns overlap: async
# agents run on the turn pool's loop while a sync agent's turn runs)
_started: weakref.WeakKeyDictionary[threading.Thread, set[str]] = weakref.WeakKeyDictionary()
_runs = 0  # runs of this process configured and not yet closed (pytester's in-process runs nest)
_status: int | None = None  # the exit status of the outermost run, once it armed the check
_worker: str | None = None  # its xdist worker id, when it is a worker
_armed = False


def note_new_threads(before: Iterable[threading.Thread], agent: str, own: threading.Thread | None = None) -> None:
    """Note the threads that are running now and were not in ``before``: started during a turn of
    ``agent``, or of another agent whose turn overlapped (the message names them all).

    Daemon threads are noted too: a thread pool's worker started from the agent's own (daemon)
    thread is one, and ``concurrent.futures`` still joins it at exit.

    Args:
        before: the threads that ran when the agent's turn began (``threading.enumerate()``).
        agent: the agent, as the message names it (``module.function``).
        own: the plugin's thread the agent ran in (never noted).
    """
    known = set(before)
    fresh = [t for t in threading.enumerate() if t not in known and t is not own]
    if fresh:
        with _lock:
            for t in fresh:
                _started.setdefault(t, set()).add(agent)


def left_running(non_daemon_only: bool = False) -> list[tuple[threading.Thread, str]]:
    """The noted threads still running that the interpreter would wait for at exit (non-daemon
    threads, thread pool workers), each with the agent (or agents, ``a or b``) whose turn started it.

    Args:
        non_daemon_only: leave out thread pool workers (an idle one is told from a stuck one only
            at shutdown).
    """
    with _lock:
        noted = [(t, " or ".join(sorted(agents))) for t, agents in _started.items()]
    return [(t, agent) for t, agent in noted
            if t.is_alive() and (not t.daemon if non_daemon_only else joined_at_exit(t))]


def _named(left: list[tuple[threading.Thread, str]]) -> list[str]:
    """``'name' ×n (started during a turn of agent)`` for each name and agent."""
    groups: dict[tuple[str, str], int] = {}
    for thread, agent in left:
        groups[(thread.name, agent)] = groups.get((thread.name, agent), 0) + 1
    return [f"{name!r}{f' ×{n}' if n > 1 else ''} (started during a turn of {agent})"
            for (name, agent), n in groups.items()]


def _wait(left: list[tuple[threading.Thread, str]], grace_s: float) -> None:
    deadline = time.monotonic() + grace_s
    for thread, _ in left:
        thread.join(max(0.0, deadline - time.monotonic()))


def _exit_if_left_running() -> None:
    """At shutdown, before the interpreter joins the threads: end the process with the run's status
    if threads an agent started are still running a grace period on.
    """
    if _status is None or not left_running():
        return
    release_pool_workers()  # an idle pool worker ends now; one whose task never returns does not
    grace = WORKER_GRACE_S if _worker else GRACE_S
    _wait(left_running(), grace)
    left = left_running()
    if not left:
        return
    many = len(left) > 1
    try:
        sys.stderr.write(f"tooleffect{f' ({_worker})' if _worker else ''}: {len(left)} thread{'s' if many else ''} an "
                         f"agent started {'are' if many else 'is'} still running {grace:g} s after the run: "
                         f"{'; '.join(_named(left))}. The process would wait for {'them' if many else 'it'} to end; "
                         f"it ends now, after its exit handlers, with the run's exit status {_status} (start such "
                         "threads with daemon=True, or end them before the agent returns)\n")
        run_exit_handlers()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(_status)


class AgentThreads:
    """The plugin object that arms the check at the end of the outermost run of the process, and
    (on the xdist controller) names the threads workers reported.

    Built at configure time in every run (on the controller and on each xdist worker); cheap: it
    counts the runs that nest and holds the session.

    Args:
        config: pytest's config.
    """

    def __init__(self, config: pytest.Config) -> None:
        global _runs
        self.config = config
        self.session: pytest.Session | None = None
        self.from_workers: list[tuple[str, list[str]]] = []  # (worker id, threads named), on the controller
        with _lock:
            _runs += 1

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """On an xdist worker: hand the non-daemon threads agents left running to the controller."""
        output: Any = getattr(self.config, "workeroutput", None)
        if output is None or not left_running(non_daemon_only=True):
            return
        _wait(left_running(non_daemon_only=True), WORKER_GRACE_S)
        left = left_running(non_daemon_only=True)
        if left:
            output[wire.WORKER_LEFT_THREADS] = _named(left)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """On the xdist controller: keep what a worker said it left running."""
        named = getattr(node, "workeroutput", {}).get(wire.WORKER_LEFT_THREADS)
        if named:
            worker = getattr(node, "workerinput", {}).get(wire.WORKER_ID, "a worker")
            self.from_workers.append((str(worker), [str(x) for x in named]))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for worker, named in sorted(self.from_workers):
            terminalreporter.write_line(f"tooleffect: threads agents started were still running when worker {worker} "
                                        f"finished: {'; '.join(named)}; the worker ended without waiting for them "
                                        "(start such threads with daemon=True, or end them before the agent returns)")

    def close(self) -> None:
        """At unconfigure, the run's last step: the outermost run arms the check when threads an
        agent started are still running, with the run's exit status.
        """
        global _runs, _status, _armed, _worker
        with _lock:
            _runs -= 1
            outermost = _runs == 0
        if not outermost or not left_running():
            return
        status = self.session.exitstatus if self.session is not None else 0
        _status = int(status)
        workerinput = getattr(self.config, "workerinput", None)  # not the environment: a run a worker starts has it
        _worker = str(workerinput.get(wire.WORKER_ID, "worker")) if workerinput is not None else None
        if not _armed:
            _armed = at_thread_shutdown(_exit_if_left_running)
