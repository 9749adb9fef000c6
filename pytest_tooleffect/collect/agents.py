"""An agent policy's callable found at collection: ``package.module:function`` imported, or why not.

The decision stage (:mod:`pytest_tooleffect.decide.agent`) calls what this module found.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["Agent", "AgentError", "load_agent"]

#: An agent: ``decide(state) -> decision``, or ``async def decide(state) -> decision``
#: (``state``: a :class:`~pytest_tooleffect.decide.agent.AgentState`).
Agent = Callable[[Any], Any]


class AgentError(Exception):
    """The agent raised, or returned nothing the oracle can read.

    Attributes:
        kind: the exception's type name (``AgentReturnedNothing`` when it returned ``None``).
        message: one line.
        traceback: the formatted traceback (the agent's frames), or ``None``.
    """

    def __init__(self, kind: str, message: str, tb: str | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.traceback = tb


def load_agent(spec: str) -> Agent:
    """Import ``package.module:function`` (a dotted attribute path after the colon is allowed).

    Raises:
        AgentError: the spec is not ``module:attribute``, the import fails, or the attribute is
            missing or not callable (``kind`` ``AgentNotFound``).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AgentError("AgentNotFound", f"{spec!r} is not 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a module calling sys.exit on import too: this policy's error, not the run's
        raise AgentError("AgentNotFound", f"{spec}: cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentError("AgentNotFound", f"{spec}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AgentError("AgentNotFound", f"{spec}: {attr} is not callable")
    return obj  # type: ignore[no-any-return]
