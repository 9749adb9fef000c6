"""The verdict on one decision (DESIGN.md scoring rules 1–3).

Kind precedence: ``forbidden`` wins over every other failure; then ``malformed_call``,
``tool_when_none_needed`` (a tool was called, null was valid, the call matched no valid action),
``none_when_tool_needed``, ``wrong_tool``, ``right_tool_wrong_args``, and ``wrong_reply`` (no tool was
called where null is valid, but the reply fails what every null action says it must do: the name
level is right, the reply wrong; scoring rule 6; with several null actions the reply passes when it
meets any one).  A call to a tool not offered is flagged (``hallucinated``) whatever its kind.

Phantom actions (:mod:`.claims`): a turn whose text claims an action or a result the conversation
does not hold carries the claim (``phantom``) whatever its kind; a passing kind or ``wrong_reply``
becomes ``phantom_action`` (a failure in every class), ``name_ok`` kept, ``name_args_ok`` ``False``.

Parallel groups: the emitted calls are matched to one valid alternative as a multiset by an optimal
assignment whose cost is the number of failing fields (a name mismatch costs more than any field
count); every emitted call must be assigned and every call of the alternative present.  The optimum
is a first fit when that reaches the lower bound (each call's cheapest pair), else the Hungarian
method (``scipy.optimize.linear_sum_assignment``).  Among alternatives whose names match, the one
with the fewest failing fields is the matched action.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pytest_tooleffect.formats import Action, ForbiddenAction, Label, ParallelGroup, ToolSpec
from pytest_tooleffect.oracle.claims import Phantom, turn_phantom
from pytest_tooleffect.oracle.compare import FieldResult, compare_args
from pytest_tooleffect.oracle.compiled import ArgsPlan, compile_call
from pytest_tooleffect.oracle.context import NO_CONTEXT, CompareContext
from pytest_tooleffect.oracle.emission import Call, Emission, parse_emission, tool_aliases
from pytest_tooleffect.oracle.kinds import KINDS, OK_KINDS, Kind
from pytest_tooleffect.oracle.reply import ReplyCheck, judge_reply
from pytest_tooleffect.oracle.rules import RuleSet
from pytest_tooleffect.oracle.values import fresh

__all__ = ["KINDS", "PARALLEL_CONVENTION", "Verdict", "compile_label", "phantom_check", "score"]

PARALLEL_CONVENTION = (
    "a parallel turn is one decision: its calls are matched to one valid alternative as a multiset "
    "by optimal assignment; every emitted call must be acceptable and every call of the "
    "alternative present (calls are not scored as separate rows)"
)
_NAME_MISMATCH = 1 << 40  # more than any call's failing fields


class Verdict(NamedTuple):
    """What the oracle decided about one emitted turn (immutable).

    Attributes:
        name_ok: the tool names (or the abstention) are acceptable.
        name_args_ok: names and arguments are acceptable (``True`` for a correct abstention).
        kind: one of :data:`KINDS`.
        matched: the valid alternative the turn was matched to (label form), or ``None``; shared
            with the label's compiled form, so read it, never change it (:meth:`to_dict` copies it).
        fields: per-field results against the matched alternative, paths ``tool.field``.
        unruled: ``tool.field`` paths compared raw because no rule covers them.
        approximate: a free-text field was judged by the deterministic fallback.
        emission: the parsed turn; :attr:`emitted` and :attr:`malformed` read it.
        forbidden: the forbidden entry that was hit, if any.
        hallucinated: names of called tools that were not offered at the state (parsed calls
            and malformed calls with a readable name), in emitted order.
        reply: the reply's check against the null action's ``reply``/``must``/``must_not``,
            when the turn called nothing and the matched null action has such criteria (with
            several null actions: the first the reply meets, else the one with the fewest
            failing checks, the first among equals).
        phantom: the turn's claim that the conversation does not hold (:mod:`.claims`), or ``None``.

    """

    name_ok: bool
    name_args_ok: bool
    kind: Kind
    matched: dict[str, Any] | None = None
    fields: tuple[FieldResult, ...] = ()
    unruled: tuple[str, ...] = ()
    approximate: bool = False
    emission: Emission = Emission()
    forbidden: dict[str, Any] | None = None
    hallucinated: tuple[str, ...] = ()
    reply: ReplyCheck | None = None
    phantom: Phantom | None = None

    @property
    def emitted(self) -> tuple[dict[str, Any], ...]:
        """The emitted actions, normalised (fresh dicts on every read)."""
        return tuple(self.emission.actions())

    @property
    def malformed(self) -> tuple[str, ...]:
        """Why call attempts could not be parsed."""
        return self.emission.malformed

    @property
    def passed(self) -> bool:
        """``kind`` is ``ok`` or ``ok_no_tool``."""
        return self.kind in OK_KINDS

    @property
    def failing_fields(self) -> tuple[FieldResult, ...]:
        """The fields that failed."""
        return tuple(f for f in self.fields if not f.ok)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        return {
            "name_ok": self.name_ok,
            "name_args_ok": self.name_args_ok,
            "kind": self.kind,
            "matched": fresh(self.matched),  # records may be edited in place by hooks
            "fields": [f.to_dict() for f in self.fields],
            "unruled": list(self.unruled),
            "approximate": self.approximate,
            "emitted": list(self.emitted),
            "forbidden": self.forbidden,
            "malformed": list(self.malformed),
            "hallucinated": list(self.hallucinated),
            "reply": self.reply.to_dict() if self.reply is not None else None,
            "phantom": self.phantom.to_dict() if self.phantom is not None else None,
        }

    def one_line(self, label: Label) -> str:
        """``kind: expected {…}, emitted …`` for a failing test's report."""
        def show(a: Any) -> str:
            if isinstance(a, ParallelGroup):
                return "[" + ", ".join(show(x) for x in a.parallel) + "]"
            return "null" if a.tool is None else a.tool

        shown = [show(a) for a in label.valid_actions]
        counts = {n: shown.count(n) for n in shown}
        expected = "{" + ", ".join(n if counts[n] == 1 else f"{n} ×{counts[n]}" for n in dict.fromkeys(shown)) + "}"
        emitted = ", ".join(
            ("null" if e.get("tool") is None else str(e["tool"])) + ("(malformed)" if "malformed" in e else "")
            for e in self.emitted
        )
        extra = ""
        if self.kind == "right_tool_wrong_args":
            extra = "; " + "; ".join(f"{f.path}: {f.reason}" for f in self.failing_fields[:3])
        elif self.kind == "forbidden" and self.forbidden:
            extra = f"; forbidden: {self.forbidden.get('tool')}"
        elif self.kind == "malformed_call":
            extra = "; " + "; ".join(self.malformed[:2])
        elif self.kind == "phantom_action" and self.phantom is not None:
            extra = f"; claims {self.phantom.claim.sentence[:160]!r}: {self.phantom.why}"
        elif self.kind == "wrong_reply" and self.reply is not None:
            extra = "; " + "; ".join(self.reply.failures[:2])
        if self.hallucinated:
            extra += f"; not offered: {', '.join(dict.fromkeys(self.hallucinated))}"
        return f"{self.kind}: expected {expected}, emitted {emitted}{extra}"


