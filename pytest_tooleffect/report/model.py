"""The report as typed data: :class:`Report` and its blocks, its JSON form and its JSON Schema.

A report has one :class:`Block` per family × policy (families are separate populations and are
never pooled), and one :class:`Comparison` per family run under several policies.  Fields are
declared in the order they are written; :func:`dumps` writes them, :func:`report_schema` is the
schema generated from the models (``tooleffect schema report``).  Percentages are floats in
[0, 100] (``*_pct``, unrounded) beside their display form (``*_display``, round half up, one
digit, ``"–"`` for no rows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from ..records import RecordError
from .arithmetic import CLASSES

__all__ = [
    "CLASSES",
    "KINDS",
    "REPORT_VERSION",
    "Average",
    "Block",
    "Bucket",
    "ClassRates",
    "Comparison",
    "CostSummary",
    "EffectRate",
    "Effects",
    "ErrorEntry",
    "GitState",
    "Headline",
    "InvalidCase",
    "InvalidFamily",
    "JudgeSection",
    "KindCounts",
    "HallucinatedTools",
    "MergedShards",
    "NoToolFailures",
    "PerClass",
    "PostStratified",
    "Rate",
    "Repeats",
    "Report",
    "RunInfo",
    "SkippedItems",
    "SmallClass",
    "ShardOf",
    "Spend",
    "Versions",
    "dumps",
    "report_schema",
]

REPORT_VERSION: Final = 1
KINDS = ("ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed", "forbidden",
         "right_tool_wrong_args", "malformed_call", "wrong_reply")

Number = int | float  # sums of JSON numbers keep their type
Pct = Annotated[float, Field(ge=0, le=100)]  # an exact proportion as a percentage
Count = Annotated[int, Field(ge=0)]
T = TypeVar("T")


class _Part(BaseModel):
    """Base of the report's models: keys in declared order, a docstring per field, keys added by
    ``pytest_tooleffect_modifyreport`` hooks kept.
    """

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, ser_json_inf_nan="constants")


class _Closed(_Part):
    """A part whose keys are a fixed partition: no other key."""

    model_config = ConfigDict(extra="forbid")


class PerClass(_Closed, Generic[T]):
    """One value per label class."""

    single: T
    """Exactly one valid action, a tool."""
    several: T
    """Two or more valid alternatives, none of them no tool."""
    no_tool: T
    """No tool is among the valid actions."""


class Rate(_Part):
    """One class's rate at one level (name, or name + arguments)."""

    correct: Count
    """Rows correct at this level."""
    rate_pct: Pct | None
    """``correct / n`` as a percentage; ``null`` for a class with no rows."""
    rate_display: str
    """``rate_pct`` rounded half up to one digit."""
    wilson95_pct: tuple[float, float] | None
    """Wilson 95 % interval, percentages rounded to 4 digits; ``null`` for no rows."""


class ClassRates(_Part):
    """One class's rows, weight and rates at both levels."""

    n: Count
    """Scored rows of the class."""
    small: bool = False
    """The class has rows, fewer than the block's ``min_class_n``: one row moves its rate by ``100 / n``
    points and the macro-average by ``100 / (k n)``."""
    weight: Annotated[float, Field(ge=0, le=1)] | None
    """``w_i = n_i / N``, fixed by the sampling quota; ``null`` when the block has no rows."""
    name: Rate
    """The tool names (or the abstention) are acceptable."""
    name_args: Rate
    """Names and arguments are acceptable."""


class Average(_Part):
    """Micro- or macro-average at both levels."""

    name_pct: Pct | None
    """At the name level."""
    name_display: str
    """``name_pct`` for display."""
    name_args_pct: Pct | None
    """At the name + arguments level."""
    name_args_display: str
    """``name_args_pct`` for display."""
    gap_pct: float | None
    """``name_pct - name_args_pct``: what arguments cost."""
    name_ci95_pct: tuple[float, float] | None = None
    """95 % interval at the name level, percentages rounded to 4 digits: Wilson's for the micro-average,
    Price & Bonett's adjusted Wald interval for the macro-average; ``null`` for no rows."""
    name_args_ci95_pct: tuple[float, float] | None = None
    """95 % interval at the name + arguments level, as ``name_ci95_pct``."""


