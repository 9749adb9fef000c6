"""This repository's harness wiring: hook implementations for the shipped families.

No plugin logic lives here; a user's own harness puts the same kind of code in its conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_tooleffect import CompareContext, parse_datetime


def working_hours(value: Any, ctx: CompareContext, start: int = 8, end: int = 20) -> tuple[bool, str]:
    """Scheduling rule: a meeting starts inside the user's working day, in the user's zone."""
    try:
        t = parse_datetime(value, ctx.timezone)
    except ValueError as exc:
        return False, str(exc)
    if t.tzinfo is not None and ctx.timezone:
        from zoneinfo import ZoneInfo

        t = t.astimezone(ZoneInfo(ctx.timezone))
    return start <= t.hour < end, f"{t:%H:%M} is outside the working day ({start}:00-{end}:00 local)"


def pytest_tooleffect_predicates() -> dict[str, Callable[..., Any]]:
    """Predicates the rules in oracle/ call by name."""
    return {"working_hours": working_hours}
