r"""Every use of a private name of pytest, of a library or of the standard library, in one module.

The rest of the package uses public API only: ``grep -rn "_pytest\.\|\._[a-z]" pytest_tooleffect``
finds private names in this module alone (``tests/test_compat.py`` runs that grep).  Each section
says what the private name buys, measured, and the versions it was checked on; a release that
changes one of them breaks here, and ``make test-pytest-versions`` runs ``tests/test_compat.py``
with the oldest and the newest supported pytest.  Figures "at 10,000 decisions" are CPU seconds
(user + system) of ``pytest cases -q`` on ``bench/replay_scale.py``'s half-failing project of
10,000 replayed τ-airline decisions, the least of the runs, on a shared 2-core machine (load 5 to
9), with and without the private use.  Checked on pytest 8.0.2 and 9.2.0 (pytest-xdist 3.8.0,
testcontainers 4.15.0, docker 7.2.0, litellm 1.110.2, CPython 3.11).

What the grep also finds outside this module, and is no private name of anyone else's
(:data:`PUBLIC_LOOKALIKES`): ``os._exit`` and ``posix._exit`` (the standard library's public way
to end a child without clean-up, despite its underscore); ``label._oracle`` and ``Label._oracle`` (the
package's own pydantic private attribute, ``oracle/verdict.py``: pydantic requires the
underscore); ``verdict._replace`` (``typing.NamedTuple``'s documented public copy-with method,
named with an underscore so as not to clash with a field).  Every other hit is ``self._name`` or
``cls._name`` for an attribute the package's own class defines in the same module.

PhaseReports — pytest's own bookkeeping kept linear in the run's size (pytest 8.0–9.2).

pytest's terminal reporter keeps every passing setup and teardown report (``stats[""]``) only to
print a test's teardown output beside its failure, and looks them up by scanning the whole list
once per failure (``TerminalReporter._get_teardown_reports``): with thousands of failing
decisions the failure summary alone costs failures × items (25,000 × 100,000 comparisons for
50,000 decisions half failing, minutes after the report is written).  :class:`PhaseReports`
takes each passing setup or teardown report that has no teardown output back out of that list
as it arrives: pytest prints nothing else from it, so pytest's output is unchanged, and the scan per
failure is over the reports that have output only.  At 10,000 decisions: 95.2 s without it, 10.8 s
with it (8.8×).

OneLineFailure — ``Node._repr_failure_py`` (pytest 8.0–9.2): a failure raised with
``pytrace=False`` is its message, without pytest walking and filtering the traceback.  pytest
formats a setup or teardown failure through this method directly (``TestReport.from_item_and_call``),
so the public ``repr_failure`` would leave the setup errors (provider, agent, sandbox) on the slow
path and their text different.  At 10,000 decisions: 14.7 s without it, 10.8 s with it (+36 %).

read_back_node_id — ``Node._id`` (pytest 9.2; absent before, where nothing is done): the structured
node id ``--lf``, ``--ff`` and ``--sw`` compare, set to the one pytest parses back from the item's
own string.  Without it those options lose every case item (pytest issue #15045); pytest has no
public way to give a ``Function`` its id (``nodeid=`` is not among ``Function``'s arguments).  A
correctness fix, not a speed-up: no figure.

redact_captured — ``Item._report_sections`` (pytest 8.0–9.2): the output captured during an item's
phases, from which pytest makes each report's sections and which pytest-json-report (1.5) reads
itself, not the report.  Rewritten with the known secrets cut out before the phase's report is made,
an agent that prints its key or its settings (``state.policy``) shows them cut out in the terminal,
JUnit and pytest-json-report alike.  A correctness fix (a secret in the JSON report otherwise), no
figure.

fixture_info — ``Function._fixtureinfo`` (pytest 8.0–9.2): the fixture closure pytest computes when
a ``Function`` is built, read from a case file's first item and handed to its siblings through
``Function``'s public ``fixtureinfo`` argument.  Every item of a case file has the same parent and the
same function (its marks are added after construction, where pytest no longer reads them for
fixtures), so the closure is the same; without it pytest computes it once per item.  At 10,000
decisions, under cProfile with the machine loaded (load about 6): building the items took 0.74 s
without it and 0.41 s with it; unloaded, the per-item closure was 0.45 s of the run's 9.7 s of CPU
(about 5 %).

fixture_request — ``Function._request`` (pytest 8.0–9.2): the item's own fixture request, through
which the sandbox fixture is requested in setup, for the cases that have a world only.  pytest
hands a ``FixtureRequest`` to fixtures alone; asking for ``request`` in the item's function would
put it in every item's fixture closure (``--setup-plan``, ``--fixtures-per-test`` would show it).
No figure: the alternative changes output, not speed.

unit_scheduler — pytest-xdist's ``LoadGroupScheduling`` internals (``_split_scope``,
``_reschedule``, ``_assign_work_unit``, ``_pending_of``; checked on pytest-xdist 3.8.0): a live run under
``-n W`` hands each worker whole chunks, so a worker keeps its concurrency in flight instead of
xdist ``load``'s two items.  ``bench/throughput.py`` (README, "Throughput"): 1,000 live cases at
``-n 2`` with a 2 s model, 64 requests in flight and 67.3 s wall with it, 4 in flight and 537.9 s
without (8×).  xdist's scheduler protocol has no public way to name a work unit or to refill a worker.

exec_socket — ``socket.SocketIO._sock`` (CPython 3.11, docker 7.2.0): docker's
``exec_start(socket=True)`` hands a unix or TCP connection wrapped in a ``SocketIO``, which has no
timeout and no half-close; the sandbox's channel needs both (a per-read timeout, ``shutdown`` to end
the relay's stdin).  No figure: without it the channel cannot time out.

litellm_response_cost — litellm's ``_hidden_params["response_cost"]`` (litellm 1.110; documented
by litellm, underscore and all): the cost litellm already computed for an answer, instead of
``litellm.completion_cost`` pricing the response a second time per decision.

snapshot_logger_registry — logging's registry of loggers, safe to walk while a background import
adds to it (CPython 3.11): a correctness fix (an INTERNALERROR otherwise), no figure.

at_thread_shutdown, run_exit_handlers, joined_at_exit, release_pool_workers —
``threading._register_atexit``, ``atexit._run_exitfuncs`` and ``concurrent.futures.thread``'s
``_threads_queues``, ``_shutdown`` and ``_global_shutdown_lock`` (CPython 3.9–3.13; checked on
3.11): a callback run when the interpreter starts to shut down, before it waits for the non-daemon
threads; the ``atexit`` handlers run from there; the executor worker threads ``concurrent.futures``
joins at exit (daemon or not), and the first half of its own exit hook (tell idle workers to end)
so that an idle worker is told from one whose task never returns.  An agent that leaves such a thread running
(``daemon=False``, an executor's task that never returns) would keep the process alive after the
report is written; the callback names the thread and ends the process with the run's exit status,
after the exit handlers (coverage's data, logging's flush) ran.  ``atexit`` handlers run only after
the threads are joined, too late; ``concurrent.futures`` joins its workers through the same private
hook.  A correctness fix (a run that never ends otherwise), no figure.
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

__all__ = ["PUBLIC_LOOKALIKES", "OneLineFailure", "PhaseReports", "at_thread_shutdown", "exec_socket",
           "fixture_info", "fixture_request", "joined_at_exit", "litellm_response_cost", "read_back_node_id",
           "redact_captured", "release_pool_workers", "run_exit_handlers",
           "snapshot_logger_registry", "unit_scheduler"]

#: What ``grep -rn "_pytest\.\|\._[a-z]"`` finds outside this module that is no private name of
#: pytest's or a library's (the module's docstring says why each is not).
PUBLIC_LOOKALIKES = ("os._exit", "posix._exit", "label._oracle", "Label._oracle", "verdict._replace")

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


class OneLineFailure:
    """Mixin for a pytest item (before ``pytest.Item`` in its bases): a failure raised with
    ``pytrace=False`` and a message is reported as :meth:`failure_line` of that message, in every
    phase, without pytest walking the traceback (see the module's docstring).
    """

    def failure_line(self, message: str) -> str:
        """The text pytest prints for a ``pytrace=False`` failure with ``message`` (the message itself)."""
        return message

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        exc = excinfo.value
        if isinstance(exc, pytest.fail.Exception) and not exc.pytrace and exc.msg:
            return self.failure_line(exc.msg)
        return super()._repr_failure_py(excinfo, style)  # type: ignore[misc]


def redact_captured(item: pytest.Item, redact: Callable[[str], str]) -> None:
    """Pass the output captured so far during ``item``'s phases through ``redact`` (what pytest and
    pytest-json-report make of it), before the phase's report is made.

    Args:
        item: the item whose phase just ran.
        redact: the text without its secrets.
    """
    sections = getattr(item, "_report_sections", None)
    if sections:
        item._report_sections = [(when, key, redact(content)) for when, key, content in sections]


def read_back_node_id(item: pytest.Item) -> None:
    """Give ``item`` the structured node id its node id string is read back as (pytest ≥ 9.2).

    pytest 9.2 keys ``--lf``, ``--ff`` and ``--sw`` by structured ids that it parses back from the
    strings in its cache: ``file::name[params]`` becomes the name before ``[`` and the params in it.
    A custom item's own id keeps the whole name (``a-read[replay]``) and no params, so the two
    never compared equal and those options lost every case item (pytest issue #15045).  The id
    parsed from the item's own string is the one the cache finds again.  Before pytest 9.2 node ids
    are plain strings and nothing changes.  ``item.nodeid`` is the same string either way.

    Args:
        item: a collected item, right after its construction.
    """
    structured = getattr(item, "_id", None)
    parse = getattr(type(structured), "parse", None)
    if parse is not None:
        item._id = parse(str(structured))


def fixture_info(item: pytest.Function) -> Any:
    """The fixture closure pytest computed for ``item`` at construction, to pass as ``fixtureinfo`` to
    items of the same parent and function.

    Args:
        item: a ``pytest.Function`` item, constructed.

    Returns:
        pytest's ``FuncFixtureInfo`` of the item.
    """
    return item._fixtureinfo


def fixture_request(item: pytest.Function) -> pytest.FixtureRequest:
    """The item's own fixture request (``getfixturevalue`` on it sets a fixture up for the item).

    Args:
        item: a ``pytest.Function`` item (its request exists from construction on).

    Returns:
        The request pytest fills the item's fixtures through.
    """
    request: pytest.FixtureRequest = item._request
    return request


def unit_scheduler(config: pytest.Config, log: Any,
                   units: Callable[[Sequence[str], int], Mapping[str, str]]) -> Any:
    """pytest-xdist's ``LoadGroupScheduling``, scheduling each item with the work unit ``units`` names.

    Each work unit goes to one worker whole.  Two changes to xdist's own: a crashed worker's item
    is not run again (as under xdist's ``--dist load``), and a worker is handed units while it has
    fewer than two items to run, and its shutdown once the queue is empty.  Imports pytest-xdist
    (call it from ``pytest_xdist_make_scheduler`` only).

    Args:
        config: pytest's config (the controller's).
        log: xdist's scheduler log, as ``pytest_xdist_make_scheduler`` receives it.
        units: the collection (node ids in order) and the number of workers → the work unit of each
            node id; a node id it leaves out keeps xdist's own unit (its ``@group``, else itself).

    Returns:
        The scheduler (an ``xdist.scheduler.LoadGroupScheduling``).
    """
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class UnitScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """Schedules whole work units (see :func:`unit_scheduler`)."""

        _units: Mapping[str, str] | None = None

        def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
            super().add_node_collection(node, collection)
            if self._units is None:
                self._units = units(collection, self.numnodes)

        def remove_node(self, node: Any) -> str | None:
            """xdist's, except that the crashed item is not run again (as under its ``--dist
            load``): ``loadscope`` puts the dead worker's unit back with the crashed item in it.
            """
            workload = self.assigned_work.get(node, {})
            crashed = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done), None)
            if crashed is None:
                return super().remove_node(node)  # type: ignore[no-any-return]
            self.assigned_work.pop(node)
            workload[self._split_scope(crashed)][crashed] = True
            self.workqueue.update((scope, unit) for scope, unit in workload.items() if not all(unit.values()))
            for other in self.assigned_work:
                self._reschedule(other)
            return str(crashed)

        def _reschedule(self, node: Any) -> None:
            """xdist's, then more units while the node has fewer than two items to run, and the
            shutdown once the queue is empty.  A worker runs an item only when the next one or the
            shutdown has come, and the unit a crashed worker left may hold one unfinished item: a
            replacement handed it alone, with more units queued, waited forever (as did the run).
            """
            super()._reschedule(node)
            while self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work.get(node, {})) < 2:
                self._assign_work_unit(node)
            if not self.workqueue and not node.shutting_down:
                node.shutdown()

        def _split_scope(self, nodeid: str) -> str:
            return (self._units or {}).get(nodeid) or str(super()._split_scope(nodeid))

    return UnitScheduling(config, log)


def exec_socket(handle: Any) -> Any:
    """The socket of a docker exec's attached stream (``exec_start(..., socket=True)``).

    Args:
        handle: what docker's ``exec_start`` returned: a ``socket.SocketIO`` over a unix or TCP
            connection, or (TLS, SSH) the socket itself.

    Returns:
        The socket under a ``SocketIO``, else ``handle`` itself: something with ``settimeout``,
        ``sendall``, ``recv``, ``shutdown`` and ``close``.
    """
    return getattr(handle, "_sock", handle) if isinstance(handle, socket.SocketIO) else handle


def litellm_response_cost(response: Any) -> float | None:
    """The cost in US dollars litellm computed for ``response`` when it made it, or ``None``.

    Args:
        response: litellm's response to a request.

    Returns:
        ``_hidden_params["response_cost"]`` when it is a number, else ``None`` (price it otherwise).
    """
    hidden = getattr(response, "_hidden_params", None)
    priced = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    if isinstance(priced, int | float) and not isinstance(priced, bool):
        return float(priced)
    return None


def at_thread_shutdown(callback: Callable[[], None]) -> bool:
    """Call ``callback`` when the interpreter shuts down, before it joins the non-daemon threads
    (callbacks registered later run first).

    Returns:
        Whether it was registered (``False`` on a Python without the hook, or during shutdown).
    """
    import concurrent.futures.thread  # noqa: F401  # its own exit hook registered first, so this one runs before it

    register = getattr(threading, "_register_atexit", None)
    if register is None:
        return False
    try:
        register(callback)
    except RuntimeError:  # "can't register atexit after shutdown"
        return False
    return True


def run_exit_handlers() -> None:
    """Run the ``atexit`` handlers now (each once: the interpreter will not run them again)."""
    run = getattr(atexit, "_run_exitfuncs", None)
    if run is not None:
        run()


def joined_at_exit(thread: threading.Thread) -> bool:
    """Whether the interpreter will wait for ``thread`` at exit: a non-daemon thread, or a worker of
    a ``concurrent.futures`` thread pool (joined at exit whatever its daemon flag).
    """
    if not thread.daemon:
        return True
    import concurrent.futures.thread as pools

    return thread in getattr(pools, "_threads_queues", {})


def release_pool_workers() -> None:
    """Tell every idle ``concurrent.futures`` thread pool worker to end, as the pools' own exit hook
    does first (a worker ends once the tasks queued before it are done; one whose task never returns
    does not).
    """
    import concurrent.futures.thread as pools

    lock = getattr(pools, "_global_shutdown_lock", None)
    queues = getattr(pools, "_threads_queues", None)
    if lock is None or queues is None:
        return
    with lock:
        pools._shutdown = True
    for _, queue in list(queues.items()):
        queue.put(None)