def _as_label(label: Label | Mapping[str, Any]) -> Label:
    return label if type(label) is Label or isinstance(label, Label) else Label.model_validate(label)


class _Alternative:
    """A tool alternative of a label: its calls, whether their order matters, its label form."""

    __slots__ = ("_form", "action", "calls", "names", "order_matters", "plans")

    def __init__(self, action: Action | ParallelGroup) -> None:
        self.action = action
        if isinstance(action, ParallelGroup):
            self.calls, self.order_matters = tuple(action.parallel), action.order_matters
        else:
            self.calls, self.order_matters = (action,), False
        # the tool names an emitted turn must call to be matched at all (as a multiset unless ordered)
        names = [str(c.tool) for c in self.calls]
        self.names = tuple(names if self.order_matters else sorted(names))
        self._form: dict[str, Any] | None = None
        # per call: its arguments compiled against a tool schema under a rule set (usually one pair)
        self.plans: list[list[tuple[RuleSet, Mapping[str, Any], ArgsPlan]]] = [[] for _ in self.calls]

    def plan(self, j: int, tools: Mapping[str, ToolSpec], rules: RuleSet) -> ArgsPlan:
        """Call ``j``'s arguments compiled against its tool's schema in ``tools`` under ``rules``."""
        req = self.calls[j]
        tool = str(req.tool)
        schema = tools[tool].parameters if tool in tools else _NO_SCHEMA
        kept = self.plans[j]
        for r, sch, plan in kept:
            if r is rules and sch is schema:
                return plan
        if len(kept) >= _PLANS_PER_CALL:
            del kept[0]
        plan = compile_call(tool, schema, req.args, rules)
        kept.append((rules, schema, plan))
        return plan

    @property
    def form(self) -> dict[str, Any]:
        """The verdict's ``matched``: the label form, made on first use (shared: verdicts are read-only)."""
        if self._form is None:
            self._form = _alt_dict(self.action)
        return self._form


