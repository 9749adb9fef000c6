"""Stratified sampling of decision points by position bucket.

Drawing a fixed quota from each position bucket (instead of a uniform sample) puts enough
final "stop" decisions into the set to compute a rate on, at the price of making the class
proportions a property of the quota rather than of production; the sampler therefore
returns the population count per bucket beside the sample, and the family records both.

Per bucket the sampler keeps a reservoir (Vitter's Algorithm R, "Random sampling with a
reservoir", ACM TOMS 11(1), 1985) so memory is bounded by the quota, not the input.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["SAMPLE", "StratifiedSample", "sample_cases", "stratified_sample", "trace_tool"]

T = TypeVar("T")

#: the command that samples a family, as its family file names it (``written_by``)
SAMPLE = "tooleffect sample"


@dataclass(frozen=True)
class StratifiedSample(Generic[T]):
    """The drawn items per bucket, the quota asked for, and how many items each bucket held."""

    items: dict[str, list[T]]
    quota: dict[str, int]
    population: dict[str, int]


def stratified_sample(
    items: Iterable[tuple[str, T]], quota: Mapping[str, int], seed: int = 0
) -> StratifiedSample[T]:
    """Draw up to ``quota[b]`` items uniformly from each bucket ``b``, in one streaming pass.

    Args:
        items: ``(bucket, item)`` pairs, in a stable order (the draw depends on it).
        quota: items wanted per bucket; buckets absent from the quota are counted, not drawn.
        seed: seed of the pseudo-random generator (same input + seed → same sample).

    Returns:
        The sample; within a bucket items keep their input order.

    """
    rng = random.Random(seed)
    reservoirs: dict[str, list[tuple[int, T]]] = {b: [] for b in quota}
    population: dict[str, int] = {}
    for bucket, item in items:
        seen = population.get(bucket, 0)
        population[bucket] = seen + 1
        k = quota.get(bucket, 0)
        if k <= 0:
            continue
        res = reservoirs[bucket]
        if len(res) < k:
            res.append((seen, item))
        else:
            j = rng.randrange(seen + 1)
            if j < k:
                res[j] = (seen, item)
    drawn = {b: [it for _, it in sorted(r, key=lambda p: p[0])] for b, r in reservoirs.items()}
    return StratifiedSample(items=drawn, quota=dict(quota), population=population)


def _case_id(run_id: str, step: int) -> str:
    import re

    base = re.sub(r"[^A-Za-z0-9_.:-]+", "-", run_id).strip("-") or "run"
    if not base[0].isalnum():
        base = "r" + base
    return f"{base}-s{step:02d}"


def trace_tool(raw: Any) -> Any:
    """A tool as a trace declares it, in the family's form: the OpenAI wrapper unwrapped and a
    BFCL-dialect schema (``dict``, ``float``, ``tuple``, ``any`` types) mapped to JSON Schema as
    ``tooleffect import bfcl`` maps it (:func:`~pytest_tooleffect.data.importers.bfcl.convert_schema`).

    Args:
        raw: a tool from a trace: ``{"type": "function", "function": {...}}``, the flat
            Responses-API form, or ``{name, description, parameters}``.

    Returns:
        The tool, unchanged when it is not a mapping or its schema is JSON Schema already.
    """
    from collections.abc import Mapping as _Mapping

    from pytest_tooleffect.data.importers.bfcl import bfcl_tool

    if not isinstance(raw, _Mapping):
        return raw
    spec = dict(raw)
    if spec.get("type") == "function":
        inner = spec.get("function")
        spec = dict(inner) if isinstance(inner, _Mapping) else {k: v for k, v in spec.items()
                                                                   if k not in ("type", "strict")}
    if "name" in spec and _bfcl_dialect(spec.get("parameters")):
        extra = {k: v for k, v in spec.items() if k not in ("name", "description", "parameters")}
        return {**bfcl_tool(spec), **extra}
    return spec


_BFCL_TYPES = frozenset({"dict", "float", "tuple", "any"})


def _bfcl_dialect(schema: Any) -> bool:
    """The schema uses a type name of BFCL's dialect (JSON Schema has none of them)."""
    if isinstance(schema, list):
        return any(_bfcl_dialect(s) for s in schema)
    if not isinstance(schema, Mapping):
        return False
    if schema.get("type") in _BFCL_TYPES:
        return True
    props = schema.get("properties")
    nested = list(props.values()) if isinstance(props, Mapping) else []
    return any(_bfcl_dialect(s) for s in [*nested, schema.get("items")])


def sample_cases(
    paths: Iterable[str], quota: Mapping[str, int], fmt: str = "auto", buckets: int | None = None, seed: int = 0
) -> tuple[list[dict[str, Any]], StratifiedSample[Any], dict[str, Any]]:
    """Sample decision points from trace files into unlabelled case dicts.

    Each run's own tools are kept (:func:`trace_tool` form): when every sampled run offered the
    same tools they become the family's (``hints["tools"]``); when runs differ, each case carries
    its run's ``tools`` and the family gets none, so no state is scored against tools it was not
    offered.

    Args:
        paths: trace files, read in order (each streamed where its format allows).
        quota: decision points wanted per position bucket.
        fmt: ``auto``, ``openai``, ``tau-bench`` or ``otel`` (see :func:`~pytest_tooleffect.collect.traces.read_runs`).
        buckets: ``None`` for first / middle / last, else ``N`` quantile buckets ``q1``..``qN``.
        seed: sampling seed.

    Returns:
        ``(cases sorted by id, the sample with quota and population, family hints)``; the hints
        hold the first system prompt seen, the tools shared by every sampled run (``None`` when
        runs differ) and ``per_case_tools`` (``True`` when the cases carry their own).
    """
    from pytest_tooleffect.collect.traces import decision_points, position_bucket, read_runs, recorded_from_message

    hints: dict[str, Any] = {"system_prompt": None, "tools": None, "per_case_tools": False}

    def keyed() -> Any:
        for path in paths:
            for run in read_runs(path, fmt):
                if hints["system_prompt"] is None and run.system_prompt:
                    hints["system_prompt"] = run.system_prompt
                tools = [trace_tool(t) for t in run.tools] if run.tools else None
                for dp in decision_points(run):
                    yield position_bucket(dp.step, dp.run_length, buckets), (str(path), dp, tools)

    sample = stratified_sample(keyed(), quota, seed=seed)
    cases = []
    tool_sets: dict[str, Any] = {}
    for bucket, drawn in sample.items.items():
        for path, dp, tools in drawn:
            tool_sets.setdefault(json.dumps(tools, sort_keys=True), tools)
            cases.append({
                "id": _case_id(dp.run_id, dp.step),
                "placement": {"step": dp.step, "run_length": dp.run_length, "bucket": bucket},
                "messages": dp.messages,
                "recorded": recorded_from_message(dp.recorded),
                "source": {"kind": "trace", "dataset": path.rsplit("/", 1)[-1], "trace_id": dp.run_id,
                           "position": dp.position},
                "_tools": tools,
            })
    if len(tool_sets) == 1:
        hints["tools"] = next(iter(tool_sets.values()))
    elif tool_sets:
        hints["per_case_tools"] = True
    for c in cases:
        tools = c.pop("_tools")
        if hints["per_case_tools"] and tools is not None:
            c["tools"] = tools
    cases.sort(key=lambda c: c["id"])
    return cases, sample, hints
