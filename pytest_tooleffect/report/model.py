"""The report as typed data: :class:`Report` and its blocks, its JSON form and its JSON Schema.

A report has one :class:`Block` per family × policy (families are separate populations and are
never pooled), and one :class:`Comparison` per family run under several policies.  Fields are
declared in the order they are written; :func:`dumps` writes them, :func:`report_schema` is the
schema generated from the models (``tooleffect schema report``).  Percentages are floats in
[0, 100] (``*_pct``, unrounded) beside their display form (``*_display``, round half up, one
digit, ``"–"`` for no rows).

A block's effect level is :mod:`.effects_model`'s, the run-level parts (invalid cases, skipped
items, the judge, shards, the run) are :mod:`.run_model`'s; the bases they share are :mod:`.parts`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import Field, WithJsonSchema, field_validator

from pytest_tooleffect.report.arithmetic import CLASSES
from pytest_tooleffect.report.ci_model import BaselineComparison, BaselineUnreadable, GatesApplied, GatesNotApplied
from pytest_tooleffect.report.effects_model import Effects
from pytest_tooleffect.report.parts import Closed, Count, Number, Part, Pct, PerClass, is_none
from pytest_tooleffect.report.repeats_model import Repeats
from pytest_tooleffect.report.robustness import Robustness
from pytest_tooleffect.report.run_model import (
    InvalidFamily,
    JudgeSection,
    MergedSelection,
    MergedShards,
    RateLimiterFailures,
    RunInfo,
    ShardOf,
    SkippedItems,
    UnrecordedItems,
)
from pytest_tooleffect.report.sequential_model import SequentialSection
from pytest_tooleffect.scoring.record import RecordError
from pytest_tooleffect.util.display import LIMIT, json_safe, shown_obj

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
    "ErrorEntry",
    "Headline",
    "KindCounts",
    "HallucinatedTools",
    "NeedlessCalls",
    "NoToolFailures",
    "PhantomActions",
    "ApproximateReplies",
    "PostStratified",
    "Rate",
    "Repeats",
    "Report",
    "SmallClass",
    "Spend",
    "dumps",
    "report_schema",
]

REPORT_VERSION: Final = 1
KINDS = ("ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed", "forbidden",
         "right_tool_wrong_args", "malformed_call", "wrong_reply", "phantom_action")


class Rate(Part):
    """One class's rate at one level (name, or name + arguments)."""

    correct: Count
    """Rows correct at this level."""
    rate_pct: Pct | None
    """``correct / n`` as a percentage; ``null`` for a class with no rows."""
    rate_display: str
    """``rate_pct`` rounded half up to one digit."""
    wilson95_pct: tuple[float, float] | None
    """Wilson 95 % interval, percentages rounded to 4 digits; ``null`` for no rows."""


class ClassRates(Part):
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


class Average(Part):
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


class SmallClass(Part):
    """A class with fewer rows than the report's minimum: how much one row weighs."""

    n: Count
    """Scored rows of the class."""
    one_row_pct: float
    """Percentage points one row moves the class's rate: ``100 / n``."""
    one_row_macro_pct: float
    """Percentage points one row moves the macro-average: ``100 / (k n)``, ``k`` the classes with rows."""


class Bucket(Part):
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


class KindCounts(Part):
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
    phantom_action: Count = 0
    """An otherwise acceptable decision whose text claims an action or a result the conversation does
    not hold (a write never made or that failed, a value no tool returned); ``0`` in reports written
    before the kind existed."""


class ReplyDue(Part):
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


