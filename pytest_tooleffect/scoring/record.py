"""Per-sample records: the typed :class:`Record` (made in one place, :mod:`.build`).

A record is one JSON object per item (one case × policy × trial): a scored decision, or an error
that is not the agent's decision (provider, agent, sandbox, oracle).  Its keys, in order, are the
fields of :class:`Record`; the optional ones (the live turn's, the judge's, the sandbox's) are
present only when the run produced them, and keys a ``pytest_tooleffect_modify_record`` hook adds
are kept.  :func:`~pytest_tooleffect.scoring.build.build_record` is the one place a record is
made; a record stays a :class:`Record` until it is written (the record log, the xdist wire,
pytest-json-report's metadata), where :meth:`Record.to_json` makes its JSON object.
:func:`record_schema` is its JSON Schema (``tooleffect schema record``).  The log they are
written to and read back from is :mod:`.record_log`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_tooleffect.options import MAX_SHARDS
from pytest_tooleffect.oracle.kinds import Kind, verdict_problem
from pytest_tooleffect.sandbox.mcp_hints import AnnotationViolation
from pytest_tooleffect.scoring.no_tool import record_problem
from pytest_tooleffect.util.bounds import bounded_cost
from pytest_tooleffect.util.exceptions import first_problem

__all__ = [
    "MALFORMED_RAW_LIMIT", "RECORD_VERSION", "REPLY_TEXT_LIMIT", "AdaptiveDesignRecord", "BaselineMark",
    "FingerprintRecord", "PerturbationRecord", "PolicyIdentity", "NoToolSeverity", "Record", "SelectionRecord",
    "ShardRecord", "VerdictRecord", "first_problem", "record_schema",
]

RECORD_VERSION = 1
#: Characters of a turn's text a record keeps (``verdict.reply_text``), after its known secrets are
#: redacted; a longer text keeps its first 4,000 and says `` … (12,345 characters, cut)``.  A reply
#: a person reads is a few hundred characters, so it is kept whole; a runaway turn (a model that
#: repeats itself up to its token limit) keeps about a page, enough to see what went wrong, and
#: adds no more than that to its record (the record log and the HTML page carry every record).
REPLY_TEXT_LIMIT = 4_000
#: Characters a record keeps of each malformed call attempt's raw text (``verdict.malformed_raw``),
#: after redaction; together the attempts keep at most :data:`REPLY_TEXT_LIMIT` (an attempt past
#: that keeps only the note of its cut).  A call's arguments rarely run past a few hundred.
MALFORMED_RAW_LIMIT = 1_000
UNKNOWN_COST: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None}

Number = int | float  # JSON numbers keep their type: an int is not written back as a float


class _Part(BaseModel):
    """Base of the record's models: JSON values, keys in declared order, unknown keys kept."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, ser_json_inf_nan="constants",
                              validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)


class Cost(_Part):
    """What one decision (or one rollout step) spent; ``None`` is unknown, never zero."""

    input_tokens: Number | None = None
    """Prompt tokens, as the provider counted them."""
    output_tokens: Number | None = None
    """Completion tokens, as the provider counted them."""
    latency_ms: Number | None = None
    """Wall time of the model call (or the agent's turn) in milliseconds, rate-limit waits excluded."""
    cost_usd: Annotated[Number | None, AfterValidator(bounded_cost)] = None
    """Money in US dollars, from 0 to :data:`~pytest_tooleffect.util.bounds.MAX_COST_USD` (a log holding
    more is not read: no sum of costs may overflow)."""
    priced_by: str | None = None
    """Where the price came from (a live model turn only)."""


class RecordError(_Part):
    """Why an item was not scored: a failure that is not the agent's decision."""

    type: str
    """The failure's kind: ``Timeout``, ``RateLimit``, ``SandboxError``, ``OracleError``, …"""
    message: str
    """One line, at most a few hundred characters."""
    traceback: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The formatted traceback of an agent's exception (absent otherwise)."""
    stderr: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The tail of a failed MCP server's standard error, at most 2,000 characters (absent otherwise)."""


class FieldRecord(_Part):
    """The oracle's result for one argument field of the matched call."""

    path: str
    """``tool.field`` path, array items as ``[i]``, a group of fields as ``a+b``."""
    ok: bool
    """The emitted value is acceptable."""
    rule: str | None = None
    """What judged it: ``rule:<key>``, ``default:<type>``, ``schema:<type>`` or ``raw``."""
    reason: str | None = None
    """Why it failed (absent when it passed)."""
    expected: Any = None
    """The label's value (``null`` when the label leaves it to predicates)."""
    got: Any = None
    """The emitted value."""
    approximate: bool | None = None
    """Present (``true``) when a free-text field was judged by the deterministic fallback."""