class _CompiledLabel:
    """What scoring reads from a label, taken out of the pydantic models once.

    Kept on the label itself (``Label._oracle``), so it lives and dies with it.  A cache, not
    part of the label's value: it compares equal to anything (labels stay equal after scoring),
    and a deep copy or an unpickled copy of the label starts without it.
    """

    __slots__ = ("alternatives", "forbidden", "null_form", "nulls", "source", "tools")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, label: Label) -> None:
        # the lists it was made from: a copy with other lists (``model_copy(update=...)``) gets its own
        self.source = (label.valid_actions, label.forbidden_actions)
        alternatives = []
        nulls = []
        for alt in label.valid_actions:
            if isinstance(alt, Action) and alt.tool is None:
                nulls.append((alt, _alt_dict(alt)))
            else:
                alternatives.append(_Alternative(alt))
        self.alternatives: tuple[_Alternative, ...] = tuple(alternatives)
        # the null alternatives in label order, each with its label form (the verdict's ``matched``)
        self.nulls: tuple[tuple[Action, dict[str, Any]], ...] = tuple(nulls)
        self.null_form: dict[str, Any] | None = nulls[0][1] if nulls else None  # set when null is valid
        self.forbidden: tuple[ForbiddenAction, ...] = tuple(label.forbidden_actions)
        # the tools it was last scored with, by name (a state's tools rarely change between decisions)
        self.tools: tuple[list[int], dict[str, ToolSpec]] | None = None

    def tools_by_name(self, tools: Sequence[ToolSpec | Mapping[str, Any]]) -> dict[str, ToolSpec]:
        """``tools`` by name (mappings validated as specs).

        Kept for the next decision when every tool is a spec (frozen models; mappings may change
        in place) and reused while the same spec objects are passed (by identity: specs that
        compare equal may differ, ``0`` and ``False`` in a default, say).
        """
        ids = list(map(id, tools))
        kept = self.tools
        if kept is not None and kept[0] == ids:
            return kept[1]
        specs = {}
        frozen = True
        for t in tools:
            if type(t) is not ToolSpec:
                frozen = False
                t = t if isinstance(t, ToolSpec) else ToolSpec.model_validate(t)
            specs[t.name] = t
        # the specs are held by the dict, so their identities stay theirs while kept
        self.tools = (ids, specs) if frozen and len(specs) == len(ids) else None
        return specs

    def __eq__(self, other: object) -> bool:
        return True

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return type(None), ()  # a pickled label starts without it too


def _compiled(label: Label) -> _CompiledLabel:
    """The label's scoring form, made once and kept on the label (labels are frozen models)."""
    kept = label.__pydantic_private__  # read directly: pydantic's attribute lookup for private fields is slow
    form = kept.get("_oracle") if kept else None
    if form is None or form.source[0] is not label.valid_actions or form.source[1] is not label.forbidden_actions:
        form = label._oracle = _CompiledLabel(label)
    return form


def compile_label(label: Label, tools: Sequence[ToolSpec], rules: RuleSet | None = None) -> None:
    """Compile ``label`` for scoring against ``tools`` under ``rules`` now, instead of on later uses.

    Each call of each valid alternative is compiled against its tool's schema (the tables of
    acceptable values that :func:`score` looks up), and the compiled form is kept on the label;
    calling it again costs a few lookups.  Without it a call is compiled at its second use (its
    first goes to the comparator, which costs less than compiling for a label scored once).
    The plugin calls it before the first decision on a case the run scores more than once
    (several policies, or repeats).  Scoring with another rule set or other tool specs compiles
    again (up to four per call are kept).  A call whose schema (or a rule on it) cannot be
    compiled is left as it is: scoring reaches it only when a turn calls that tool, and then
    reports the same error it would without this.

    Args:
        label: the case's label.
        tools: the tools offered at the state (the same spec objects later passed to
            :func:`score`: compiled forms are matched by the identity of the schema).
        rules: the family's rules (the same object later passed to :func:`score`); ``None`` =
            schema rules only.

    Raises:
        TypeError: ``label`` is not a :class:`Label` (a mapping would be validated into a new
            label, compiled and thrown away).

    """
    if not isinstance(label, Label):
        raise TypeError(f"compile_label needs a Label model, got {type(label).__name__}")
    lab = _compiled(label)
    specs = lab.tools_by_name(tools)
    rules = rules or _NO_RULES
    for alt in lab.alternatives:
        for j in range(len(alt.calls)):
            try:
                alt.plan(j, specs, rules).compile()
            except Exception:  # noqa: S112 - scoring meets the same error if a turn reaches this call
                continue
        alt.form  # noqa: B018 - the verdict's label form, made now too


