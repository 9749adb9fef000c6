"""What a comparison may read beyond the two values: the state's time zone, values and messages."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["NO_CONTEXT", "CompareContext", "Predicate"]

#: A user predicate: ``(value, ctx, **parameters) -> bool | (bool, reason)``.
Predicate = Callable[..., Any]


@dataclass(frozen=True)
class CompareContext:
    """What predicates and time parsing may read from the state.

    Attributes:
        timezone: the user's IANA zone; naive times are read in it.
        state: named values of the state (``equals_state`` reads them by dotted key).
        messages: the state's messages (``in_messages`` searches their text).
        predicates: user callables by name (registered through ``pytest_tooleffect_predicates``).
        judge: free-text judge ``(rubric, expected, got) -> (ok, reason)``; ``None`` = fallback.

    """

    timezone: str | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    messages: Sequence[Mapping[str, Any]] = ()
    predicates: Mapping[str, Predicate] = field(default_factory=dict)
    judge: Callable[[str | None, Any, Any], tuple[bool, str]] | None = None


#: The context of a comparison given none: no zone, state, messages, predicates or judge.
NO_CONTEXT = CompareContext()
