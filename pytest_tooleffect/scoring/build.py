"""The one place a record is made: :func:`build_record` turns an item's verdict (or its error) into
a typed :class:`~pytest_tooleffect.scoring.record.Record`, with the verdict's texts redacted and
bounded (:func:`verdict_fields`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from pytest_tooleffect.collect.cases import label_hash
from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.formats import Case, ToolSpec
from pytest_tooleffect.oracle import Verdict
from pytest_tooleffect.scoring.no_tool import no_tool_failure, reply_due
from pytest_tooleffect.scoring.record import (
    MALFORMED_RAW_LIMIT,
    RECORD_VERSION,
    REPLY_TEXT_LIMIT,
    UNKNOWN_COST,
    Record,
    first_problem,
)
from pytest_tooleffect.util.bounds import bounded
from pytest_tooleffect.util.redaction import redact

__all__ = ["build_record", "verdict_fields"]


#: turns any value into JSON values (used to check a record before it is validated)
_JSON_VALUES: TypeAdapter[Any] = TypeAdapter(Any)


def build_record(
    *,
    family: str,
    case: Case,
    policy: str,
    tools: Mapping[str, ToolSpec],
    repeats: int = 1,
    verdict: Verdict | None = None,
    error: Mapping[str, Any] | None = None,
    cost: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    label_digest: str | None = None,
) -> Record:
    """Make one item's record: scored (give ``verdict``) or an error (give ``error``).

    Args:
        family: the family's name.
        case: the case (labelled).
        policy: the policy's name.
        tools: the tools offered, by name.
        repeats: trials per case in the run (the id carries the trial when it is above 1).
        verdict: the oracle's verdict, for a scored record.
        error: ``{type, message}`` (and ``traceback`` for an agent's exception), for an error record.
        cost: ``input_tokens``, ``output_tokens``, ``latency_ms`` (ms), ``cost_usd`` (USD); a key
            left out is unknown (``null``).
        extra: the record's further fields (:class:`Record` from ``model`` on): ``model`` and
            ``trial`` (the id's trial, default 1), the turn's, the judge's, the sandbox's.  Keys
            not left out are written, in field order.
        label_digest: :func:`~pytest_tooleffect.collect.cases.label_hash` of the case's label when the
            caller has it already (computed once per case at collection); else computed here.

    Returns:
        The record; :meth:`Record.to_json` is its JSON object (keys not given left out).

    Raises:
        ValueError: the case has no label; both or neither of ``verdict`` and ``error`` given;
            a field of the wrong type.
    """
    if case.label is None:
        raise ValueError(f"case {case.id} has no label: an unlabelled case has no record")
    if (verdict is None) == (error is None):
        raise ValueError("a record is either scored (verdict) or an error (error): give exactly one")
    extra = extra or {}
    raw: dict[str, Any] = {
        "version": RECORD_VERSION,
        "id": record_id(family, case.id, policy, extra.get("trial", 1), repeats),
        "family": family,
        "case_id": case.id,
        "policy": policy,
        "outcome": "scored" if verdict is not None else "error",
        "class": case.label.label_class,
        "bucket": case.placement.bucket,
        "step": case.placement.step,
        "run_length": case.placement.run_length,
        "xfail": bool(case.xfail),
        "label_hash": label_digest or label_hash(case.label),
        "verdict": verdict_fields(verdict) if verdict is not None else None,
        "no_tool_failure": no_tool_failure(case, verdict, tools, _effect_failed(extra)) if verdict is not None
        else None,
        "cost": {**UNKNOWN_COST, **(cost or {})},
        "error": dict(error) if error else None,
        "source": case.source.model_dump(exclude_none=True),
        **extra,
    }
    due = reply_due(case)
    if due is not None:
        raw["reply_due"] = due
    if isinstance(raw.get("steps"), list):  # the sandboxed steps' texts, bounded as the decision's is
        raw["steps"] = [{**s, "text": _reply_text(s["text"])}
                        if isinstance(s, Mapping) and isinstance(s.get("text"), str) else s for s in raw["steps"]]
    # records cross process boundaries (xdist) and land in JSON files: JSON values only (a value
    # JSON has no form for is written as its str(), as json.dumps(default=str) would)
    try:
        record = Record.model_validate(_JSON_VALUES.dump_python(raw, mode="json", fallback=str))
    except ValidationError as exc:
        raise ValueError(f"record {raw['id']}: {first_problem(exc)}") from exc
    return record


def verdict_fields(verdict: Verdict) -> dict[str, Any]:
    """The record's ``verdict``: the oracle's (:meth:`Verdict.to_dict`) with the turn's text and the
    malformed calls' raw text, each redacted and bounded (:data:`REPLY_TEXT_LIMIT`,
    :data:`MALFORMED_RAW_LIMIT`).

    Args:
        verdict: the oracle's verdict (its emission holds the text).

    Returns:
        The verdict as a record's JSON object holds it.
    """
    out = verdict.to_dict()
    emission = verdict.emission
    out["reply_text"] = None if emission.text is None else _reply_text(emission.text)
    raws = list(emission.malformed_raw[:len(emission.malformed)])
    raws += [""] * (len(emission.malformed) - len(raws))  # an emission made without them
    kept, left = [], REPLY_TEXT_LIMIT
    for raw in raws:
        clean = redact(raw)
        limit = min(MALFORMED_RAW_LIMIT, left)
        kept.append(bounded(clean, limit))
        left -= min(len(clean), limit)
    out["malformed_raw"] = kept
    return out


def _reply_text(text: str) -> str:
    """A turn's text as a record keeps it: known secrets redacted, then cut at :data:`REPLY_TEXT_LIMIT`."""
    return bounded(redact(text), REPLY_TEXT_LIMIT)


def _effect_failed(extra: Mapping[str, Any]) -> bool:
    """The record's effect verdict (a world case) failed."""
    effect = extra.get("effect")
    return isinstance(effect, Mapping) and effect.get("passed") is False
