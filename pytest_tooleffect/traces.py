"""Trace readers: agent runs in, decision points out.

A *decision point* is every moment the agent loop asked the model for its next action,
including the final one where it stopped.  Each run of ``n`` assistant turns yields ``n``
decision points; point ``k`` holds the messages before the ``k``-th assistant turn and that
turn as the ``recorded`` action.

Readers stream: a τ-bench file (one large JSON array) is parsed incrementally with ``ijson``,
so memory holds one run at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DecisionPoint", "Run", "decision_points", "position_bucket", "read_tau_bench"]


@dataclass(frozen=True)
class Run:
    """One agent run: its id, its messages (OpenAI chat format) and reader-specific extras."""

    run_id: str
    messages: list[dict[str, Any]]
    system_prompt: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DecisionPoint:
    """The state before one assistant turn, and that turn.

    Attributes:
        run_id: the run's id.
        step: 0-based index of this decision among the run's assistant turns.
        run_length: number of assistant turns (decisions) in the run.
        messages: the messages before the turn, without the system prompt.
        recorded: the assistant turn itself (``tool_calls`` / ``content``).
        position: index of the assistant message in the run's full message list.

    """

    run_id: str
    step: int
    run_length: int
    messages: list[dict[str, Any]]
    recorded: dict[str, Any]
    position: int


def position_bucket(step: int, run_length: int, buckets: int | None = None) -> str:
    """Name the position bucket of a decision.

    Args:
        step: 0-based decision index.
        run_length: number of decisions in the run (≥ 1).
        buckets: ``None`` for ``first`` / ``middle`` / ``last``; an int ``N`` for quantile
            buckets ``q1``..``qN`` by relative position ``step / run_length``.

    Returns:
        The bucket name.  A run of one decision is ``last`` (its only decision is the stop).

    """
    if buckets is None:
        if step == run_length - 1:
            return "last"
        if step == 0:
            return "first"
        return "middle"
    if buckets < 1:
        raise ValueError("buckets must be ≥ 1")
    return f"q{min(buckets, step * buckets // run_length + 1)}"


def decision_points(run: Run) -> Iterator[DecisionPoint]:
    """Yield every decision point of a run, the final stop included."""
    convo = [m for m in run.messages if m.get("role") != "system"]
    turns = [i for i, m in enumerate(convo) if m.get("role") == "assistant"]
    for step, i in enumerate(turns):
        yield DecisionPoint(
            run_id=run.run_id,
            step=step,
            run_length=len(turns),
            messages=convo[:i],
            recorded=convo[i],
            position=i,
        )


def read_tau_bench(path: str | Path) -> Iterator[Run]:
    """Stream τ-bench historical trajectories (one JSON array of ``{task_id, trial, traj, info}``).

    Raises:
        ValueError: an element without ``traj`` (names the file and the element index).

    """
    import ijson

    with open(path, "rb") as fh:
        for n, item in enumerate(ijson.items(fh, "item", use_float=True)):
            traj = item.get("traj")
            if not isinstance(traj, list):
                raise ValueError(f"{path}: element {n} has no 'traj' list")
            system = next((m.get("content") for m in traj if m.get("role") == "system"), None)
            run_id = f"task{item.get('task_id')}-trial{item.get('trial')}"
            yield Run(run_id=run_id, messages=traj, system_prompt=system, info=item.get("info") or {})


def recorded_from_message(message: dict[str, Any]) -> dict[str, Any]:
    """Turn an OpenAI assistant message into the ``recorded`` shape of a case."""
    calls = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function", tc)
        calls.append({"name": fn.get("name"), "arguments": fn.get("arguments"), "id": tc.get("id")})
    out: dict[str, Any] = {"tool_calls": calls}
    if message.get("content") is not None:
        out["text"] = message["content"]
    return out


def dumps_line(obj: Any) -> str:
    """Compact, key-sorted JSON for one JSONL line."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
