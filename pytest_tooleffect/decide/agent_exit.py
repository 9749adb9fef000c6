"""An agent that ends or replaces pytest's process during its turn: its error, not the end of the run.

An agent runs in pytest's own process (in the item's thread, a thread of its own, or the turn
pool's event loop).  ``os._exit`` ends that process at once (no ``finally``, no exit handler, no
report, and the status the agent chose: ``os._exit(0)`` is a CI job that passes with nothing
judged); ``os.exec*`` replaces it with another program (``os.execv("/bin/true", ["true"])``: the
same, status 0); ``os.abort`` kills it with ``SIGABRT``.  Nothing can catch these once they run,
so while at least one agent's turn runs (:func:`agent_turn`) these names are replaced, in both
``os`` and ``posix`` (``os._exit``, ``os.abort``, ``os.execl``, ``os.execle``, ``os.execlp``,
``os.execlpe``, ``os.execv``, ``os.execve``, ``os.execvp``, ``os.execvpe``, ``posix._exit``,
``posix.abort``, ``posix.execv``, ``posix.execve``), by guards that, called from that turn (its
thread, or its task on the event loop) in pytest's process, raise :class:`AgentCalledExit`
instead: the item becomes an error naming the call, and the run goes on.  Anything else calls the
real function: a child the agent forked (another process: its ``_exit`` or ``exec`` is its own),
a thread the agent started (it does not carry the turn), and every caller outside a turn.  When
the last running turn ends the real functions are put back.

What is not caught: any of these called from a thread the agent started; a function bound
before the turn began (``from os import _exit`` or ``execv`` at import, a default argument
``f=os._exit``: the name is looked up in ``os``/``posix`` only at the call); a C extension's
``exit()``, ``_exit()``, ``abort()`` or ``exec*`` (a C call does not go through these modules);
a signal the agent sends its own process (``os.kill(os.getpid(), SIGKILL)``); a crash
(segmentation fault).  Such a run ends without its report and without the records of the items
that had not finished; ``tooleffect report`` over its log says ``incomplete`` (each record says
how many items the run selected), never ``complete``.
"""

from __future__ import annotations

import contextvars
import os
import posix
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

__all__ = ["GUARDED", "AgentCalledExit", "agent_turn"]

#: the names guarded during a turn, per module
GUARDED: dict[str, tuple[str, ...]] = {
    "os": ("_exit", "abort", "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe"),
    "posix": ("_exit", "abort", "execv", "execve"),
}
_MODULES = {"os": os, "posix": posix}

#: the agent whose turn the current thread or task runs (``None`` outside a turn)
_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar("tooleffect_agent_turn", default=None)
_lock = threading.Lock()
_running = 0  # turns running now, in any thread or task
_real: dict[tuple[str, str], Any] = {}  # (module, name) -> the function a guard stands in for
_guards: dict[tuple[str, str], Any] = {}
_pid: int | None = None


class AgentCalledExit(BaseException):  # noqa: N818 - the name says what the agent did, as SystemExit does
    """An agent called ``os._exit``, ``os.abort`` or an ``os.exec*`` function during its turn (raised
    in its place).

    A ``BaseException``, as ``SystemExit`` is: an agent's ``except Exception`` does not swallow it.

    Attributes:
        call: the function called, ``"os._exit"``, ``"posix.execv"``, ...
        args: its positional arguments.
        status: the exit status for ``_exit`` (its first argument), else ``None``.
    """

    def __init__(self, status: Any, agent: str, call: str = "os._exit", args: tuple[Any, ...] | None = None) -> None:
        self.call = call
        self.args_called = (status,) if args is None else args
        self.status = status
        shown = ", ".join(_short(a) for a in self.args_called)
        if call.rpartition(".")[2] == "_exit":
            effect = "end pytest at once with nothing reported (its status the exit status)"
        elif call.endswith(".abort"):
            effect = "kill pytest at once with SIGABRT and nothing reported"
        else:
            effect = "replace pytest's process with another program at once, nothing reported"
        super().__init__(f"the agent {agent} called {call}({shown}), which would {effect}; "
                         "an agent returns its decision or raises")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _guard(module: str, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> NoReturn:
        agent = _turn.get()
        if agent is not None and os.getpid() == _pid:
            status = args[0] if name == "_exit" and args else kwargs.get("status")
            raise AgentCalledExit(status if name == "_exit" else None, agent, f"{module}.{name}", args)
        real(*args, **kwargs)
        raise AssertionError(f"{module}.{name} returned")  # pragma: no cover

    guarded.__name__ = guarded.__qualname__ = name
    guarded.__doc__ = f"{module}.{name}, guarded during an agent's turn (pytest_tooleffect.decide.agent_exit)"
    return guarded


def _install() -> None:
    """Set the guards in place of the real functions (on the first turn that runs)."""
    global _running, _pid
    with _lock:
        _running += 1
        if _running > 1:
            return
        _pid = os.getpid()
        for module, names in GUARDED.items():
            for name in names:
                real = getattr(_MODULES[module], name, None)
                if real is None:
                    continue
                guard = _guard(module, name, real)
                _real[(module, name)], _guards[(module, name)] = real, guard
                setattr(_MODULES[module], name, guard)


def _restore() -> None:
    """Put the real functions back when the last running turn ends.

    A name something else has set since is left as it is.
    """
    global _running
    with _lock:
        _running -= 1
        if _running > 0:
            return
        for (module, name), real in _real.items():
            if getattr(_MODULES[module], name, None) is _guards[(module, name)]:
                setattr(_MODULES[module], name, real)
        _real.clear()
        _guards.clear()


@contextmanager
def agent_turn(agent: str) -> Iterator[None]:
    """Run an agent's turn in this block: ``os._exit``, ``os.abort`` or an ``os.exec*`` function
    (or its ``posix`` twin) called from it (this thread, or a task made in it) raises
    :class:`AgentCalledExit`; the real functions are back once no turn runs.

    Args:
        agent: the agent as messages name it (``module.function``).
    """
    _install()
    token = _turn.set(agent)
    try:
        yield
    finally:
        _turn.reset(token)
        _restore()