def _hits_forbidden(call: Call, fb: ForbiddenAction, tools: Mapping[str, ToolSpec], rules: RuleSet,
                    ctx: CompareContext) -> bool:
    if call.name != fb.tool:
        return False
    if not fb.args:
        return True
    schema = tools[fb.tool].parameters if fb.tool in tools else {}
    return all(r.ok for r in compare_args(fb.tool, schema, fb.args, call.args, rules, ctx, subset=True))


def _failing(results: list[FieldResult]) -> int:
    n = 0
    for r in results:
        if not r.ok:
            n += 1
    return n


_NO_SCHEMA: dict[str, Any] = {}
_PLANS_PER_CALL = 4


def _match_group(calls: Sequence[Call], alt: _Alternative, tools: Mapping[str, ToolSpec], rules: RuleSet,
                 ctx: CompareContext) -> tuple[int, list[FieldResult]]:
    """Return (failing-field count, field results) of the best assignment of several calls.

    The calls' names are those of ``alt``'s calls: as a multiset, or in order when the order
    matters (:func:`score` checks it), so some assignment pairs every call with its tool.
    """
    required = alt.calls
    n = len(calls)
    plans = [alt.plan(j, tools, rules) for j in range(n)]
    # this turn is one use of each label call, however many pairs it is costed in
    compiled = [plan.ready() for plan in plans]

    def judge(i: int, j: int) -> list[FieldResult]:
        """Call ``i`` against label call ``j``: its field results."""
        return plans[j].run(calls[i].args, ctx) if compiled[j] else plans[j].compare(calls[i].args, ctx)

    if alt.order_matters:
        fields_: list[FieldResult] = []
        for i in range(n):
            fields_.extend(judge(i, i))
        return _failing(fields_), fields_
    costs: dict[tuple[int, int], int] = {}
    results: dict[tuple[int, int], list[FieldResult]] = {}

    def cost(i: int, j: int) -> int:
        """Failing fields of call ``i`` against call ``j``, counted without writing reasons where it can."""
        c = costs.get((i, j))
        if c is None:
            plan = plans[j]
            if calls[i].name != required[j].tool:
                c = _NAME_MISMATCH
            elif not compiled[j] or rules.calls_out:
                # not compiled, or a comparison may call a judge or a predicate: the results are
                # kept, so that no pair is judged twice
                res = results[(i, j)] = judge(i, j)
                c = _failing(res)
            else:
                c = plan.failures(calls[i].args, ctx)
            costs[(i, j)] = c
        return c

    # First fit on pairs with no failing field; calls left without one take the label calls
    # left over, in order.  The pairing is optimal when it costs no more than the lower bound
    # sum over those calls of their cheapest pair (a call paired at no cost adds nothing);
    # otherwise the Hungarian method gives the optimum.
    partner: list[int] = [-1] * n  # partner[i]: the label call emitted call i is paired with
    free = list(range(n))
    for i in range(n):
        for j in free:
            if cost(i, j) == 0:
                free.remove(j)
                partner[i] = j
                break
    unpaired = [i for i in range(n) if partner[i] < 0]
    n_fail = 0
    if unpaired:
        for i, j in zip(unpaired, free):
            partner[i] = j
        n_fail = sum(cost(i, partner[i]) for i in unpaired)
        if n_fail > sum(min(cost(i, j) for j in range(n)) for i in unpaired):
            rows, cols = _assignment()([[cost(i, j) for j in range(n)] for i in range(n)])
            for i, j in zip(rows.tolist(), cols.tolist()):
                partner[i] = j
            n_fail = sum(cost(i, partner[i]) for i in range(n))  # pairs every call with its tool
    emitted_for = [0] * n
    for i, j in enumerate(partner):
        emitted_for[j] = i
    fields_ = []
    for j, i in enumerate(emitted_for):  # only the chosen pairs are written out, in the label's order
        kept = results.get((i, j))
        fields_.extend(kept if kept is not None else judge(i, j))
    return n_fail, fields_