class ReplyRecord(_Part):
    """A no-tool reply against what its label says it must do (``oracle.reply.ReplyCheck``)."""

    ok: bool
    """Every check passed."""
    reply: Literal["ask", "refuse", "answer"] | None
    """The reply kind the label asked for."""
    kind_ok: bool | None
    """The reply did what ``reply`` asked (``null`` when the label asked no kind)."""
    failures: list[str]
    """One line per failed check."""
    approximate: bool
    """Judged by the deterministic fallback (no judge configured)."""
    low_precision: bool = False
    """The reply kind was judged by the fallback, whose measured precision for that kind is under
    ``oracle.reply.USEFUL_PRECISION`` (the report counts these apart; absent from older records)."""


class PhantomRecord(_Part):
    """A claim of the turn's text that the conversation does not hold (``oracle.claims.Phantom``)."""

    kind: Literal["action", "result"]
    """``action``: something was done; ``result``: something was looked up or returned."""
    claim: str
    """The sentence that makes the claim, as the turn wrote it."""
    verb: str
    """The claimed action (``cancel``, ``book``, …), ``done``, ``read`` or ``value``."""
    tools: list[str]
    """The write tools an action claim is tied to."""
    why: str
    """What was (not) called or changed: ``no call to cancel_reservation in the conversation``, …"""