class NoToolFailures(Closed):
    """Failed rows of the no-tool class (at any level), each in exactly one bucket; they sum to the
    class's failures (``pytest_tooleffect.scoring.no_tool.no_tool_failure`` sorts them, first match wins).
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
    phantom_action: Count = 0
    """A reply that claims an action or a result the conversation does not hold."""
    other: Count
    """The rest (a call without a name; an effect failure after an acceptable decision)."""


class NeedlessCalls(Part):
    """The no-tool class of a family whose tools carry MCP hints, graded by what its failures called
    (the records' ``no_tool_severity``; :mod:`pytest_tooleffect.scoring.hints`).
    """

    n: Count
    """No-tool rows graded."""
    read: Count
    """Failed rows whose most severe call was to a read-only tool (a redundant read)."""
    write: Count
    """Failed rows whose most severe call was to a non-destructive writing tool."""
    destructive: Count
    """Failed rows that called a destructive tool (by its hints; unannotated = destructive)."""
    no_call: Count
    """Failed rows that called no tool (a wrong reply, an effect that failed)."""
    mean_severity: float
    """Mean of the rows' severities (0 for a pass, a failure's weight over the destructive weight)."""
    weighted_pct: float
    """The severity-weighted no-tool rate, percent: ``100 × (1 − mean_severity)``; the plain no-tool
    rate when every weight is equal."""
    weighted_display: str
    """``weighted_pct`` for display (one decimal, half up)."""


class HallucinatedTools(Closed):
    """Decisions that called a tool not offered at their state, counted apart in every class."""

    classes: PerClass[Count]
    """Such decisions per class."""
    tools: dict[str, int]
    """The names called that were not offered, with how many decisions called each, most first."""


class PhantomActions(Closed):
    """Decisions whose text claims an action or a result the conversation does not hold, counted in
    every class whatever their kind (``verdict.phantom``; ``oracle.claims``).
    """

    classes: PerClass[Count]
    """Such decisions per class."""
    action: Count
    """Of them, those whose claim is an action (a write never made, failed or without effect)."""
    result: Count
    """Of them, those whose claim is a result (a value or a lookup no tool returned)."""
    ids: list[str]
    """Their record ids, in record id order."""


class ApproximateReplies(Closed):
    """No-tool reply kinds judged by the deterministic fallback (no judge configured), per kind due."""

    kinds: dict[str, int]
    """Such verdicts per reply kind (``ask``, ``refuse``, ``answer``; only those with rows)."""
    low_precision: Count
    """Of them, those of a kind whose fallback precision was measured under 0.8
    (``oracle.reply.FALLBACK_PRECISION``): the verdicts a gate can refuse to rest on
    (``max_approximate_reply_verdicts``)."""


class Spend(Part):
    """What a set of decisions spent."""

    n: Count
    """Rows in the set."""
    input_tokens: Number | None
    """Prompt tokens over the rows whose count is known; ``null`` when none is."""
    cost_usd: Number | None
    """US dollars over the priced rows; ``null`` when none is priced."""
    cost_usd_unknown: Count
    """Rows with no price."""


class ExpensiveDecision(Part):
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


class CostSummary(Part):
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


class ErrorEntry(Part):
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


class PostStratified(Part):
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


class Block(Part):
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
    """Scored rows whose failure was expected, pytest's ``xfailed`` count for them: failed again as the
    baseline knew (``known``), or failed in a case its file marks ``xfail`` (not a regression nor
    ``changed``); :func:`pytest_tooleffect.scoring.outcome.expected_failure`."""
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
    needless_calls: NeedlessCalls | None = None
    """The no-tool class graded by the MCP hints of what it called; ``null`` for a family without hints."""
    hallucinated_tools: HallucinatedTools
    """Decisions that called a tool not offered at their state, per class (whatever their kind)."""
    phantom_actions: PhantomActions | None = None
    """Decisions whose text claims an action or a result the conversation does not hold, per class
    (whatever their kind); ``null`` in reports written before they were counted."""
    approximate_replies: ApproximateReplies | None = None
    """Reply kinds judged by the deterministic fallback, per kind, the low-precision ones apart;
    ``null`` in reports written before they were counted."""
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
    output cap), the rate limiter's (``RateLimiterError``: it failed, so no request was sent), an
    agent's, a sandbox's or the oracle's."""
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


class Headline(Part):
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


class Comparison(Part):
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


