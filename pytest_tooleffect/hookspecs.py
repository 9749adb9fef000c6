"""Extension points (``pytest_tooleffect_*``), implemented in a ``conftest.py`` or a plugin."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pluggy
import pytest

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_tooleffect_predicates() -> Mapping[str, Callable[..., Any]] | None:
    """Contribute constraint predicates that oracle rules call by name (``callable: NAME``).

    A predicate receives the emitted value, the comparison context
    (:class:`pytest_tooleffect.oracle.CompareContext`) and the rule's parameters, and returns a
    bool or ``(bool, reason)``.  Results of all implementations are merged.

    Example (``conftest.py``)::

        def pytest_tooleffect_predicates():
            def business_hours(value, ctx, start=9, end=18):
                from zoneinfo import ZoneInfo
                from pytest_tooleffect.oracle.compare import parse_datetime
                t = parse_datetime(value, ctx.timezone).astimezone(ZoneInfo(ctx.timezone))
                return start <= t.hour < end, f"{value} is outside {start}:00-{end}:00"
            return {"business_hours": business_hours}

    and in ``oracle/<family>.yaml``::

        fields:
          calendar.create_event.start:
            predicates: [{callable: {name: business_hours, start: 9, end: 18}}]
    """


@hookspec
def pytest_tooleffect_modify_record(record: dict[str, Any], item: pytest.Item) -> None:
    """Add to or change a record before it is attached to the test report (in place).

    Example (``conftest.py``)::

        def pytest_tooleffect_modify_record(record, item):
            record["git_sha"] = os.environ.get("GITHUB_SHA")
    """