@functools.cache
def _assignment() -> Callable[..., Any]:
    """``scipy.optimize.linear_sum_assignment``, imported on first use (SciPy loads slowly)."""
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment  # type: ignore[no-any-return]


def _alt_dict(alt: Action | ParallelGroup) -> dict[str, Any]:
    return alt.model_dump(mode="json", exclude_defaults=True)  # keeps tool: None (required)


_NO_RULES = RuleSet()


def score(
    emitted: Any,
    label: Label | Mapping[str, Any],
    tools: Sequence[ToolSpec | Mapping[str, Any]],
    rules: RuleSet | None = None,
    context: CompareContext | None = None,
) -> Verdict:
    """Score one emitted turn against a label, then check its text's claims (:func:`phantom_check`).

    Args:
        emitted: the model turn in any shape :func:`parse_emission` reads, or an :class:`Emission`.
        label: the label (``valid_actions``, ``forbidden_actions``) as a model or a mapping.
        tools: the tools offered at the state (specs or mappings).
        rules: the family's rules; ``None`` = schema rules only.
        context: time zone, state values, messages (the conversation claims are checked
            against) and predicates.

    Returns:
        The :class:`Verdict`.

    Raises:
        pydantic.ValidationError: ``label`` or a tool spec is not valid.
        TypeError: ``emitted`` is not a readable model turn.

    """
    lab = _compiled(_as_label(label))
    specs = lab.tools_by_name(tools)
    verdict = _score_turn(emitted, lab, specs, rules, context)
    return phantom_check(verdict, specs, (context or NO_CONTEXT).messages)


def phantom_check(verdict: Verdict, tools: Mapping[str, ToolSpec], messages: Sequence[Mapping[str, Any]],
                  sandbox_changed: bool | None = None) -> Verdict:
    """The verdict with the turn's unsupported claim, if any (:func:`~.claims.find_phantom`).

    Args:
        verdict: the verdict on the turn (its emission holds the text and the calls).
        tools: the tools offered, by name.
        messages: the conversation before the turn (OpenAI-style).
        sandbox_changed: ``False`` when the turn's calls ran in a sandbox whose world did not change.

    Returns: ``verdict`` when its text claims nothing unsupported; else a copy with ``phantom`` (kind
        ``phantom_action`` if it passed or was ``wrong_reply``).
    """
    em = verdict.emission
    phantom = turn_phantom(em.text, [(c.name, c.args) for c in em.calls], tools, messages, sandbox_changed)
    if phantom is None:
        return verdict
    if verdict.passed or verdict.kind in ("wrong_reply", "phantom_action"):
        return verdict._replace(kind="phantom_action", name_args_ok=False, phantom=phantom)
    return verdict._replace(phantom=phantom)