class Report(Part):
    """The report of a run: one block per family × policy, comparisons, conventions."""

    version: Literal[1] = REPORT_VERSION
    """The report format's version."""

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, v: Any) -> Any:
        from pytest_tooleffect.util.versions import check_version

        return check_version(v, REPORT_VERSION)
    status: Literal["complete", "incomplete", "interrupted"]
    """``complete`` when every item collected was scored; ``incomplete`` when some case was invalid, some
    item ended in an error, was skipped (not as ``settled``: a sequential gate's verdict came first) or ended
    with no record (all listed: ``invalid``, ``skipped``,
    ``unrecorded``, each block's ``errors``), or when the logs merged by ``tooleffect report`` lack a
    shard (``shards.missing``) or records of items their run selected (``selection.not_recorded``);
    ``interrupted`` when the run was cut short (Ctrl-C)."""
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
    unrecorded: list[UnrecordedItems] = Field(default_factory=list)
    """Per family, the items collected that ended with no record (a crashed worker, a run stopped
    before them), sorted."""
    rate_limiter: RateLimiterFailures | None = Field(default=None, exclude_if=is_none)
    """The decisions the run's rate limiter kept from being made when it failed; absent when it never
    failed (or the run had no limit)."""
    judge: JudgeSection | None = Field(default=None, exclude_if=is_none)
    """The judge of free-text fields (``tooleffect report``: the judge the records name)."""
    shard: ShardOf | None = Field(default=None, exclude_if=is_none)
    """The shard this run was (``--tooleffect-shard I/N``); absent from an unsharded run."""
    shards: MergedShards | None = Field(default=None, exclude_if=is_none)
    """The shards ``tooleffect report`` merged (absent when the records carry no shard)."""
    selection: MergedSelection | None = Field(default=None, exclude_if=is_none)
    """What the run whose logs ``tooleffect report`` merged selected and how much of it has a record
    (absent from a run's own report, and when the records do not say)."""
    run: RunInfo | None = Field(default=None, exclude_if=is_none)
    """When and how the run was made, with which versions, cases commit and policy parameters (written by
    the plugin; absent from ``tooleffect report``)."""
    robustness: Robustness | None = Field(default=None, exclude_if=is_none)
    """Each perturbed-catalog variant against the original on the same cases (``docs/robustness.md``);
    absent when the run had no variant."""

    baseline: BaselineComparison | BaselineUnreadable | None = Field(default=None, exclude_if=is_none,
                                                                     union_mode="left_to_right")
    """The run against its baseline (``--tooleffect-baseline``); absent without one."""
    sequential: SequentialSection | None = Field(default=None, exclude_if=is_none)
    """The sequential gates: each one's verdict, when it was reached and what stopping saved; the run's
    order (``sequential`` in ``[tool.tooleffect.gates]``); absent without one."""
    gates: GatesApplied | GatesNotApplied | None = Field(default=None, exclude_if=is_none, union_mode="left_to_right")
    """The gates judged and the exit status they decided (``[tool.tooleffect.gates]``); absent when no gate
    judged the run."""

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object, keys in field order (sections without a value left out)."""
        return self.model_dump(mode="json")

    def shown(self, *, limit: int | None = LIMIT, lines: bool = False) -> Report:
        r"""The report as a renderer shows it: every string and key passed through
        :func:`~pytest_tooleffect.util.display.shown` (a tool name a model made up, a provider's
        message, a case file's text); ``self`` when none changes.

        Args:
            limit: the most characters of one string, the cut said.
            lines: keep line breaks (the HTML page); else each is shown as ``\n``.
        """
        data = self.to_json()
        clean = shown_obj(data, limit=limit, lines=lines)
        return self if clean == data else Report.model_validate(clean)


def dumps(report: Report | Mapping[str, Any]) -> str:
    r"""The report as indented JSON (2 spaces, keys in field order, non-ASCII kept but for control,
    bidirectional and separator characters, written as ``\uXXXX``: :func:`~pytest_tooleffect.util.display.json_safe`).

    Args:
        report: the report, or its JSON object.

    Returns:
        The JSON text, without a final newline.

    Raises:
        ValueError: the report holds a number JSON has no form for (``NaN``, an infinity: a
            ``pytest_tooleffect_modifyreport`` hook's addition); no report is ever written with one.
    """
    data = report.to_json() if isinstance(report, Report) else report
    return json_safe(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False))


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a report, generated from :class:`Report`.

    Returns:
        The schema as a JSON object.
    """
    schema = Report.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
