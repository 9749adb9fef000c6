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

from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.input_files import open_input, read_input_text
from pytest_tooleffect.util.jsonl import RepeatedKey, json_lines, loads

__all__ = [
    "FORMATS",
    "DecisionPoint",
    "Run",
    "TraceError",
    "decision_points",
    "position_bucket",
    "read_openai_jsonl",
    "read_otel",
    "read_runs",
    "read_tau_bench",
]


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the run or line."""


@dataclass(frozen=True)
class Run:
    """One agent run: its id, its messages (OpenAI chat format) and reader-specific extras.

    A reader that sees each model call directly (OpenTelemetry spans) fills ``points`` with the
    ``(messages, assistant message)`` of every call instead of relying on one message list.
    """

    run_id: str
    messages: list[dict[str, Any]]
    system_prompt: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] | None = None
    points: list[tuple[list[dict[str, Any]], dict[str, Any]]] | None = None


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
    if run.points is not None:
        for step, (messages, answer) in enumerate(run.points):
            convo = [m for m in messages if m.get("role") != "system"]
            yield DecisionPoint(run.run_id, step, len(run.points), convo, answer, len(convo))
        return
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
    require("ijson", "reading τ-bench trajectories")
    import ijson

    with open_input(path) as fh:
        for n, item in enumerate(ijson.items(fh, "item", use_float=True)):
            traj = item.get("traj")
            if not isinstance(traj, list):
                raise ValueError(f"{path}: element {n} has no 'traj' list")
            system = next((m.get("content") for m in traj if m.get("role") == "system"), None)
            run_id = f"task{item.get('task_id')}-trial{item.get('trial')}"
            yield Run(run_id=run_id, messages=traj, system_prompt=system, info=item.get("info") or {})


def read_openai_jsonl(path: str | Path) -> Iterator[Run]:
    """Stream OpenAI chat runs from JSON Lines: each line one run, either a list of messages or
    ``{"messages": [...], "id"?: str, "tools"?: [...]}``; ``tool_calls[].function.arguments`` may
    be a JSON string or an object.  A JSON array of runs (``[{"messages": [...], "tools": ...}, …]``,
    on one line or spread over many: a ``.json`` file) is those runs, in order.

    Raises:
        TraceError: a line that is not JSON or not a run (names the file and line; an array's
            element is named by its index).
    """
    for n, doc, why in json_lines(path):
        if why is not None:
            whole = _whole_array(path) if n == 1 else None
            if whole is None:
                raise TraceError(f"{path}: line {n}: {why}")
            for i, item in enumerate(whole):
                yield _openai_run(path, f"element {i}", item, f"run{i + 1}")
            return
        if _is_runs(doc):
            for i, item in enumerate(doc):
                yield _openai_run(path, f"line {n}: element {i}", item, f"line{n}.{i + 1}")
            continue
        yield _openai_run(path, f"line {n}", doc, f"line{n}")


def _is_runs(doc: Any) -> bool:
    """``doc`` is a JSON array of runs (objects with ``messages``), not one run's list of messages."""
    return isinstance(doc, list) and bool(doc) and all(isinstance(x, dict) and "messages" in x for x in doc)


def _whole_array(path: str | Path) -> list[Any] | None:
    """The file as one JSON array of runs (a pretty-printed ``.json`` file), or ``None`` when it is not one."""
    try:
        doc = loads(read_input_text(path, "utf-8-sig"))
    except (OSError, ValueError, RecursionError):  # the first line's own error is the one to report
        return None
    return doc if _is_runs(doc) else None


def _openai_run(path: str | Path, where: str, doc: Any, default_id: str) -> Run:
    if isinstance(doc, dict):
        messages, run_id, tools = doc.get("messages"), str(doc.get("id", default_id)), doc.get("tools")
    else:
        messages, run_id, tools = doc, default_id, None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TraceError(f"{path}: {where}: a run is a list of messages or {{messages: [...]}}")
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    return Run(run_id=run_id, messages=messages, system_prompt=system, tools=tools)