def _score_turn(emitted: Any, lab: _CompiledLabel, specs: dict[str, ToolSpec], rules: RuleSet | None,
                context: CompareContext | None) -> Verdict:
    """Score one emitted turn against a compiled label (:func:`score` without the claims' check)."""
    rules = rules or _NO_RULES
    ctx = context or NO_CONTEXT
    em = (emitted if isinstance(emitted, Emission)
          else parse_emission(emitted, offered=specs.keys(), aliases=tool_aliases(specs.values())))

    hallucinated = _not_offered(em, specs)
    if lab.forbidden:
        for call in em.calls:
            for fb in lab.forbidden:
                if _hits_forbidden(call, fb, specs, rules, ctx):
                    return Verdict(False, False, "forbidden", emission=em, forbidden=fb.model_dump(exclude_none=True),
                                   hallucinated=hallucinated)
        for name in em.malformed_names:
            for fb in lab.forbidden:
                if name and fb.tool == name and not fb.args:
                    return Verdict(False, False, "forbidden", emission=em, forbidden=fb.model_dump(exclude_none=True),
                                   hallucinated=hallucinated)
    if em.malformed:
        return Verdict(_malformed_name_ok(em, lab), False, "malformed_call", emission=em, hallucinated=hallucinated)
    if not em.calls:
        if lab.nulls:
            return _score_reply(em, lab.nulls, ctx)
        return Verdict(False, False, "none_when_tool_needed", emission=em)

    best: tuple[int, _Alternative, list[FieldResult]] | None = None
    calls = em.calls
    called: tuple[str, ...]
    called_set: tuple[str, ...]
    if len(calls) == 1:
        called = called_set = (calls[0].name,)
    else:
        called = tuple(c.name for c in calls)
        called_set = tuple(sorted(called))
    for alt in lab.alternatives:
        if alt.names != (called if alt.order_matters else called_set):
            continue  # no assignment pairs every call with a call of the same tool
        if len(calls) == 1:  # one call against one: no assignment to choose
            res = alt.plan(0, specs, rules).run(calls[0].args, ctx)
            n_fail = _failing(res)
        else:
            n_fail, res = _match_group(calls, alt, specs, rules, ctx)
        if best is None or n_fail < best[0]:
            best = (n_fail, alt, res)
            if n_fail == 0:
                break
    if best is None:
        kind: Kind = "tool_when_none_needed" if lab.null_form is not None else "wrong_tool"
        return Verdict(False, False, kind, emission=em, hallucinated=hallucinated)
    n_fail, alt, res = best
    unruled: dict[str, None] = {}
    approximate = False
    for r in res:
        if r.rule == "raw":
            unruled[_strip(r.path)] = None
        approximate = approximate or r.approximate
    return Verdict(True, n_fail == 0, "ok" if n_fail == 0 else "right_tool_wrong_args", alt.form, tuple(res),
                   tuple(unruled), approximate, em)


def _score_reply(em: Emission, nulls: Sequence[tuple[Action, dict[str, Any]]], ctx: CompareContext) -> Verdict:
    """The verdict on a turn that called nothing, where null is valid (DESIGN.md scoring rule 6).

    The reply passes when it meets any null alternative: one without reply criteria accepts any
    reply; the others are judged in label order until one passes, which is the matched action.
    When none passes, the matched action is the closest one: the fewest failing checks, the
    first in label order among equals.
    """
    for null, form in nulls:
        if not null.reply_criteria:
            return Verdict(True, True, "ok_no_tool", matched=form, emission=em)
    closest: tuple[ReplyCheck, dict[str, Any]] | None = None
    approximate = False
    for null, form in nulls:
        check = judge_reply(em.text, null.reply, null.must, null.must_not, ctx, null.reason)
        approximate = approximate or check.approximate
        if check.ok:
            return Verdict(True, True, "ok_no_tool", matched=form, approximate=approximate, emission=em, reply=check)
        if closest is None or len(check.failures) < len(closest[0].failures):
            closest = (check, form)
    assert closest is not None  # ``nulls`` is not empty
    check, form = closest
    return Verdict(True, False, "wrong_reply", matched=form, approximate=approximate, emission=em, reply=check)


def _not_offered(em: Emission, specs: Mapping[str, ToolSpec]) -> tuple[str, ...]:
    """Names of the turn's calls (parsed, or malformed with a readable name) to tools not offered."""
    if not specs:  # no tools known at the state: nothing can be told apart
        return ()
    names = [c.name for c in em.calls] + [n for n in em.malformed_names if n]
    return tuple(n for n in names if n not in specs)


def _malformed_name_ok(em: Emission, lab: _CompiledLabel) -> bool:
    """The name level of a turn holding malformed calls (README, "Malformed calls").

    A call sent through the tool-call channel whose name is readable but whose arguments are not
    a JSON object (truncated or trailing JSON, a list, a number) names its tool: the name level
    asks only whether the turn's tool names (its parsed calls and such calls) are one valid
    alternative's.  A call without a name, or one written into the text channel, was never
    made as a call: its name level fails.
    """
    names = [c.name for c in em.calls]
    for name, reason in zip(em.malformed_names, em.malformed):
        if not name or not reason.startswith(_ARGUMENTS_OF):
            return False
        names.append(name)
    ordered, as_set = tuple(names), tuple(sorted(names))
    return any(alt.names == (ordered if alt.order_matters else as_set) for alt in lab.alternatives)


# the reasons emission gives a call-channel call whose name is readable and whose arguments are not
_ARGUMENTS_OF = "arguments of "
_INDEX = re.compile(r"\[\d+\]")


def _strip(path: str) -> str:
    return _INDEX.sub("", path) if "[" in path else path
