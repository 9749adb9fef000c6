"""Extension points (``pytest_tooleffect_*``), implemented in a ``conftest.py`` or a plugin.

The record and the report each have a "modify" hook, called once per record (on the process
that scored it) and once per report (on the controller), as pytest-json-report's
``pytest_json_modifyreport`` is.  They are for users, and run last: the plugin's own parts
(the baseline, the shard, the judge, the gates) write theirs before, through internal
protocols (:mod:`pytest_tooleffect.scoring.sections`, :mod:`pytest_tooleffect.report.assembly`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pluggy
import pytest

from pytest_tooleffect.formats import Policy

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
    scored, or an error (provider, agent, sandbox, oracle), after the plugin's own additions
    (``baseline``, ``shard``).  What it adds lands in the record log, pytest-json-report's
    per-test metadata and the controller's report input; the record is read back as a
    :class:`~pytest_tooleffect.scoring.record.Record`, so a field it changes must keep its type.

    Args:
        record: the record as a JSON object (see :class:`pytest_tooleffect.scoring.record.Record`).
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

    Called once, on the controller, after the report is assembled from every record of the run,
    its own sections (``judge``, ``shard``, ``baseline``, ``gates``) included; the report is read
    back as a :class:`~pytest_tooleffect.report.Report`, so a section it changes must keep its type.

    Args:
        report: the report as a JSON object (see :class:`pytest_tooleffect.report.Report`).
        records: every record of the run, in the order they arrived.
        config: pytest's config.

    Example (``conftest.py``)::

        import os

        def pytest_tooleffect_modifyreport(report, records, config):
            report["ci"] = {"run": os.environ.get("GITHUB_RUN_ID"), "records": len(records)}
    """


@hookspec(firstresult=True)
def pytest_tooleffect_agent(policy: Policy, config: pytest.Config) -> Callable[..., Any] | None:
    """Return the agent callable for a policy (the first non-``None`` answer wins).

    Asked once per process for every policy that is not ``replay`` and has no ``model``, before
    the policy's ``agent: "package.module:function"`` is imported: an agent built in a
    ``conftest.py`` (a framework object, a closure over test configuration) needs no import
    path.  A policy with neither ``model`` nor ``agent`` must be answered here.  The callable
    gets a :class:`pytest_tooleffect.decide.agent.AgentState` and returns the decision (any shape
    :func:`pytest_tooleffect.parse_emission` reads, or a
    :class:`pytest_tooleffect.decide.agent.AgentTurn` with usage and cost); ``async def`` agents run
    concurrently on the turn pool.

    Args:
        policy: the policy (``policy.name``, ``policy.agent``, ``policy.settings``).
        config: pytest's config.

    Example (``conftest.py``, with ``policies: [{name: my-agent}]`` in the family file)::

        from mypkg.agent import Agent

        def pytest_tooleffect_agent(policy, config):
            if policy.name == "my-agent":
                agent = Agent(temperature=policy.settings.get("temperature", 0))
                return agent.decide  # decide(state) -> an OpenAI assistant message
            return None
    """