def _attr_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` (``{"stringValue": ...}``) or a plain value."""
    if isinstance(v, dict) and len(v) == 1:
        (kind, inner), = v.items()
        if kind in ("stringValue", "boolValue", "doubleValue"):
            return inner
        if kind == "intValue":
            return int(inner)
        if kind == "arrayValue":
            return [_attr_value(x) for x in inner.get("values", [])]
    return v


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    attrs = span.get("attributes") or {}
    if isinstance(attrs, list):  # OTLP JSON: [{"key": ..., "value": {...}}]
        return {str(a.get("key")): _attr_value(a.get("value")) for a in attrs if isinstance(a, dict)}
    return dict(attrs)


def _json_attr(attrs: dict[str, Any], key: str) -> Any:
    value = attrs.get(key)
    if isinstance(value, str):
        try:
            return loads(value)
        except RepeatedKey as exc:
            raise TraceError(f"attribute {key}: {exc}") from None
        except ValueError:
            return None
    return value


def _from_semconv(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GenAI semantic-convention messages (``{role, parts: [...]}``) → OpenAI chat messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        texts = [p.get("content") for p in m.get("parts", []) if p.get("type") == "text"]
        calls = [p for p in m.get("parts", []) if p.get("type") == "tool_call"]
        responses = [p for p in m.get("parts", []) if p.get("type") == "tool_call_response"]
        if role == "tool" or responses:
            for r in responses:
                resp = r.get("response")
                out.append({"role": "tool", "tool_call_id": r.get("id"),
                            "content": resp if isinstance(resp, str) else json.dumps(resp)})
            continue
        msg: dict[str, Any] = {"role": role, "content": "\n".join(t for t in texts if t) or None}
        if calls:
            msg["tool_calls"] = [{"id": c.get("id"), "type": "function", "function": {
                "name": c.get("name"),
                "arguments": c.get("arguments") if isinstance(c.get("arguments"), str)
                else json.dumps(c.get("arguments") or {})}} for c in calls]
        out.append(msg)
    return out


def _from_indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenLLMetry's indexed attributes (``gen_ai.prompt.0.role`` …) → OpenAI chat messages."""
    out = []
    i = 0
    while f"{prefix}.{i}.role" in attrs:
        msg: dict[str, Any] = {"role": attrs[f"{prefix}.{i}.role"], "content": attrs.get(f"{prefix}.{i}.content")}
        calls = []
        j = 0
        while f"{prefix}.{i}.tool_calls.{j}.name" in attrs:
            calls.append({"id": attrs.get(f"{prefix}.{i}.tool_calls.{j}.id"), "type": "function", "function": {
                "name": attrs[f"{prefix}.{i}.tool_calls.{j}.name"],
                "arguments": attrs.get(f"{prefix}.{i}.tool_calls.{j}.arguments", "{}")}})
            j += 1
        if calls:
            msg["tool_calls"] = calls
        if attrs.get(f"{prefix}.{i}.tool_call_id"):
            msg["tool_call_id"] = attrs[f"{prefix}.{i}.tool_call_id"]
        out.append(msg)
        i += 1
    return out


def _spans(doc: Any) -> Iterator[dict[str, Any]]:
    if isinstance(doc, dict) and "resourceSpans" in doc:
        for rs in doc["resourceSpans"]:
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
                yield from ss.get("spans", [])
    elif isinstance(doc, dict) and isinstance(doc.get("spans"), list):
        yield from doc["spans"]
    elif isinstance(doc, list):
        for d in doc:
            yield from _spans(d) if isinstance(d, dict) and ("resourceSpans" in d or "spans" in d) else [d]
    elif isinstance(doc, dict):
        yield doc


def read_otel(path: str | Path) -> Iterator[Run]:
    """Read OpenTelemetry GenAI spans exported as JSON (OTLP JSON ``resourceSpans``, a list of
    spans, or JSON Lines of either).

    Every span whose ``gen_ai.operation.name`` is ``chat`` (or ``text_completion`` /
    ``generate_content``) is one decision point; spans are grouped into runs by trace id and
    ordered by start time.  Messages come from ``gen_ai.input.messages`` /
    ``gen_ai.output.messages`` (semantic conventions ≥ 1.37, JSON parts) or from the indexed
    ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes; the system prompt from
    ``gen_ai.system_instructions``; tools from ``gen_ai.tool.definitions``.  Spans of one trace
    can be spread over the file, so a file is read whole (memory grows with the file).

    Raises:
        TraceError: the file is not JSON, or a chat span has no readable messages.
    """
    text = read_input_text(path, "utf-8-sig")
    try:
        docs = [loads(text)]
    except RepeatedKey as exc:
        raise TraceError(f"{path}: {exc}") from None
    except ValueError:
        try:
            docs = [loads(line) for line in text.splitlines() if line.strip()]
        except RepeatedKey as exc:
            raise TraceError(f"{path}: {exc}") from None
        except ValueError as exc:
            raise TraceError(f"{path}: neither JSON nor JSON Lines: {getattr(exc, 'msg', exc)}") from exc
    runs: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for doc in docs:
        for span in _spans(doc):
            attrs = _attributes(span)
            if attrs.get("gen_ai.operation.name") not in ("chat", "text_completion", "generate_content"):
                continue
            trace = span.get("traceId") or (span.get("context") or {}).get("trace_id") or "trace"
            start = span.get("startTimeUnixNano") or span.get("start_time") or 0
            runs.setdefault(str(trace), []).append((int(start) if str(start).isdigit() else 0, {**span,
                                                                                                "_attrs": attrs}))
    for trace, spans in runs.items():
        points = []
        system, tools = None, None
        for _, span in sorted(spans, key=lambda p: p[0]):
            attrs = span["_attrs"]
            inp, outp = _json_attr(attrs, "gen_ai.input.messages"), _json_attr(attrs, "gen_ai.output.messages")
            if isinstance(inp, list) and isinstance(outp, list):
                messages, answers = _from_semconv(inp), _from_semconv(outp)
            else:
                messages, answers = _from_indexed(attrs, "gen_ai.prompt"), _from_indexed(attrs, "gen_ai.completion")
            if not messages or not answers:
                raise TraceError(f"{path}: trace {trace}: span {span.get('spanId') or span.get('name')}: no readable "
                                 "gen_ai input and output messages")
            sys_attr = _json_attr(attrs, "gen_ai.system_instructions")
            if isinstance(sys_attr, list):
                system = "\n".join(p.get("content", "") for p in sys_attr if isinstance(p, dict)) or system
            tools = _json_attr(attrs, "gen_ai.tool.definitions") or tools
            points.append((messages, {**answers[-1], "role": "assistant"}))
        yield Run(run_id=trace, messages=points[-1][0] + [points[-1][1]] if points else [], system_prompt=system,
                  tools=tools if isinstance(tools, list) else None, points=points)


#: Trace formats ``tooleffect sample`` reads.
FORMATS = {"openai": read_openai_jsonl, "tau-bench": read_tau_bench, "otel": read_otel}


def read_runs(path: str | Path, fmt: str = "auto") -> Iterator[Run]:
    """Read runs in ``fmt`` (``openai``, ``tau-bench``, ``otel`` or ``auto``: by content).

    Raises:
        TraceError: unknown format, or a file no reader accepts.
    """
    if fmt == "auto":
        with open_input(path) as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
        if b"resourceSpans" in head or b"gen_ai." in head:
            fmt = "otel"
        elif head.startswith(b"[") and b'"traj"' in head:
            fmt = "tau-bench"
        else:
            fmt = "openai"
    if fmt not in FORMATS:
        raise TraceError(f"{path}: unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    return FORMATS[fmt](path)


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
