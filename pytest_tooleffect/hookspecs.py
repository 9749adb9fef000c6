"""Extension points (``pytest_tooleffect_*``), implemented in a ``conftest.py`` or a plugin.

The record and the report each have a "modify" hook, called once per record (on the process
that scored it) and once per report (on the controller), as pytest-json-report's
``pytest_json_modifyreport`` is.
"""

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
                from pytest_tooleffect.oracle import parse_datetime
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

    Called on the process that scored the item (an xdist worker under ``-n``), for every record:
    scored, or an error (provider, agent, sandbox, oracle).  What it adds lands in the record
    log, pytest-json-report's per-test metadata and the controller's report input.

    Args:
        record: the record as a JSON object (see :class:`pytest_tooleffect.records.Record`).
        item: the case item (``item.case``, ``item.family``, ``item.policy``, ``item.trial``).

    Example (``conftest.py``)::

        import os

        def pytest_tooleffect_modify_record(record, item):
            record["git_sha"] = os.environ.get("GITHUB_SHA")
    """


@hookspec
def pytest_tooleffect_modifyreport(report: dict[str, Any], records: list[dict[str, Any]],
                                   config: pytest.Config) -> None:
    """Add to or change the JSON report before it is written and printed (in place).

    Called once, on the controller, after the report is built from every record of the run.
    The plugin's own ``judge`` section is written through this hook.

    Args:
        report: the report as a JSON object (see :class:`pytest_tooleffect.report.Report`).
        records: every record of the run, in the order they arrived.
        config: pytest's config.

    Example (``conftest.py``)::

        import os

        def pytest_tooleffect_modifyreport(report, records, config):
            report["ci"] = {"run": os.environ.get("GITHUB_RUN_ID"), "records": len(records)}
    """
