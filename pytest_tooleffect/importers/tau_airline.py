"""Build the ``tau-airline`` family from τ-bench's historical GPT-4o airline trajectories.

Source: ``sierra-research/tau-bench`` ``historical_trajectories/gpt-4o-airline.json`` and the
environment's tool schemas (``airline_tools.json``), MIT License, Copyright (c) 2024 Sierra.

Every assistant turn is a decision point (the final one included); a stratified sample by
position bucket becomes the family's cases, each with ``recorded`` = what GPT-4o did there.
Labels come from :mod:`pytest_tooleffect.importers.tau_airline_rules` (a rule labeller that
never looks at ``recorded``) and an independent manual pass, adjudicated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..sampling import StratifiedSample, stratified_sample
from ..traces import DecisionPoint, Run, decision_points, position_bucket, read_tau_bench, recorded_from_message

__all__ = ["READ_ONLY", "WRITE_TOOLS", "annotate_tools", "render_state", "sample_states"]

DEFAULT_QUOTA = {"first": 60, "middle": 90, "last": 60}

#: Tools that change nothing (MCP ``readOnlyHint``); ``think`` and ``calculate`` only compute.
READ_ONLY = frozenset(
    {"get_user_details", "get_reservation_details", "search_direct_flight", "search_onestop_flight",
     "list_all_airports", "calculate", "think"}
)
#: Tools that change the booking database (the policy asks for explicit confirmation first).
WRITE_TOOLS = frozenset(
    {"book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
     "update_reservation_flights", "update_reservation_passengers"}
)
_DESTRUCTIVE = frozenset({"cancel_reservation", "update_reservation_flights", "update_reservation_passengers"})


def annotate_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add MCP annotations to τ-bench's OpenAI-form tool specs (which carry none)."""
    out = []
    for spec in specs:
        fn = spec.get("function", spec)
        name = fn["name"]
        ann = {
            "readOnlyHint": name in READ_ONLY,
            "destructiveHint": name in _DESTRUCTIVE,
            "idempotentHint": name in READ_ONLY,
            "openWorldHint": name == "transfer_to_human_agents",
        }
        out.append({"name": name, "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {}), "annotations": ann})
    return out


def _keyed_points(path: Path) -> Iterator[tuple[str, tuple[Run, DecisionPoint]]]:
    for run in read_tau_bench(path):
        for dp in decision_points(run):
            yield position_bucket(dp.step, dp.run_length), (run, dp)


def case_id(run: Run, dp: DecisionPoint) -> str:
    """``tNN-rT-sSS``: task, trial, step."""
    task = run.run_id.split("-")[0].removeprefix("task")
    trial = run.run_id.split("trial")[-1]
    return f"t{int(task):02d}-r{trial}-s{dp.step:02d}"


def sample_states(
    trajectories: Path, quota: dict[str, int] | None = None, seed: int = 20241122
) -> tuple[list[dict[str, Any]], StratifiedSample[tuple[Run, DecisionPoint]]]:
    """Sample decision points stratified by position bucket and build unlabelled case dicts.

    Returns:
        ``(cases, sample)``: case dicts (``label`` absent) sorted by id, and the raw sample with
        the quota and the population count per bucket.
    """
    sample = stratified_sample(_keyed_points(trajectories), quota or DEFAULT_QUOTA, seed=seed)
    cases = []
    for bucket, drawn in sample.items.items():
        for run, dp in drawn:
            cases.append({
                "id": case_id(run, dp),
                "placement": {"step": dp.step, "run_length": dp.run_length, "bucket": bucket},
                "messages": dp.messages,
                "recorded": recorded_from_message(dp.recorded),
                "source": {"kind": "trace", "dataset": "tau-bench/gpt-4o-airline",
                           "trace_id": run.run_id, "position": dp.position},
                "_gold": run.info.get("task", {}).get("actions", []),
            })
    cases.sort(key=lambda c: c["id"])
    return cases, sample


def render_state(case: dict[str, Any], gold: list[dict[str, Any]] | None = None, width: int = 2500) -> str:
    """Render a state readably for a human labeller (never shows ``recorded`` or a label)."""
    p = case["placement"]
    lines = [f"## STATE {case['id']}  (decision {p['step'] + 1} of {p['run_length']}, bucket {p['bucket']})"]
    if gold is not None:
        lines.append("Task's gold actions (reference for arguments; the task's end result):")
        for a in gold:
            lines.append(f"  - {a['name']} {json.dumps(a.get('kwargs', {}), sort_keys=True)}")
    lines.append("--- conversation so far (system policy omitted) ---")
    for m in case["messages"]:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            if m.get("content"):
                lines.append(f"[assistant] {m['content']}")
            for tc in m["tool_calls"]:
                fn = tc.get("function", tc)
                lines.append(f"[assistant → CALL] {fn['name']} {fn.get('arguments')}")
        elif role == "tool":
            body = str(m.get("content"))
            if len(body) > width:
                body = body[:width] + " …(truncated)"
            lines.append(f"[tool result: {m.get('name')}] {body}")
        else:
            lines.append(f"[{role}] {m.get('content')}")
    lines.append("--- what should the agent do next? ---")
    return "\n".join(lines)