class SmallClass(_Part):
    """A class with fewer rows than the report's minimum: how much one row weighs."""

    n: Count
    """Scored rows of the class."""
    one_row_pct: float
    """Percentage points one row moves the class's rate: ``100 / n``."""
    one_row_macro_pct: float
    """Percentage points one row moves the macro-average: ``100 / (k n)``, ``k`` the classes with rows."""


class Bucket(_Part):
    """The rows of one position bucket."""

    n: Count
    """Scored rows in the bucket."""
    classes: dict[str, int]
    """Rows per class, in the order first seen."""
    name_pct: Pct
    """Rate at the name level."""
    name_display: str
    """``name_pct`` for display."""
    name_args_pct: Pct
    """Rate at the name + arguments level."""
    name_args_display: str
    """``name_args_pct`` for display."""


class KindCounts(_Part):
    """Scored rows per verdict kind (every kind listed, zeros included)."""

    ok: Count
    """A tool call (or parallel group) that is acceptable."""
    ok_no_tool: Count
    """A correct abstention."""
    wrong_tool: Count
    """A tool that is not among the valid actions."""
    tool_when_none_needed: Count
    """A tool was called where no tool was right."""
    none_when_tool_needed: Count
    """No tool was called where one was needed."""
    forbidden: Count
    """A forbidden action (wins over every other failure)."""
    right_tool_wrong_args: Count
    """The right tool with unacceptable arguments."""
    malformed_call: Count
    """A call attempt that could not be parsed."""
    wrong_reply: Count
    """No tool, where none was right, but a reply that fails what its label says it must do."""


class ReplyDue(_Part):
    """The no-tool rows whose label asks one reply kind of them."""

    n: Count
    """Rows."""
    no_call_pct: Pct
    """Rows where no tool was called (the name level)."""
    no_call_display: str
    """``no_call_pct`` for display."""
    right_pct: Pct
    """Rows where no tool was called and the reply did what was due (the name + args level)."""
    right_display: str
    """``right_pct`` for display."""


class NoToolFailures(_Closed):
    """Failed rows of the no-tool class (at any level), each in exactly one bucket; they sum to the
    class's failures (``pytest_tooleffect.records.no_tool_failure`` sorts them, first match wins).
    """

    redundant_read: Count
    """A tool was called and every called tool is read-only."""
    unwanted_write: Count
    """A tool was called and some called tool is not read-only."""
    forbidden: Count
    """A forbidden action."""
    should_have_asked: Count
    """The reply had to ask (or refuse) and did not: a guess where a question was due."""
    tool_not_offered: Count
    """A call to a tool that was not offered at the state (a hallucinated tool)."""
    wrong_reply: Count
    """Any other reply that fails its label's ``reply``, ``must`` or ``must_not``."""
    other: Count
    """The rest (a call without a name; an effect failure after an acceptable decision)."""


class HallucinatedTools(_Closed):
    """Decisions that called a tool not offered at their state, counted apart in every class."""

    classes: PerClass[Count]
    """Such decisions per class."""
    tools: dict[str, int]
    """The names called that were not offered, with how many decisions called each, most first."""


class Spend(_Part):
    """What a set of decisions spent."""

    n: Count
    """Rows in the set."""
    input_tokens: Number | None
    """Prompt tokens over the rows whose count is known; ``null`` when none is."""
    cost_usd: Number | None
    """US dollars over the priced rows; ``null`` when none is priced."""
    cost_usd_unknown: Count
    """Rows with no price."""


class ExpensiveDecision(_Part):
    """One of the most expensive decisions."""

    id: str
    """The record id."""
    kind: str
    """Its verdict kind."""
    input_tokens: Number | None
    """Prompt tokens."""
    output_tokens: Number | None
    """Completion tokens."""
    cost_usd: Number | None
    """US dollars."""


class CostSummary(_Part):
    """Cost of a block's scored decisions (``null`` totals: nothing known; ``*_unknown``: rows not known)."""

    input_tokens: Number | None
    """Prompt tokens."""
    input_tokens_unknown: Count
    """Rows with no prompt token count."""
    output_tokens: Number | None
    """Completion tokens."""
    output_tokens_unknown: Count
    """Rows with no completion token count."""
    cost_usd: Number | None
    """US dollars."""
    cost_usd_unknown: Count
    """Rows with no price."""
    latency_ms_p50: float | None
    """Median latency in milliseconds."""
    latency_ms_p95: float | None
    """95th percentile latency in milliseconds."""
    no_tool_input_tokens: Number | None
    """Prompt tokens on rows of the no-tool class."""
    by_class: PerClass[Spend]
    """Spend per class."""
    by_kind: dict[str, Spend]
    """Spend per verdict kind (the kinds that occur)."""
    no_tool_spend: Spend
    """What decisions whose right answer included no tool spent."""
    most_expensive: list[ExpensiveDecision]
    """Up to ten priced decisions, most expensive first."""
    from_cache: Count
    """Decisions that came from the model cache."""


