"""Per-sample records and the JSONL record log.

A record is one JSON object per scored sample (or provider error)::

    {"version": 1, "id": "tau-airline/t00-r1-s10[replay]", "family", "case_id", "policy",
     "outcome": "scored" | "error", "class", "bucket", "step", "run_length", "xfail",
     "label_hash", "verdict": {...} | null, "no_tool_failure": str | null,
     "cost": {"input_tokens", "output_tokens", "latency_ms", "cost_usd"},   # null = unknown
     "error": {"type", "message"} | null, "source": {...}}

The log is appended and flushed line by line as records complete, so a crash loses nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from .cases import label_hash
from .models import Case, ToolSpec
from .oracle import Verdict

__all__ = ["RECORD_VERSION", "RecordLog", "build_record", "no_tool_failure"]

RECORD_VERSION = 1
UNKNOWN_COST: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None}


def no_tool_failure(case: Case, verdict: Verdict, tools: Mapping[str, ToolSpec]) -> str | None:
    """Sort a failed decision of the no-tool class (DESIGN.md scoring rule 5).

    Returns:
        ``forbidden``; ``redundant_read`` when every called tool declares ``readOnlyHint``;
        ``unwanted_write`` when any called tool does not; ``other`` for the rest (malformed
        calls); ``None`` when the case is not in the no-tool class or the decision passed.

    """
    if case.label is None or case.label.label_class != "no_tool" or verdict.tool_ok:
        return None
    if verdict.kind == "forbidden":
        return "forbidden"
    if verdict.kind == "tool_when_none_needed":
        called = [e["tool"] for e in verdict.emitted if e.get("tool")]
        if called and all(n in tools and tools[n].read_only for n in called):
            return "redundant_read"
        return "unwanted_write"
    return "other"


def record_id(family: str, case_id: str, policy: str, trial: int = 1, repeats: int = 1) -> str:
    """``family/case-id[policy]``, or ``family/case-id[policy:trial]`` when the run repeats cases."""
    return f"{family}/{case_id}[{policy}]" if repeats == 1 else f"{family}/{case_id}[{policy}:{trial}]"


def build_record(
    family: str,
    case: Case,
    policy: str,
    verdict: Verdict | None,
    tools: Mapping[str, ToolSpec],
    cost: Mapping[str, Any] | None = None,
    error: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    repeats: int = 1,
) -> dict[str, Any]:
    """Build one record (see module docstring)."""
    assert case.label is not None
    trial = (extra or {}).get("trial", 1)
    rec: dict[str, Any] = {
        "version": RECORD_VERSION,
        "id": record_id(family, case.id, policy, trial, repeats),
        "family": family,
        "case_id": case.id,
        "policy": policy,
        "outcome": "scored" if verdict is not None else "error",
        "class": case.label.label_class,
        "bucket": case.placement.bucket,
        "step": case.placement.step,
        "run_length": case.placement.run_length,
        "xfail": bool(case.xfail),
        "label_hash": label_hash(case.label),
        "verdict": verdict.to_dict() if verdict is not None else None,
        "no_tool_failure": no_tool_failure(case, verdict, tools) if verdict is not None else None,
        "cost": {**UNKNOWN_COST, **(cost or {})},
        "error": dict(error) if error else None,
        "source": case.source.model_dump(exclude_none=True),
    }
    if extra:
        rec.update(extra)
    # records cross process boundaries (xdist) and land in JSON files: keep them JSON values only
    safe: dict[str, Any] = json.loads(json.dumps(rec, default=str))
    return safe


class RecordLog:
    """Append-only JSONL log; each record is written and flushed as it completes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it to the operating system."""
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        self._fh.close()


def read_records(path: Path) -> list[dict[str, Any]]:
    """Read a record log back (for ``tooleffect report``).

    Raises:
        ValueError: a line that is not JSON (names the line).
    """
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {n} is not JSON ({exc.msg}); a torn last line means the run was cut") from exc
    return out
