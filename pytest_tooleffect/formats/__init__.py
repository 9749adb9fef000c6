"""Typed data at the edges: the case and family file formats (pydantic).

Everything a user writes by hand enters through these models, so their field names are the
words of docs/design.md: a *case* is a labelled decision point, its *label* a set of acceptable
actions (``tool: null`` allowed) plus the forbidden ones, its *placement* where the state sits in
its run.  ``tooleffect schema`` prints the JSON Schema of :class:`Case` and :class:`Family`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

# a family's MCP server, annotation policy and MCP world: a module of their own, exported here
from pytest_tooleffect.formats.mcp import AnnotationPolicy, HintWeights, McpServerInfo, McpSource, McpWorld, ProbeCall

# a policy (a family's ``policies:`` entry, a pyproject table), a price and the names shown in test
# ids: defined in a module of their own, exported here as part of this one's vocabulary
from pytest_tooleffect.formats.perturb import PerturbationSpec
from pytest_tooleffect.formats.policy import Amount, Count, Policy, Price, ShowableName, policy_identity, policy_params

__all__ = [
    "CASE_ID_SHAPE",
    "Action",
    "Amount",
    "AnnotationPolicy",
    "Case",
    "Conversation",
    "ConversationTurn",
    "Count",
    "Effect",
    "Family",
    "Fault",
    "ForbiddenAction",
    "HintWeights",
    "Label",
    "McpServerInfo",
    "McpSource",
    "McpWorld",
    "ParallelGroup",
    "Placement",
    "Policy",
    "Price",
    "ProbeCall",
    "Recorded",
    "RecordedCall",
    "SandboxSpec",
    "Source",
    "ToolAnnotations",
    "ToolSpec",
    "ValidAction",
    "is_case_id",
    "policy_identity",
    "policy_params",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolAnnotations(_Model):
    """MCP tool annotations (``readOnlyHint`` etc.), as in the MCP specification 2025-03-26."""

    model_config = ConfigDict(extra="allow", frozen=True)
    title: str | None = None
    readOnlyHint: bool | None = None  # noqa: N815 - MCP spelling
    destructiveHint: bool | None = None  # noqa: N815
    idempotentHint: bool | None = None  # noqa: N815
    openWorldHint: bool | None = None  # noqa: N815


class ToolSpec(_Model):
    """A function the agent may call: name, description, JSON-schema parameters, annotations.

    A tool imported from an MCP server (``tooleffect import mcp``) also keeps its ``title``, its
    ``outputSchema`` and, when the server's name is not one providers accept, ``mcp_name`` (the
    server's; ``name`` is then its provider-safe name, :func:`pytest_tooleffect.oracle.names.name_map`).

    Accepts the OpenAI wrapper ``{"type": "function", "function": {...}}`` and the flat
    Responses-API / OpenTelemetry form ``{"type": "function", "name": ..., "parameters": ...}``.
    """

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    annotations: ToolAnnotations = Field(default_factory=ToolAnnotations)
    title: str | None = None
    outputSchema: dict[str, Any] | None = None  # noqa: N815 - MCP spelling
    mcp_name: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _unwrap_openai(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "function":
            if isinstance(data.get("function"), dict):  # chat-completions form
                inner = dict(data["function"])
                if "annotations" in data and "annotations" not in inner:
                    inner["annotations"] = data["annotations"]
                return inner
            return {k: v for k, v in data.items() if k not in ("type", "strict")}  # Responses-API form
        return data

    @property
    def read_only(self) -> bool:
        """True when the tool declares ``readOnlyHint: true`` (MCP)."""
        return bool(self.annotations.readOnlyHint)


def _criterion_key(criterion: str) -> str:
    """A reply criterion as compared for contradiction: casefolded, whitespace collapsed."""
    return " ".join(criterion.casefold().split())


class Action(_Model):
    """One action: ``tool`` is a tool name, or ``None`` for "call no tool" (reply / stop).

    A ``tool: null`` action may say what its reply must do: ``reply`` (``ask`` for a missing or
    ambiguous detail, ``refuse`` out of scope or against policy, ``answer`` to report or
    confirm) and free-text criteria ``must`` / ``must_not`` (each a sentence or a list of them).
    """

    tool: str | None
    args: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None
    text_criteria: str | None = None
    reply: Literal["ask", "refuse", "answer"] | None = None
    must: list[str] = Field(default_factory=list)
    must_not: list[str] = Field(default_factory=list)

    @field_validator("must", "must_not", mode="before")
    @classmethod
    def _one_criterion(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [v]
        if not isinstance(v, list) or not all(isinstance(c, str) for c in v):
            raise ValueError(f"a criterion is a sentence, or a list of sentences; got {v!r}")
        return v

    @field_validator("must", "must_not")
    @classmethod
    def _criteria_say_something(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for i, criterion in enumerate(v):
            if not criterion.strip():
                raise ValueError(f"criterion {i} is empty: each criterion is a sentence saying what the reply does")
        if info.field_name == "must_not":
            required = {_criterion_key(c) for c in info.data.get("must", ())}
            both = [c for c in v if _criterion_key(c) in required]
            if both:
                raise ValueError(f"{both[0]!r} is both required (must) and forbidden (must_not): no reply can pass")
        return v

    @model_validator(mode="after")
    def _null_has_no_args(self) -> Action:
        if self.tool is None and self.args:
            raise ValueError("an action with tool: null cannot carry args")
        if self.tool is not None and (self.reply or self.must or self.must_not):
            raise ValueError("reply, must and must_not say what a reply does: only an action with tool: null has them")
        return self

    @property
    def reply_criteria(self) -> bool:
        """The action says what its reply must do (``reply``, ``must`` or ``must_not``)."""
        return bool(self.reply or self.must or self.must_not)


class ParallelGroup(_Model):
    """Several calls emitted in one turn; one alternative of the valid set."""

    parallel: list[Action] = Field(min_length=2)
    order_matters: bool = False
    reason: str | None = None

    @field_validator("parallel")
    @classmethod
    def _no_null_members(cls, v: list[Action]) -> list[Action]:
        if any(a.tool is None for a in v):
            raise ValueError("a parallel group cannot contain tool: null")
        return v


ValidAction = ParallelGroup | Action


def _action_kind(v: Any) -> str:
    """Which model a valid action is read as: a mapping with ``parallel`` is a group, else an action."""
    if isinstance(v, ParallelGroup) or (isinstance(v, dict) and "parallel" in v):
        return "ParallelGroup"
    return "Action"


# a valid action validated as the one model its shape names, so that an error is that model's
# (an action's ``must``), never the other's ("parallel: field required"); the tags are the
# models' names, which error locations leave out
_TaggedAction = Annotated[
    Annotated[ParallelGroup, Tag("ParallelGroup")] | Annotated[Action, Tag("Action")], Discriminator(_action_kind)
]


class ForbiddenAction(_Model):
    """An actively wrong action: a tool name, with ``args`` restricting it (absent = any args)."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"tool": data}
        return data