class ErrorEntry(_Part):
    """An item that was not scored."""

    id: str
    """The record id."""
    error: Annotated[dict[str, Any], WithJsonSchema(RecordError.model_json_schema(mode="serialization"))] | None
    """Why: the record's ``error`` (``type``, ``message``, ``traceback`` for an agent's exception), as
    the record has it (its keys in the record's order)."""

    @field_validator("error")
    @classmethod
    def _is_record_error(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            RecordError.model_validate(value)
        return value


class PostStratified(_Part):
    """The production rate estimated from per-bucket rates (an estimate, only as good as its weights)."""

    weights_from: Literal["production", "population"]
    """The family's ``production`` shares, else its ``population`` counts."""
    weights: dict[str, float]
    """Bucket weights, renormalised over the buckets with scored rows."""
    name_pct: float
    """Estimate at the name level."""
    name_display: str
    """``name_pct`` for display."""
    name_args_pct: float
    """Estimate at the name + arguments level."""
    name_args_display: str
    """``name_args_pct`` for display."""


class Repeats(_Part):
    """Repeated trials of the same cases (``--tooleffect-repeats``)."""

    trials: int
    """Most trials of one case."""
    cases: Count
    """Cases scored."""
    pass_hat_k: dict[str, float]
    """pass^k for k = 1…trials: the chance that all of k trials pass (unbiased, averaged over cases)."""
    flip_share: float
    """Share of cases whose verdict differs between trials."""


class EffectRate(_Part):
    """One class's rate at the effect level."""

    n: Count
    """Rows of the class run in a sandbox."""
    correct: Count
    """Rows whose end state meets the effects."""
    rate_pct: Pct | None
    """``correct / n`` as a percentage; ``null`` for no rows."""
    rate_display: str
    """``rate_pct`` for display."""
    wilson95_pct: tuple[float, float] | None
    """Wilson 95 % interval, percentages; ``null`` for no rows."""


class EffectKindCounts(_Part):
    """Rows per effect kind."""

    ok: Count
    """The end state meets the effects."""
    forbidden_effect: Count
    """A forbidden change happened."""
    unexpected_change: Count
    """A change no effect allows."""
    effect_missing: Count
    """An expected change did not happen."""


class RecoveryKinds(_Part):
    """How the agent answered the first injected failure."""

    retried: Count
    """Called the failed tool again."""
    other_path: Count
    """Called other tools."""
    told_user: Count
    """Answered without a tool call."""
    none: Count
    """The rollout ended at its step limit right after the failure."""
    not_observed: Count
    """No step after the failure (a single decision, or a replay)."""


class Recovery(_Part):
    """Recovery from injected faults."""

    observed: Count
    """Rows where a failure fired and a next step was seen."""
    recovered: Count
    """Of those, rows that retried, took another path or told the user."""
    rate_pct: Pct | None
    """``recovered / observed``; ``null`` when nothing was observed."""
    rate_display: str
    """``rate_pct`` for display."""
    by_kind: RecoveryKinds
    """Rows per recovery kind."""


class RolloutSummary(_Part):
    """Self-steered rollouts (live policies only) against the single-step rate on the same cases."""

    n: Count
    """Cases rolled out."""
    limit: int
    """The step limit."""
    single_step_pct: Pct
    """First decision correct at name + arguments (teacher-forced, an upper bound)."""
    single_step_display: str
    """``single_step_pct`` for display."""
    self_steered_pct: Pct
    """End state meets the effects."""
    self_steered_display: str
    """``self_steered_pct`` for display."""
    mean_steps: float
    """Mean steps taken, 2 digits."""
    stopped: dict[str, int]
    """Rollouts per reason they stopped."""


class ConversationSummary(_Part):
    """Whole conversations played through by a live policy (self-steered) beside the teacher-forced
    decisions of the same conversations.
    """

    n: Count
    """Conversations played through."""
    limit: int
    """The step limit per user turn."""
    passed: Count
    """Conversations that passed every turn."""
    self_steered_pct: Pct
    """``passed / n``: whole-conversation success."""
    self_steered_display: str
    """``self_steered_pct`` for display."""
    decisions: Count
    """Decision points (scored rows) of the same conversations, teacher-forced."""
    decisions_pct: Pct | None
    """Decision points right at name + arguments and in effect (teacher-forced)."""
    decisions_display: str
    """``decisions_pct`` for display."""
    turns: Count
    """User turns of the same conversations with a scored decision point."""
    turns_pct: Pct | None
    """Turns whose every decision point is right (teacher-forced, per turn)."""
    turns_display: str
    """``turns_pct`` for display."""
    kinds: dict[str, int]
    """Conversations per verdict kind (``ok`` or the first failure's)."""


class SandboxSummary(_Part):
    """The sandboxes the rows ran in."""

    providers: list[str]
    """Providers, sorted."""
    restrictions: list[str]
    """Isolation measures in force in any sandbox, sorted."""
    restrictions_missing: list[str]
    """Isolation measures missing in any sandbox, sorted."""


class Effects(_Part):
    """Effect-level results of the rows run in a sandbox."""

    n: Count
    """Rows run in a sandbox."""
    classes: PerClass[EffectRate]
    """Rates per class."""
    micro_pct: Pct | None
    """Micro-average."""
    micro_display: str
    """``micro_pct`` for display."""
    macro_pct: Pct | None
    """Macro-average over the classes with rows."""
    macro_display: str
    """``macro_pct`` for display."""
    kinds: EffectKindCounts
    """Rows per effect kind."""
    recovery: Recovery
    """Recovery from injected faults."""
    rollout: RolloutSummary | None
    """Self-steered rollouts; ``null`` when none ran."""
    conversations: ConversationSummary | None = None
    """Conversations played through; ``null`` when none was."""
    sandbox: SandboxSummary
    """The isolation in force."""


class Block(_Part):
    """The results of one family under one policy."""

    family: str
    """The family."""
    policy: str
    """The policy."""
    n_scored: Count
    """Rows scored."""
    n_errors: Count
    """Items not scored (excluded from every rate, listed in ``errors``)."""
    n_xfail: Count
    """Scored rows of cases marked as known failures."""
    classes: PerClass[ClassRates]
    """Per-class rows, weights and rates."""
    micro: Average
    """Micro-average: ``Σc_i / Σn_i``."""
    macro: Average
    """Macro-average: ``Σr_i / k`` over the classes with rows."""
    buckets: dict[str, Bucket]
    """Rows and rates per position bucket, in the quota's order."""
    quota: dict[str, int] | None
    """The family's sampling quota per bucket."""
    population: dict[str, int] | None
    """The family's population per bucket (what the sample was drawn from)."""
    kinds: KindCounts
    """Rows per verdict kind."""
    argument_failures: dict[str, int]
    """Failing fields of ``right_tool_wrong_args`` rows by ``tool.field``, most first."""
    no_tool_failures: NoToolFailures
    """Failed rows of the no-tool class by how they failed."""
    no_tool_by_reply: dict[str, ReplyDue] = {}
    """The no-tool class split by the reply its labels ask for (``ask``, ``refuse``, ``answer``,
    ``unspecified``; only those with rows): e.g. BFCL's ``[]`` turns, where the right action is
    to ask (miss_param) or to say a function is not available (miss_func)."""
    hallucinated_tools: HallucinatedTools
    """Decisions that called a tool not offered at their state, per class (whatever their kind)."""
    unruled_fields: dict[str, int]
    """``tool.field`` paths compared raw because no rule covers them, most first."""
    approximate: Count
    """Rows with a free-text field judged by the deterministic fallback."""
    cost: CostSummary
    """What the decisions cost."""
    errors: list[ErrorEntry]
    """The items not scored."""
    error_types: dict[str, int] = Field(default_factory=dict)
    """The items not scored by error type, most first: a provider's (``Timeout``,
    ``ConnectionReset``, ``RateLimitError``, …), an answer that is not a decision
    (``ContentFilter``: the provider's safety layer stopped it; ``Truncated``: cut off at the
    output cap), an agent's, a sandbox's or the oracle's."""
    failing: list[str] = Field(default_factory=list)
    """The record ids of the scored rows that failed (their kind, or their effect), in record id order."""
    min_class_n: Count | None = None
    """The row count under which a class is flagged as small (``--tooleffect-min-class-n``)."""
    small_classes: dict[str, SmallClass] = Field(default_factory=dict)
    """The classes with rows, fewer than ``min_class_n``, and how far one row moves them."""
    label_set_fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
    """SHA-256 over sorted ``(case id, label hash)``: two reports are one quantity only when these match."""
    post_stratified_estimate: PostStratified | None
    """The production rate estimate; ``null`` without population or production weights."""
    repeats: Repeats | None
    """pass^k and verdict flips; ``null`` with one trial per case."""
    effects: Effects | None
    """Effect-level results; ``null`` when no row ran in a sandbox."""


class Headline(_Part):
    """One policy's headline figures in a comparison."""

    n: Count
    """Rows."""
    classes_n: PerClass[int]
    """Rows per class."""
    name_micro_display: str
    """Micro-average at the name level."""
    name_macro_display: str
    """Macro-average at the name level."""
    name_args_micro_display: str
    """Micro-average at the name + arguments level."""
    name_args_macro_display: str
    """Macro-average at the name + arguments level."""
    classes_name_display: PerClass[str]
    """Per-class rates at the name level."""


class Comparison(_Part):
    """Policies side by side on one family."""

    family: str
    """The family."""
    policies: list[str]
    """The policies, sorted."""
    shared_n: Count
    """Cases every policy scored."""
    all: dict[str, Headline]
    """Per policy, on every case it scored."""
    shared: dict[str, Headline]
    """Per policy, on the shared cases only."""


class InvalidCase(_Part):
    """A case (or a file, a family file, a family's policies) that failed validation and was not run."""

    case_id: str | None
    """The case's id; ``null`` for a problem of the file, the family file or the family's policies."""
    file: str
    """The file the problem is in."""
    problems: list[str]
    """One line per problem, naming the file, the case id and the field."""


class InvalidFamily(_Part):
    """A family's invalid cases: collected, never scored, counted here so they cannot vanish."""

    family: str
    """The family (its folder's name when the family file itself is invalid)."""
    count: Count
    """Invalid entries (cases, or a file or family that could not be read)."""
    ids: list[str | None]
    """Their case ids, sorted, ``null`` last for entries that are not one case."""
    cases: list[InvalidCase]
    """Each entry with its problems, in ``ids`` order."""


class SkippedItems(_Part):
    """Items of one family × policy that were collected and skipped (nothing to replay, no label, a skip marker)."""

    family: str
    """The family."""
    policy: str
    """The policy."""
    count: Count
    """Items skipped."""
    reasons: dict[str, int]
    """Items per reason, most first."""
    ids: list[str]
    """Their record ids, sorted."""


class JudgeCalibration(_Part):
    """The judge's last measured agreement with hand labels (``tooleffect calibrate-judge``)."""

    n: int | None = None
    """Hand-labelled pairs."""
    agreement: float | None = None
    """Share of pairs where judge and hand label agree."""
    kappa: float | None = None
    """Cohen's kappa."""
    kappa_ci95: list[float] | None = None
    """95 % interval of kappa."""
    measured_at: str | None = None
    """When it was measured."""


class JudgeUsage(_Part):
    """What the judge spent over the run (apart from the agent's cost)."""

    calls: Number
    """Judge calls."""
    cached: Number
    """Answers from the judge's cache."""
    input_tokens: Number
    """Prompt tokens."""
    output_tokens: Number
    """Completion tokens."""
    cost_usd: Number | None
    """US dollars; ``null`` when any call is unpriced."""


def _none(value: Any) -> bool:
    return value is None


class JudgeSection(_Part):
    """The LLM judge of free-text fields, written by the plugin's ``pytest_tooleffect_modifyreport``."""

    model: str | None
    """The judge's model; ``null`` when there is none."""
    note: str | None = Field(default=None, exclude_if=_none)
    """Without a judge: what judged free-text fields instead."""
    calibration: JudgeCalibration | str | None = Field(default=None, exclude_if=_none)
    """With a judge: its calibration, or why there is none."""
    usage: JudgeUsage | None = Field(default=None, exclude_if=_none)
    """With a judge: what it spent."""


class ShardOf(_Part):
    """One shard of a run."""

    index: int
    """The shard, 1…``count``."""
    count: int
    """How many shards the run was split into."""


class MergedShards(_Part):
    """The shards whose record logs were merged into one report."""

    count: int
    """How many shards the run was split into (from the records)."""
    merged: list[int]
    """The shards that have records, sorted."""
    missing: list[int]
    """The shards with no record: the report's status is then ``incomplete``."""
    logs: list[str]
    """The record logs read, in the order given."""
    duplicates_dropped: int = 0
    """Records left out as repeats of one already read (same id and trial; ``--duplicates``)."""


class Versions(_Part):
    """The versions of the packages the run used, from their installed metadata (never imported to read them)."""

    plugin: str | None
    """pytest-tooleffect."""
    pytest: str | None
    """pytest."""
    litellm: str | None
    """litellm (``null`` when it is not installed)."""
    pytest_xdist: str | None
    """pytest-xdist (``null`` when it is not installed)."""
    python: str
    """The Python interpreter (``3.11.7``)."""


class GitState(_Part):
    """The commit a family's folder was checked out at."""

    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    """``HEAD``'s commit."""
    dirty: bool
    """A tracked file under the folder differed from the commit, or an untracked one was there."""


class RunInfo(_Part):
    """When and how the run was made (written by the plugin; absent from ``tooleffect report``)."""

    started_at: str
    """When the session started, ISO 8601 in UTC (``2026-12-01T22:51:00.123Z``)."""
    ended_at: str
    """When the report was made, ISO 8601 in UTC."""
    command: list[str]
    """The arguments pytest was run with (``config.invocation_params.args``)."""
    directory: str
    """The folder pytest was run from."""
    versions: Versions
    """The plugin's, pytest's, litellm's, pytest-xdist's and Python's versions."""
    cases_git: dict[str, GitState]
    """By family, the git commit of its folder; a family whose folder is in no git work tree is absent."""
    policies: dict[str, dict[str, Any]]
    """By policy name, its parameters (model or agent, api base, sampling parameters, overrides, settings);
    never an api key or another secret."""


class Report(_Part):
    """The report of a run: one block per family × policy, comparisons, conventions."""

    version: Literal[1] = REPORT_VERSION
    """The report format's version."""
    status: Literal["complete", "incomplete", "interrupted"]
    """``complete`` when every item collected was scored; ``incomplete`` when some case was invalid, some
    item ended in an error or was skipped (all listed: ``invalid``, ``skipped``, each block's ``errors``), or
    when shards merged by ``tooleffect report`` lack one (``shards.missing``); ``interrupted`` when the run
    was cut short (Ctrl-C)."""
    conventions: dict[str, str]
    """The conventions the figures follow (parallel matching, conditioning, class weights, errors)."""
    blocks: list[Block]
    """One per family × policy, sorted."""
    comparisons: list[Comparison]
    """One per family run under more than one policy."""
    invalid: list[InvalidFamily] = Field(default_factory=list)
    """Per family, the cases that failed validation (never scored), sorted by family."""
    skipped: list[SkippedItems] = Field(default_factory=list)
    """Per family × policy, the items collected and skipped, sorted."""
    judge: JudgeSection | None = Field(default=None, exclude_if=_none)
    """The judge of free-text fields (written by the plugin; absent from ``tooleffect report``)."""
    shard: ShardOf | None = Field(default=None, exclude_if=_none)
    """The shard this run was (``--tooleffect-shard I/N``); absent from an unsharded run."""
    shards: MergedShards | None = Field(default=None, exclude_if=_none)
    """The shards ``tooleffect report`` merged (absent when the records carry no shard)."""
    run: RunInfo | None = Field(default=None, exclude_if=_none)
    """When and how the run was made, with which versions, cases commit and policy parameters (written by
    the plugin; absent from ``tooleffect report``)."""

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object, keys in field order (``judge`` left out when there is none)."""
        return self.model_dump(mode="json")


def dumps(report: Report | Mapping[str, Any]) -> str:
    """The report as indented JSON (2 spaces, keys in field order, non-ASCII kept).

    Args:
        report: the report, or its JSON object.

    Returns:
        The JSON text, without a final newline.
    """
    data = report.to_json() if isinstance(report, Report) else report
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False)


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a report, generated from :class:`Report`.

    Returns:
        The schema as a JSON object.
    """
    schema = Report.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