class VerdictRecord(_Part):
    """The oracle's verdict on the emitted turn (``Verdict.to_dict``)."""

    name_ok: bool
    """The tool names (or the abstention) are acceptable: the report's ``name`` level."""
    name_args_ok: bool
    """Names and arguments are acceptable: the report's ``name_args`` level."""
    kind: Kind
    """``ok``, ``ok_no_tool``, ``wrong_tool``, ``tool_when_none_needed``, ``none_when_tool_needed``,
    ``forbidden``, ``right_tool_wrong_args``, ``malformed_call``, ``wrong_reply`` or ``phantom_action``;
    consistent with the verdict's other fields (:func:`.oracle.kinds.verdict_problem`)."""
    matched: dict[str, Any] | None = None
    """The valid alternative the turn was matched to (label form), or ``null``."""
    fields: list[FieldRecord] = Field(default_factory=list)
    """Per-field results against the matched alternative."""
    unruled: list[str] = Field(default_factory=list)
    """``tool.field`` paths compared raw because no rule covers them."""
    approximate: bool = False
    """A free-text field was judged by the deterministic fallback."""
    emitted: list[dict[str, Any]] = Field(default_factory=list)
    """The emitted actions, normalised: ``{tool, args}`` each (``tool`` ``null`` for no call)."""
    forbidden: dict[str, Any] | None = None
    """The forbidden entry that was hit, or ``null``."""
    malformed: list[str] = Field(default_factory=list)
    """Why call attempts could not be parsed."""
    malformed_raw: list[str] = Field(default_factory=list)
    """What each malformed call attempt was read from, as the policy gave it: one string per entry
    of ``malformed``, in its order.  A call in the tool-call channel: its arguments as sent (a
    string as it is, anything else as JSON; ``""`` when the turn was scored from an emission that
    did not keep them).  A call (or an invented tool result) written into the text channel: the
    text from where it starts to where the next attempt starts, or the text ends.  Known secrets
    redacted, then each cut after :data:`MALFORMED_RAW_LIMIT` characters and all of them after
    :data:`REPLY_TEXT_LIMIT`, the cut said (`` … (12,345 characters, cut)``, the length in
    characters of the whole).  Absent from records written before it existed."""
    hallucinated: list[str] = Field(default_factory=list)
    """Names of called tools that were not offered at the state (a hallucinated tool), in emitted order."""
    reply: ReplyRecord | None = None
    """The reply's check against the null action's ``reply``, ``must`` and ``must_not``, when it has them."""
    phantom: PhantomRecord | None = None
    """The turn's claim that the conversation does not hold, whatever the kind; ``null`` (or absent) when none."""
    reply_text: str | None = None
    """What the policy wrote in the turn's text channel, whatever it called: its reply to the user
    (what ``reply`` judged), the text beside its calls, or the text a call was written into (the
    call's own part is in ``malformed_raw``).  Several text parts are joined by newlines.  Known
    secrets redacted, then cut after :data:`REPLY_TEXT_LIMIT` characters, the cut said (`` …
    (12,345 characters, cut)``, the length in characters of the whole); ``null`` when the turn
    held no text.  Absent from records written before it existed."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        """Read logs written before the rename: ``tool_ok`` is ``name_ok``, ``args_ok`` is ``name_args_ok``."""
        if isinstance(data, Mapping) and ("tool_ok" in data or "args_ok" in data):
            renamed = {"tool_ok": "name_ok", "args_ok": "name_args_ok"}
            return {renamed.get(k, k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> VerdictRecord:
        why = verdict_problem(self.kind, self.name_ok, self.name_args_ok, forbidden=self.forbidden,
                              emitted=self.emitted, malformed=self.malformed, hallucinated=self.hallucinated,
                              matched=self.matched,
                              reply_ok=None if self.reply is None else self.reply.ok, phantom=self.phantom is not None)
        if why is not None:
            raise ValueError(why)
        return self


class SourceRecord(_Part):
    """Where the case came from (the case's ``source``, unset values left out)."""

    kind: str
    """``trace``, ``authored``, ``generated`` or ``import``."""
    dataset: str | None = None
    """The dataset a trace or import came from."""
    trace_id: str | None = None
    """The trace the state was sampled from."""
    position: int | None = None
    """The state's position in that trace."""
    note: str | None = None
    """A free note."""


class AgentInfo(_Part):
    """An agent policy's turn: the callable, and what the agent told (its ``AgentTurn.extra``)."""

    callable: str
    """``package.module:function``, or ``pytest_tooleffect_agent`` for a conftest hook."""


class JudgeSpend(_Part):
    """What the LLM judge spent on this decision's free-text fields (apart from the agent's cost)."""

    model: str
    """The judge's litellm model name."""
    calls: int | None = None
    """Judge calls made."""
    cached: int | None = None
    """Judge answers taken from its cache."""
    input_tokens: Number | None = None
    """Judge prompt tokens."""
    output_tokens: Number | None = None
    """Judge completion tokens."""
    cost_usd: Number | None = None
    """Judge money in US dollars (``null``: unknown price, or a call with no usage)."""
    tokens_unknown: int | None = None
    """Judge calls whose provider reported no usage (their tokens not in the counts above)."""
    input_tokens_unknown: int | None = None
    """Judge calls whose provider reported no prompt token count (no usage included; not in ``input_tokens``)."""
    output_tokens_unknown: int | None = None
    """Judge calls whose provider reported no completion token count (no usage included; not in ``output_tokens``)."""


class EffectRecord(_Part):
    """The effect verdict: the sandbox's end state against the case's expected and forbidden effects."""

    passed: bool
    """The end state meets the effects."""
    kind: str
    """``ok``, ``forbidden_effect``, ``unexpected_change`` or ``effect_missing``."""
    failures: list[str] = Field(default_factory=list)
    """One line per failed effect."""
    diff: dict[str, Any] = Field(default_factory=dict)
    """Rows inserted, deleted and updated per table that changed."""


class SandboxInfo(_Part):
    """The sandbox the decision ran in."""

    provider: str
    """The sandbox provider (``docker``, ``local``)."""
    id: str
    """The sandbox's id (12 characters)."""
    run: str | None = None
    """The run id the sandbox is labelled with."""
    worker: str | None = None
    """The xdist worker id, or ``main``."""
    restrictions: list[str] = Field(default_factory=list)
    """Isolation measures in force, sorted."""
    restrictions_missing: list[str] = Field(default_factory=list)
    """Isolation measures the provider could not apply, sorted."""


class StepRecord(_Part):
    """One step run in the sandbox: the calls executed and what came back."""

    step: int
    """1 for the decision under test, 2… for a rollout's own steps."""
    calls: list[dict[str, Any]] = Field(default_factory=list)
    """``{name, arguments, content, error, executed, fault, latency_ms}`` per call (``latency_ms`` in ms)."""
    text: str | None = None
    """The turn's text, redacted and cut as ``verdict.reply_text`` is (:data:`REPLY_TEXT_LIMIT`)."""
    cost: Cost = Field(default_factory=Cost)
    """The step's tokens, latency (ms) and money (empty for a replayed step)."""


class RolloutRecord(_Part):
    """How the rollout went."""

    steps: int
    """Steps taken."""
    stopped: str
    """Why it stopped: ``no_tool``, ``max_steps`` or ``replay``."""
    limit: int
    """The step limit (``--tooleffect-rollout``)."""
    self_steered: bool
    """More than one step ran (the agent steered itself after the decision under test)."""
    cost: Cost = Field(default_factory=Cost)
    """Tokens, latency (ms) and money summed over the steps (``null`` when any step's is unknown)."""


class ConversationRecord(_Part):
    """A conversation played through by a live policy, judged turn by turn against the reference's
    world and results (:func:`pytest_tooleffect.oracle.conversation.judge_conversation`).
    """

    passed: bool
    """Every turn played passed."""
    kind: Literal["ok", "step_limit", "no_call_when_needed", "call_at_no_tool_turn", "state_mismatch",
                  "response_mismatch"]
    """``ok`` or the first failure's kind."""
    turn: int | None = None
    """The 0-based turn that failed first (``null`` when it passed)."""
    message: str = ""
    """One line saying what failed."""
    turns_ok: int
    """Turns passed before the first failure."""
    turns: int
    """The conversation's user turns."""


class ShardRecord(_Part):
    """The shard a record was made in (``--tooleffect-shard I/N``)."""

    index: int
    """The shard, 1…``count``."""
    count: int = Field(ge=1, le=MAX_SHARDS)
    """How many shards the run was split into: 1…``MAX_SHARDS``, the bound ``--tooleffect-shard`` has."""
    family_fingerprint: str | None = None
    """The label-set fingerprint of every case of the family the shard collected (16 hex digits)."""

    @model_validator(mode="after")
    def _index_in_count(self) -> ShardRecord:
        if not 1 <= self.index <= self.count:
            raise ValueError(f"index {self.index} is not a shard of {self.count} (1…{self.count})")
        return self


class SelectionRecord(_Part):
    """What the run that made the record selected: the same on every record of one run (of one shard).

    A case item is keyed by its record id (an invalid case's item by its node id); the digest is
    SHA-256 (16 hex digits) over the sorted keys, one per line.  ``tooleffect report`` reads it to
    know whether the logs it merges are parts of one run and hold a record of every item selected.
    """

    collected: int = Field(ge=0)
    """The case items collected, before any was deselected."""
    count: int = Field(ge=0)
    """The case items this run selected: those collected less the deselected (``-k``, ``-m``,
    ``--lf``, another shard's)."""
    digest: str
    """The digest of their keys."""
    run_count: int = Field(ge=0)
    """The case items of the whole run: ``count`` for an unsharded run; for a shard, every shard's
    together (the selection before the shard took its part)."""
    run_digest: str
    """The digest of those: the same in every shard of one run."""


class AdaptiveDesignRecord(_Part):
    """The adaptive repeats' design of the run that made the record (``--tooleffect-repeats adaptive``,
    ``[tool.tooleffect.repeats]``; ``docs/repeats.md``): what ``tooleffect report`` needs to rebuild each
    case's step from the records and to count the trials a case did not need as settled, not missing.
    """

    alpha: float = Field(gt=0, lt=1)
    """The chance, at most, that a case called stable is in fact flaky by more than ``tolerance``."""
    tolerance: float = Field(gt=0, le=0.5)
    """ε: the flakiness (the less common verdict's share) a case called stable may still have."""
    max_trials: int = Field(ge=2)
    """The most trials a case gets; each case was collected ``min(k*, max_trials)`` times."""


class PolicyIdentity(_Part):
    """What the record's policy is beyond its name (:func:`~pytest_tooleffect.formats.policy_identity`)."""

    spec: str
    """``agent pkg.mod:decide``, ``model NAME at API_BASE`` (no password) or ``replay``."""
    digest: str
    """SHA-256 (16 hex digits) of the spec and the policy's parameters (secrets and timeout left out)."""


class FingerprintRecord(_Part):
    """What the record's family was scored under, as collected (before any item was deselected)."""

    labels: str
    """The label-set fingerprint of every case of the family collected (16 hex digits; the report's
    ``label_set_fingerprint`` formula)."""
    rules: str
    """SHA-256 (16 hex digits) of the family's oracle rules file (as parsed) and its tools' names,
    parameter schemas and annotations: what the oracle reads besides the labels."""


class BaselineMark(_Part):
    """What the baseline says of the decision (``--tooleffect-baseline``)."""

    status: Literal["new", "not_compared", "label_changed", "passing", "regression", "fixed", "known", "changed"]
    """``regression`` (passed in the baseline, fails now), ``fixed``, ``known`` (failed in both, the
    same way), ``changed`` (failed in both, with another kind now), ``passing`` (passed in both),
    ``new`` (not in the baseline), ``label_changed`` or ``not_compared`` (an error on either side)."""
    before: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """For ``changed``: the baseline's verdict in words (its kind, e.g. ``wrong_reply``); absent otherwise."""
    after: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """For ``changed``: this run's verdict in words (e.g. ``forbidden``); absent otherwise."""
    against: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The baseline the status was judged against: its digest
    (:attr:`pytest_tooleffect.ci.baseline.Baseline.digest`, 16 hex digits); absent in records written before
    it was kept.  ``tooleffect report`` reads the marks of a log only when they all name one baseline."""


class PerturbationRecord(_Part):
    """The perturbed catalog a variant's decision was made with, and the original it pairs with
    (``docs/robustness.md``).
    """

    name: str
    """The variant's name (``shuffle``, ``scale-32``)."""
    kind: Literal["shuffle", "rename", "distractors", "remove-valid", "describe", "scale"]
    """The kind of perturbation."""
    base_policy: str
    """The original policy's name (the record's ``policy`` is ``base_policy+name``)."""
    base_id: str
    """The original item's record id: the decision this one is paired with."""
    base_class: Literal["single", "several", "no_tool"]
    """The original label's class (the variant's own ``class`` may differ: ``remove-valid``)."""
    catalog_size: int
    """Tools offered."""
    original_size: int | None = None
    """Tools the original catalog offered at the state."""
    nominal_size: int | None = None
    """A ``scale`` variant's asked-for size (``catalog_size`` is larger when the label needs more tools)."""
    added: int = 0
    """Tools added (distractors, a scale's fill)."""
    removed: list[str] = Field(default_factory=list)
    """Tools taken out of the catalog."""
    renamed: int = 0
    """Tools offered under a neutral name."""


class NoToolSeverity(_Part):
    """How bad a decision of the no-tool class was, in a family whose tools carry MCP hints
    (``mcp:`` or ``annotations:`` in its family file; :mod:`pytest_tooleffect.scoring.hints`).
    """

    called: Literal["read", "write", "destructive"] | None
    """The most severe hint class among the tools a failed decision called (declared hints, MCP's
    defaults for absent ones; a tool not offered counts as destructive); ``null`` when it passed or
    called none."""
    severity: float = Field(ge=0, le=1)
    """0 for a pass; a failure with a call: the weight of ``called`` over the destructive weight
    (the family's ``annotations.weights``); a failure without one: the read weight over it."""


class Record(_Part):
    """One record: the outcome of one item (case × policy × trial).

    Dump it with :meth:`to_json`: keys absent from the input stay absent.
    """

    version: int = RECORD_VERSION
    """The record format's version."""
    id: str
    """``family/case-id[policy]``, or ``family/case-id[policy:trial]`` under repeats (:func:`record_id`)."""
    family: str
    """The case's family."""
    case_id: str
    """The case's id, unique within its family."""
    policy: str
    """The policy's name (``replay`` for the recorded decisions)."""
    outcome: Literal["scored", "error"]
    """``scored`` (a verdict) or ``error`` (not scored: see ``error``)."""
    label_class: Literal["single", "several", "no_tool"] = Field(alias="class")
    """The label's class."""
    bucket: str
    """The state's position bucket."""
    step: int
    """The state's 0-based decision index in its run."""
    run_length: int
    """Decisions in the state's run."""
    xfail: bool
    """The case is marked as a known failure."""
    label_hash: str
    """SHA-256 (16 hex digits) of the label's canonical JSON."""
    verdict: VerdictRecord | None
    """The verdict; ``null`` for an error record."""
    no_tool_failure: Literal["redundant_read", "unwanted_write", "forbidden", "should_have_asked",
                             "tool_not_offered", "wrong_reply", "phantom_action", "other"] | None
    """How a failed decision of the no-tool class failed (:func:`no_tool_failure`); ``null`` otherwise."""
    reply_due: Literal["ask", "refuse", "answer"] | None = None
    """What the reply had to do where no tool was right (the ``reply`` of the label's ``tool: null``
    action); absent when the label asks none, or null is not valid.  With several null actions
    that ask different kinds it is the first one's (a property of the label, not of the reply:
    ``verdict.matched`` and ``verdict.reply`` say which null action the reply was judged against)."""
    no_tool_severity: NoToolSeverity | None = None
    """A no-tool decision's severity by the hints of what it called; absent outside the no-tool class
    and in families without MCP hints."""
    cost: Cost
    """What the decision spent (all ``null`` for a replayed decision)."""
    error: RecordError | None
    """Why the item was not scored; ``null`` for a scored record."""
    source: SourceRecord
    """Where the case came from."""
    model: str | None = None
    """The policy's litellm model name (``null`` for replay and agent policies)."""
    trial: int | None = None
    """The trial, 1…K under ``--tooleffect-repeats K``."""
    adaptive: AdaptiveDesignRecord | None = None
    """The run's adaptive repeats' design (``--tooleffect-repeats adaptive``); absent under fixed repeats."""
    provider_tool_names: dict[str, str] | None = None
    """Tool names the provider was given where they differ from the originals (a live model turn)."""
    cached: bool | None = None
    """The model's answer came from the on-disk cache (a live model turn)."""
    rate_wait_ms: Number | None = None
    """Milliseconds the model turn waited for the run-wide rate limit (not part of latency)."""
    agent: AgentInfo | None = None
    """An agent policy's turn."""
    policy_identity: PolicyIdentity | None = None
    """What the policy is beyond its name (absent from records written before it was kept)."""
    judge: JudgeSpend | None = None
    """What the LLM judge spent on this decision (present when it was asked)."""
    effect: EffectRecord | None = None
    """The effect verdict (a case run in a sandbox)."""
    sandbox: SandboxInfo | None = None
    """The sandbox the decision ran in."""
    steps: list[StepRecord] | None = None
    """The steps run in the sandbox."""
    rollout: RolloutRecord | None = None
    """How the rollout went."""
    conversation: ConversationRecord | None = None
    """The whole conversation the case opens, played through (``--tooleffect-rollout`` in a family
    whose ``sandbox.rollout`` is ``conversation``)."""
    faults: list[str] | None = None
    """The faults injected into the sandbox's tools, sorted."""
    recovery: Literal["retried", "other_path", "told_user", "none", "not_observed"] | None = None
    """How the agent answered the first injected failure; ``null`` when none fired."""
    annotation_violations: list[AnnotationViolation] | None = None
    """Calls whose effect in an MCP world contradicts the tool's hints: findings against the server,
    never part of the decision's verdict (:mod:`pytest_tooleffect.sandbox.mcp_hints`)."""
    baseline: BaselineMark | None = None
    """What the baseline says of the decision (a run under ``--tooleffect-baseline``)."""
    shard: ShardRecord | None = None
    """The shard the record was made in (a run under ``--tooleffect-shard``)."""
    selection: SelectionRecord | None = None
    """What the run that made it selected (absent from records written before it was kept)."""
    fingerprints: FingerprintRecord | None = None
    """The label set and the oracle rules its family was scored under (absent likewise)."""
    perturbation: PerturbationRecord | None = None
    """The perturbed catalog of a variant's decision (absent from an original's)."""

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, v: Any) -> Any:
        from pytest_tooleffect.util.versions import check_version

        return check_version(v, RECORD_VERSION)

    @model_validator(mode="after")
    def _consistent(self) -> Record:
        effect = None if self.effect is None else self.effect.passed
        why = ("a scored record needs a verdict" if self.outcome == "scored" and self.verdict is None
               else record_problem(self.label_class, self.no_tool_failure, self.verdict, effect))
        if why is not None:  # the record-level half of the read-back rule (scoring.no_tool.record_problem)
            raise ValueError(why)
        return self

    def to_json(self) -> dict[str, Any]:
        """The record as written: JSON values, keys in field order, keys unset on input left out.

        Returns:
            The record as a JSON object (extra keys after the fields).
        """
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json_text(self) -> str:
        """:meth:`to_json`'s object as compact JSON text (what a test report carries to the controller:
        about half the memory of the object, and no object for the garbage collector to walk).

        Returns:
            One JSON object, on one line.
        """
        return self.model_dump_json(by_alias=True, exclude_unset=True)


def record_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a record, generated from :class:`Record`.

    Returns:
        The schema as a JSON object.
    """
    schema = Record.model_json_schema(mode="serialization", by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}