class Label(_Model):
    """The set of acceptable actions at a decision point, and the forbidden ones apart."""

    valid_actions: list[_TaggedAction] = Field(min_length=1)
    forbidden_actions: list[ForbiddenAction] = Field(default_factory=list)
    labelled_by: list[str] = Field(default_factory=list)
    notes: str | None = None
    # the oracle's compiled form, made at the first scoring (a cache: equal to any other, never copied deep)
    _oracle: Any = PrivateAttr(default=None)

    @field_validator("labelled_by", mode="before")
    @classmethod
    def _one_labeller(cls, v: Any) -> Any:
        # one name, or null (what ``label export`` writes when no --labeller is given: nobody named)
        return [v] if isinstance(v, str) else [] if v is None else v

    @property
    def label_class(self) -> Literal["no_tool", "several", "single"]:
        """The class (docs/design.md, "Words"): ``no_tool`` if null is valid, ``several`` if ≥2 alternatives."""
        if any(isinstance(a, Action) and a.tool is None for a in self.valid_actions):
            return "no_tool"
        return "several" if len(self.valid_actions) >= 2 else "single"


class Placement(_Model):
    """Where the state sits in its run: 0-based ``step`` of ``run_length`` decisions."""

    step: Count = Field(ge=0)
    run_length: Count = Field(ge=1)
    bucket: str = Field(min_length=1)

    @model_validator(mode="after")
    def _step_in_run(self) -> Placement:
        if self.step >= self.run_length:
            raise ValueError(f"step {self.step} is outside a run of {self.run_length} decisions")
        return self


class Source(_Model):
    """Where the case came from: a trace position, or ``authored`` / ``generated`` by hand."""

    kind: Literal["trace", "authored", "generated", "import"]
    dataset: str | None = None
    trace_id: str | None = None
    position: Count | None = None
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_word(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"kind": data}
        return data


class RecordedCall(_Model):
    """A tool call as the provider sent it; ``arguments`` may be a JSON string or an object.

    Anything else a provider may send (no name, arguments that are a number or a list) is kept
    as it was, so the oracle scores it as a ``malformed_call`` instead of rejecting the case.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    name: Any = None
    arguments: Any = None
    id: str | None = None


class Recorded(_Model):
    """What the agent actually emitted at this decision point (replayed offline)."""

    tool_calls: list[RecordedCall] = Field(default_factory=list)
    text: str | None = None
    finish_reason: str | None = None


_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
#: what a case id may be, in words (the ``id`` validator's message)
CASE_ID_SHAPE = "id must start with a letter or digit and use only A-Z a-z 0-9 _ . : -"


def is_case_id(value: object) -> bool:
    """``value`` is text a case's ``id`` may be (no ``/``, no ``..`` path, no space: ids name items and files)."""
    return isinstance(value, str) and _ID.match(value) is not None


