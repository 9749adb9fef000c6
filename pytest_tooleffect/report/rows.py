"""What the report's counting keeps of one record: a :class:`Row`.

:func:`~.summary.summarise` reads each :class:`~pytest_tooleffect.scoring.record.Record` once and
keeps its row, never the record: a row holds the fields the counting reads (a few hundred bytes),
where a record holds the whole turn (its emitted calls, the matched alternative, the reply's
text, the selection and the fingerprints: several kilobytes, and several dozen objects for the
garbage collector).  The names are the record's, so ``row.verdict.kind`` reads as
``record.verdict.kind`` does; the sections a replayed decision never has (``error``, ``effect``,
``rollout``, ``conversation``, ``sandbox``) are the record's own models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_tooleffect.scoring.outcome import expected_failure
from pytest_tooleffect.scoring.record import (
    ConversationRecord,
    Cost,
    EffectRecord,
    NoToolSeverity,
    Record,
    RecordError,
    RolloutRecord,
    SandboxInfo,
)

__all__ = ["CostRow", "Row", "VerdictRow"]

Number = int | float


@dataclass(frozen=True, slots=True)
class CostRow:
    """A record's ``cost``: tokens, latency (ms) and money (USD); ``None`` is unknown."""

    input_tokens: Number | None
    output_tokens: Number | None
    latency_ms: Number | None
    cost_usd: Number | None

    @classmethod
    def of(cls, cost: Cost) -> CostRow:
        return cls(cost.input_tokens, cost.output_tokens, cost.latency_ms, cost.cost_usd)


@dataclass(frozen=True, slots=True)
class VerdictRow:
    """A record's ``verdict`` as the counting reads it.

    Attributes:
        failed_fields: the ``path`` of each field result that is not ok, in the verdict's order
            (what ``argument_failures`` counts).
    """

    name_ok: bool
    name_args_ok: bool
    kind: str
    unruled: tuple[str, ...]
    failed_fields: tuple[str, ...]
    hallucinated: tuple[str, ...]
    approximate: bool


@dataclass(frozen=True, slots=True)
class Row:
    """One record as :func:`~.summary.summarise` counts it (the fields are the record's, see
    :class:`~pytest_tooleffect.scoring.record.Record`); ``trace_id`` and ``position`` are its
    ``source``'s; ``expected_failure`` is :func:`~pytest_tooleffect.scoring.outcome.expected_failure`
    of the record (pytest counted its decision as XFAIL).
    """

    id: str
    family: str
    policy: str
    case_id: str
    trial: int | None
    outcome: Literal["scored", "error"]
    label_class: Literal["single", "several", "no_tool"]
    bucket: str
    xfail: bool
    label_hash: str
    no_tool_failure: str | None
    no_tool_severity: NoToolSeverity | None
    reply_due: str | None
    cached: bool | None
    recovery: str | None
    cost: CostRow
    verdict: VerdictRow | None
    trace_id: str | None
    position: int | None
    error: RecordError | None
    effect: EffectRecord | None
    rollout: RolloutRecord | None
    conversation: ConversationRecord | None
    sandbox: SandboxInfo | None
    expected_failure: bool

    @classmethod
    def of(cls, r: Record) -> Row:
        """The row of record ``r``."""
        v = r.verdict
        verdict = None if v is None else VerdictRow(
            name_ok=v.name_ok, name_args_ok=v.name_args_ok, kind=v.kind, unruled=tuple(v.unruled),
            failed_fields=tuple(f.path for f in v.fields if not f.ok), hallucinated=tuple(v.hallucinated),
            approximate=v.approximate)
        return cls(id=r.id, family=r.family, policy=r.policy, case_id=r.case_id, trial=r.trial, outcome=r.outcome,
                   label_class=r.label_class, bucket=r.bucket, xfail=r.xfail, label_hash=r.label_hash,
                   no_tool_failure=r.no_tool_failure, no_tool_severity=r.no_tool_severity,
                   reply_due=r.reply_due, cached=r.cached, recovery=r.recovery,
                   cost=CostRow.of(r.cost), verdict=verdict, trace_id=r.source.trace_id, position=r.source.position,
                   error=r.error, effect=r.effect, rollout=r.rollout, conversation=r.conversation, sandbox=r.sandbox,
                   expected_failure=expected_failure(r))
