"""An agent that calls ``os._exit`` during its turn: its error, not the end of the run.

An agent runs in pytest's own process (in the item's thread, a thread of its own, or the turn
pool's event loop), and ``os._exit`` ends a process at once: no ``finally``, no exit handler, no
report, and the status the agent chose (``os._exit(0)``: a CI job that passes with nothing judged).
Nothing can catch it once it runs, so while an agent's turn runs (:func:`agent_turn`)
``os._exit`` is replaced by a guard that, called from that turn (its thread, or its task on the
event loop) in pytest's process, raises :class:`AgentCalledExit` instead: the item becomes an error
naming the call, and the run goes on.  Anything else calls the real ``os._exit``: a child the
agent forked (another process), a thread the agent started (it does not carry the turn), and
every caller outside a turn.

What is not caught: ``os._exit`` from a thread the agent started, a function saved before the
guard was set (``from os import _exit`` at import), ``os.abort()``, a signal the agent sends its
own process, or a C extension's ``exit()``.  Such a run ends without its report and without
the records of the items that had not finished; ``tooleffect report`` over its log says
``incomplete`` (each record says how many items the run selected), never ``complete``.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["AgentCalledExit", "agent_turn"]

#: the agent whose turn the current thread or task runs (``None`` outside a turn)
_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar("tooleffect_agent_turn", default=None)
_lock = threading.Lock()
_real_exit: Any = None
_pid: int | None = None


class AgentCalledExit(BaseException):  # noqa: N818 - the name says what the agent did, as SystemExit does
    """An agent called ``os._exit(status)`` during its turn (raised in its place).

    A ``BaseException``, as ``SystemExit`` is: an agent's ``except Exception`` does not swallow it.
    """

    def __init__(self, status: Any, agent: str) -> None:
        super().__init__(f"the agent {agent} called os._exit({status!r}), which would end pytest at once with "
                         "nothing reported (its status the exit status); an agent returns its decision or raises")
        self.status = status


def _guarded_exit(status: Any) -> NoReturn:
    agent = _turn.get()
    if agent is not None and os.getpid() == _pid:
        raise AgentCalledExit(status, agent)
    _real_exit(status)
    raise AssertionError("os._exit returned")  # pragma: no cover


def _install() -> None:
    """Set the guard in place of ``os._exit`` (once per process)."""
    global _real_exit, _pid
    with _lock:
        if os._exit is _guarded_exit:
            return
        _real_exit, _pid = os._exit, os.getpid()
        os._exit = _guarded_exit


@contextmanager
def agent_turn(agent: str) -> Iterator[None]:
    """Run an agent's turn in this block: ``os._exit`` called from it (this thread, or a task made
    in it) raises :class:`AgentCalledExit`.

    Args:
        agent: the agent as messages name it (``module.function``).
    """
    _install()
    token = _turn.set(agent)
    try:
        yield
    finally:
        _turn.reset(token)