class ReferenceCall(_Model):
    """One call of a reference trajectory (``Effect.same_as_after``)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Effect(_Model):
    """One condition on the world after the decision's tool calls ran in the sandbox.

    Four forms (exactly one of ``table``, ``unchanged``, ``only_changed``, ``same_as_after``):

    * ``{table, where?, change?, count? | at_least? / at_most?, every?}``: the rows of ``table``
      that match ``where`` (all rows when empty) in the end state, or, with ``change``, the rows
      the step inserted / updated / deleted.  Their number must be ``count`` (or within
      ``at_least``..``at_most``; with no bound given: at least one), and each must also match
      ``every``.  Example: ``{table: events, where: {thread_id: th-8831, start:
      "2025-03-20T14:00:00"}, count: 1}`` = exactly one event for that thread at 14:00 in the
      case's zone.
    * ``{unchanged: [tables]}``: those tables are exactly as seeded.
    * ``{only_changed: [tables]}``: every other table is exactly as seeded.
    * ``{same_as_after: [{name, arguments}]}``: every table ends exactly (value for value, no
      normalisation) as it does when these calls run from the seed instead of the decision's:
      a state check against a reference trajectory, as BFCL's multi-turn state checker does
      against the ground truth's execution.  The sandbox runs the reference after the decision.

    As a forbidden effect the condition must *not* hold: ``{table: events, change: insert}`` =
    "no event created".  Values compare by column type (see :mod:`pytest_tooleffect.oracle.effects`).
    """

    table: str | None = None
    where: dict[str, Any] = Field(default_factory=dict)
    change: Literal["insert", "update", "delete"] | None = None
    count: StrictInt | None = Field(default=None, ge=0)
    at_least: StrictInt | None = Field(default=None, ge=0)
    at_most: StrictInt | None = Field(default=None, ge=0)
    every: dict[str, Any] = Field(default_factory=dict)
    unchanged: list[str] | None = Field(default=None, min_length=1)
    only_changed: list[str] | None = Field(default=None, min_length=1)
    same_as_after: list[ReferenceCall] | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Effect:
        forms = [n for n in ("table", "unchanged", "only_changed", "same_as_after") if getattr(self, n) is not None]
        if len(forms) != 1:
            raise ValueError("an effect names exactly one of table, unchanged, only_changed, same_as_after")
        if self.table is None and (self.where or self.change or self.every or self.count is not None
                                   or self.at_least is not None or self.at_most is not None):
            raise ValueError("where / change / count / at_least / at_most / every go with table")
        if self.count is not None and (self.at_least is not None or self.at_most is not None):
            raise ValueError("give count, or at_least / at_most, not both")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least {self.at_least} is more than at_most {self.at_most}: it can never hold")
        return self

    def describe(self) -> str:
        """A one-line reading of the condition (its ``description`` when given, else :meth:`reading`)."""
        return " ".join(self.description.split()) if self.description else self.reading()

    def reading(self) -> str:
        """The condition read from its fields alone, whatever its ``description`` says."""
        if self.unchanged is not None:
            return f"unchanged: {', '.join(self.unchanged)}"
        if self.same_as_after is not None:
            calls = ", ".join(c.name for c in self.same_as_after) or "no call"
            return f"the world as after {calls}"
        if self.only_changed is not None:
            return f"only {', '.join(self.only_changed)} changed"
        where = ", ".join(f"{k}={v}" for k, v in self.where.items())
        done = {"insert": "inserted", "update": "updated", "delete": "deleted"}
        least, most = (self.count, self.count) if self.count is not None else (self.at_least, self.at_most)
        if least is not None and least == most:
            bound = f"exactly {least}"
        elif least and most is not None:
            bound = f"{least} to {most}"
        elif most is not None:
            bound = f"at most {most}"
        else:
            bound = f"at least {least or 1}" if least != 0 else "any number of"
        one = least == most == 1 or bound == "at least 1"
        rows = f"{bound} {'row' if one else 'rows'} of {self.table}" + (f" {done[self.change]}" if self.change else "")
        return rows + (f" where {where}" if where else "") + (f", each with {self.every}" if self.every else "")


class Fault(_Model):
    """A fault the sandbox injects into a tool's next ``times`` calls.

    ``kind``: ``status`` (an HTTP-style error answer, ``status`` 503 by default; the call does
    not run), ``timeout`` (no answer for ``after_ms`` ms, then a timeout error; the call does not
    run), ``malformed`` (the call runs but its answer is cut short), ``slow`` (the call runs
    after ``ms`` ms); delays are at most 20,000 ms (the sandbox client waits 30 s).
    Shorthands: ``503`` → ``{kind: status, status: 503}``; ``timeout``,
    ``malformed``; ``{slow: 800}`` → ``{kind: slow, ms: 800}``.
    """

    kind: Literal["status", "timeout", "malformed", "slow"]
    status: Count = Field(default=503, ge=400, le=599)
    after_ms: Amount = Field(default=200.0, ge=0, le=20_000)
    ms: Amount = Field(default=200.0, ge=0, le=20_000)
    times: Count = Field(default=1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            return data
        if isinstance(data, int):
            return {"kind": "status", "status": data}
        if isinstance(data, str):
            return {"kind": data}
        if isinstance(data, dict) and "kind" not in data and "slow" in data:
            return {"kind": "slow", "ms": data["slow"], **{k: v for k, v in data.items() if k != "slow"}}
        return data


class ConversationTurn(_Model):
    """One user turn of a conversation (``Case.conversation``)."""

    user: list[dict[str, Any]] = Field(default_factory=list)
    """The messages that open the turn (empty for turn 0, whose messages end the case's ``messages``)."""
    tools: list[ToolSpec] | None = None
    """The tools offered from this turn on (``None``: those of the turn before; turn 0: the case's)."""
    reference: list[ReferenceCall] = Field(default_factory=list)
    """The turn's reference calls (the ground truth), in order; empty: the right action is no call."""


class Conversation(_Model):
    """The whole conversation a case opens: under ``--tooleffect-rollout N``, in a family whose
    ``sandbox.rollout`` is ``conversation``, a live policy plays it through turn by turn (at most N
    steps a turn) and each turn's world and results are judged against the reference's
    (:mod:`pytest_tooleffect.oracle.conversation`).
    """

    turns: list[ConversationTurn] = Field(min_length=1)
    """The user turns in order; turn 0 is the case's own state."""
    no_tool_turns: Literal["decision", "bfcl"] = "decision"
    """``decision``: a call at a turn whose reference makes none fails the conversation; ``bfcl``:
    such turns are not checked (as BFCL's checker does)."""

    @model_validator(mode="after")
    def _turns_open(self) -> Conversation:
        if self.turns[0].user:
            raise ValueError("turns[0].user: turn 0's messages are the case's messages (leave it empty)")
        for k, turn in enumerate(self.turns[1:], 1):
            if not turn.user:
                raise ValueError(f"turns[{k}].user: a later turn opens with at least one message")
        return self


class Case(_Model):
    """A labelled decision point (docs/design.md, "Words")."""

    id: str
    placement: Placement
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    timezone: str | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    label: Label | None = None
    recorded: Recorded | None = None
    xfail: bool | str = False
    source: Source
    world: dict[str, list[dict[str, Any]]] | None = None
    expected_effects: list[Effect] = Field(default_factory=list)
    forbidden_effects: list[Effect] = Field(default_factory=list)
    faults: dict[str, Fault] = Field(default_factory=dict)
    conversation: Conversation | None = None
    confirmed: bool = False
    """The user explicitly confirmed the change at this state (a family's ``annotations.confirm_destructive``
    then lets its destructive tools be called)."""

    @field_validator("id")
    @classmethod
    def _id_shape(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError(CASE_ID_SHAPE)
        return v

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {v!r}") from exc
        return v


class SandboxSpec(_Model):
    """A family's sandbox: the world module its cases' ``world`` rows seed (``sandbox/worlds/<world>.py``),
    and what ``--tooleffect-rollout N`` rolls out: ``steps`` (every case: the policy goes on from its
    own decision until it calls no tool) or ``conversation`` (a case with a ``conversation`` is played
    through whole; every other case is decided teacher-forced, one step).
    """

    world: str
    rollout: Literal["steps", "conversation"] = "steps"
    mcp: McpWorld | None = None


class Family(_Model):
    """A family file (``cases/<family>/family.yaml``): shared tools, prompt, rules and quota."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)  # a policy's refused key

    name: ShowableName
    description: str = ""
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    tools_file: str | None = None
    oracle: str | None = None
    quota: dict[str, Count] | None = None
    population: dict[str, Count] | None = None
    production: dict[str, Amount] | None = None
    policies: list[Policy] = Field(default_factory=list)
    licence: str | None = None
    seed: Count | None = None
    sandbox: SandboxSpec | None = None
    mcp: McpSource | None = None
    annotations: AnnotationPolicy | None = None
    perturbations: list[PerturbationSpec] = Field(default_factory=list)  # docs/robustness.md
