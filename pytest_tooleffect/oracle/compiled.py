"""A label call compiled against its tool's schema: the fast path for calls scored many times.

:class:`ArgsPlan` gives the same results as :func:`~.compare.compare_args`.  Each field whose
verdict depends on the value alone (a scalar, or an array of scalars, with no comparator or
predicate in its rule) holds a table of its acceptable values by canonical form
(:class:`_Accept`), so judging an emitted value is one canonical form and one dictionary
lookup; anything else, and any value the table does not accept, goes to the comparator
(:class:`~.compare.Comparer`), which says why.  Names used per value are module globals here
(no attribute lookups through other modules on the hot path).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pytest_tooleffect.oracle.compare import Comparer, FieldResult
from pytest_tooleffect.oracle.context import NO_CONTEXT, CompareContext
from pytest_tooleffect.oracle.rules import RuleSet
from pytest_tooleffect.oracle.schema import Node, members, schema_plan
from pytest_tooleffect.oracle.values import (
    ANY_OF,
    JSON_TYPES,
    MISSING,
    OMITTED,
    SCALAR_TYPES,
    close_pair,
    is_mapping,
    is_number,
    json_key,
    near,
    normaliser,
    same_json,
)

__all__ = ["ArgsPlan", "compile_call"]


class _Form(NamedTuple):
    """How a scalar schema position is judged by value alone (see :func:`_scalar_form`)."""

    canon: Callable[[Any], Any]  # value -> canonical form, or MISSING when the type cannot match
    rule: str  # the rule name a passing result carries (null: ``null_rule``)
    null_rule: str
    tolerant: bool  # numbers: equal within tolerance without equal canonical forms
    enum: frozenset[Any] | None  # the enum's members as JSON keys (:func:`members`)


def _scalar_form(node: Node) -> _Form | None:
    """The :class:`_Form` of a scalar position, or ``None`` when only the comparator can judge it.

    Canonical forms are chosen so that equal forms mean the comparator accepts the value:
    strings through the field's normalisers (raw without), numbers by value, enum members
    through NFKC (then checked for membership), booleans as themselves; null is its own form.
    Positions with a comparator or predicates in their rule, dates and date-times, and types
    that depend on the value are left to the comparator.
    """
    rule = node.rule
    if rule is not None and (rule.compare is not None or rule.predicates or rule.numeric_strings):
        return None
    if node.temporal is not None or node.kind not in ("string", "number", "integer", "boolean"):
        return None
    null_rule = node.src or "schema:null"
    if node.enum is not None:
        if not isinstance(node.enum, list) or not all(_scalar(v) for v in node.enum):
            return None
        return _Form(_canon_enum, "schema:enum", null_rule, False, members(node))
    if node.kind == "boolean":
        return _Form(_canon_bool, node.src or "schema:boolean", null_rule, False, None)
    if node.kind in ("number", "integer"):
        canon = _canon_int if node.kind == "integer" else _canon_number
        return _Form(canon, node.src or f"schema:{node.kind}", null_rule, True, None)
    if node.str_raw:
        return _Form(_canon_raw, "raw", null_rule, False, None)
    norm = normaliser(node.str_steps or ())
    return _Form(lambda g: norm(g) if type(g) is str else MISSING, node.str_src, null_rule,
                 False, None)


_NULL = object()  # canonical form of null


def _scalar(g: Any) -> bool:
    return type(g) in SCALAR_TYPES


def _canon_raw(g: Any) -> Any:
    return g if type(g) is str else MISSING


def _canon_bool(g: Any) -> Any:
    return g if type(g) is bool else MISSING


def _canon_number(g: Any) -> Any:
    return g if type(g) is int or (type(g) is float and g == g) else MISSING


def _canon_int(g: Any) -> Any:
    return g if type(g) is int or (type(g) is float and g.is_integer()) else MISSING


def _canon_enum(g: Any) -> Any:
    if type(g) is str:
        return unicodedata.normalize("NFKC", g)
    if type(g) is bool:
        return (bool, g)  # a boolean member is never a number (True == 1 in Python)
    return g if type(g) in (int, float) and g == g else MISSING


class _Accept:
    """The acceptable values of one field (a scalar, or an array of scalars), by canonical form.

    Judging an emitted value then takes one canonical form and one dictionary lookup instead of
    a comparison per alternative.  A key holds the first alternative with that form, and the
    results the comparator would give for it, less the emitted value.  A hit is the
    comparator's verdict; a miss goes to the comparator, which says why.
    """

    __slots__ = ("canon", "default", "enum", "exact", "first", "item_canon", "item_paths", "numbers", "omit_at",
                 "omitted", "path", "tolerant", "values")

    def __init__(self, path: str, canon: Callable[[Any], Any], item_canon: Callable[[Any], Any],
                 values: dict[Any, tuple[int, Any, Any]], first: Any, omitted: tuple[int, Any] | None,
                 default: Any, form: _Form, array_rule: str | None) -> None:
        self.path = path
        self.canon = canon
        self.item_canon = item_canon
        self.first = first  # the first alternative that is not "$omitted" (MISSING: none)
        self.values = values  # canonical form -> (alternative index, alternative, rule or item rules)
        self.omit_at: int
        self.omitted: Any
        self.omit_at, self.omitted = omitted if omitted is not None else (-1, None)
        self.default = default
        self.enum = form.enum
        self.tolerant = form.tolerant
        # arrays: the rule of an empty array and each item's display path
        self.item_paths: tuple[str, ...] | None = None
        if array_rule is not None:
            longest = max((len(alt) for _, alt, _ in values.values() if isinstance(alt, list)), default=0)
            self.item_paths = tuple(f"{path}[{i}]" for i in range(longest))
        self.numbers = tuple(alt for _, alt, _ in values.values() if is_number(alt))  # for tolerance
        # a scalar emitted exactly as an alternative is written (same type and value): its results,
        # made once by :meth:`results` itself and shared (results are immutable, scalars too)
        self.exact: dict[Any, tuple[type, list[FieldResult]]] = {}
        for _, alt, _ in values.values():
            if type(alt) in SCALAR_TYPES and not (type(alt) is float and alt == 0):  # -0.0 == 0.0: keep the sign
                same = self.results(alt)
                if same is not None:
                    self.exact.setdefault(alt, (type(alt), same))

    def _same(self, g: Any) -> list[FieldResult] | None:
        """The results made once for ``g`` when it is an alternative as written (same type and value)."""
        if type(g) in SCALAR_TYPES:
            same = self.exact.get(g)
            if same is not None and same[0] is type(g):
                return same[1]
        return None

    def _hit(self, g: Any) -> tuple[int, Any, Any] | None:
        key = self.canon(g)
        if key is MISSING:
            return None
        hit = self.values.get(key)
        if hit is None:
            return None
        if self.enum is not None and g is not None and not (json_key(g) in self.enum if self.item_paths is None
                                                                 else all(x is None or json_key(x) in self.enum
                                                                          for x in g)):
            return None
        return hit

    def results(self, g: Any) -> list[FieldResult] | None:
        """The comparator's results for an acceptable emitted value ``g``, else ``None`` (a shared list: read it)."""
        same = self._same(g)
        if same is not None:
            return same
        hit = self._hit(g)
        if hit is None:
            return None
        index, alt, rule = hit
        if 0 <= self.omit_at < index and same_json(g, self.default):  # the earlier "$omitted" alternative takes it
            return [FieldResult(self.path, True, "label:$any_of", "", self.omitted, None)]
        if self.item_paths is None or alt is None:
            return [FieldResult(self.path, True, rule, "", alt, g)]
        if not alt:
            return [FieldResult(self.path, True, rule, "", alt, g)]
        paths = self.item_paths
        return [FieldResult(paths[i], True, rule[i], "", a, b) for i, (a, b) in enumerate(zip(alt, g))]

    def failing(self, g: Any) -> int | None:
        """How many failing results the comparator gives ``g``; ``None`` when only it can tell.

        Counts failing fields without writing their reasons.  Unknown for a number outside the
        keys but within tolerance of an alternative, for an array of tolerant numbers, and for
        anything that is not a JSON value (a ``str`` subclass, say).  Otherwise a value outside
        the keys fails once, unless an ``$omitted`` alternative takes it as the default; an
        array fails once per differing item against the first alternative (the one the
        comparator reports when none matches), or once when it is not an array of that length.
        """
        if self._same(g) is not None or self._hit(g) is not None:
            return 0
        if self.tolerant and (type(g) is list or is_number(g) and any(near(g, a) is not False for a in self.numbers)):
            return None  # within tolerance of an alternative: only the comparator can tell
        if type(g) not in JSON_TYPES or (type(g) is list and any(type(x) not in JSON_TYPES for x in g)):
            return None
        if self.omitted is not None and same_json(g, self.default):
            return 0
        first = self.first
        if self.item_paths is None or type(g) is not list or type(first) is not list or len(g) != len(first):
            return 1
        canon, enum = self.item_canon, self.enum
        return sum(not (canon(b) == canon(a) is not MISSING and (enum is None or b is None or json_key(b) in enum))
                   for a, b in zip(first, g))


def _accepting(node: Node, e: Any, path: str, items_of: Callable[[Node], Node]) -> _Accept | None:
    """The :class:`_Accept` of a field whose label value (or ``$any_of`` alternatives) is ``e``.

    ``None`` when the field is not judged by value alone (:func:`_scalar_form`): an object, an
    array compared as a set or holding more than scalars, or an alternative the canonical forms
    cannot express.
    """
    any_of = is_mapping(e) and ANY_OF in e
    alts = e[ANY_OF] if any_of else [e]
    if not isinstance(alts, list):
        return None
    array_rule: str | None = None
    if node.kind == "array":
        rule = node.rule
        if node.enum is not None or node.temporal is not None or (rule is not None and (
                rule.compare is not None or rule.predicates or rule.order == "any" or rule.numeric_strings)):
            return None
        form = _scalar_form(items_of(node))
        array_rule = rule.source if rule is not None else "schema:array"
    else:
        form = _scalar_form(node)
    if form is None:
        return None
    item = form.canon

    def canon_item(g: Any) -> Any:
        return _NULL if g is None else item(g)

    def canon_array(g: Any) -> Any:
        if type(g) is not list:
            return MISSING
        key = tuple(map(canon_item, g))
        return MISSING if MISSING in key else key

    def canon_field(g: Any) -> Any:
        return _NULL if g is None else canon_array(g)

    canon = canon_item if array_rule is None else canon_field
    values: dict[Any, tuple[int, Any, Any]] = {}
    omitted: tuple[int, Any] | None = None
    first: Any = MISSING
    seen: list[Any] = []
    for i, alt in enumerate(alts):
        if any_of and is_mapping(alt) and alt.get(OMITTED):
            omitted = omitted or (i, alt)
            continue
        if first is MISSING:
            first = alt
        if alt is None:
            values.setdefault(_NULL, (i, None, node.src or "schema:null"))
            continue
        items = alt if array_rule is not None and type(alt) is list else [alt]
        if not all(_scalar(x) and not (type(x) is float and x != x) for x in items):
            return None
        key = canon(alt)
        if key is MISSING:
            return None  # an alternative the field's type can never accept: the comparator says so
        if array_rule is None:
            rule_of: Any = form.rule
        elif not alt:
            rule_of = array_rule
        else:
            rule_of = tuple(form.null_rule if x is None else form.rule for x in alt)
        values.setdefault(key, (i, alt, rule_of))
        seen.extend(items)
    if form.tolerant and close_pair(seen):
        return None  # tolerance could let an earlier alternative take a value equal to a later one
    return _Accept(path, canon, canon_item, values, first, omitted, node.default, form, array_rule)


@dataclass(slots=True, eq=False)
class _Key:
    """One key of a compiled label call."""

    key: str
    node: Node
    path: str  # display path, ``tool.key``
    expected: Any  # the label's value, the schema default filled in
    default: Any  # what an omitted emitted value reads as
    required: bool
    accept: _Accept | None
    missing: list[FieldResult] | None  # required: the comparator's result when the key is absent (one failure)
    omitted: bool  # the label leaves out a key with a schema default: an omitted emitted key is compared with nothing


class ArgsPlan:
    """A label call's arguments compiled against its tool's schema under a rule set.

    :meth:`run` gives the same results as :func:`compare_args` (paths prefixed ``tool.``), with
    each field judged by value alone looked up by canonical form (:class:`_Accept`); a field the
    lookup does not accept, and every object whose schema has fields judged together, goes to
    the comparator.  Built by :func:`compile_call`.
    """

    __slots__ = ("declared", "expected", "keys", "node", "rules", "tool", "used")

    def __init__(self, tool: str, node: Node, expected: Mapping[str, Any], rules: RuleSet) -> None:
        self.tool, self.node, self.expected, self.rules = tool, node, expected, rules
        self.declared = None if node.open else node.props.keys()  # the keys a closed schema allows
        self.keys: tuple[_Key, ...] | None = None  # built on the second use (a label scored once never needs them)
        self.used = False

    def _build(self, now: bool = False) -> tuple[_Key, ...] | None:
        """The compiled keys (from the second use, or ``now``), else ``None``: the comparator judges."""
        tool, node, expected, rules = self.tool, self.node, self.expected, self.rules
        if not (self.used or now) or node.composites:
            self.used = True
            return None
        comparer = Comparer(tool, rules, NO_CONTEXT)
        exp = comparer.with_defaults(node, expected) if node.defaults else expected
        keys = []
        for key, sub in comparer.judged(node, expected):
            e = exp.get(key, MISSING)
            default = sub.default if key in node.props and node.defaults else MISSING
            path = f"{tool}.{key}"
            try:
                accept = _accepting(sub, e, path, comparer.items) if e is not MISSING else None
            except Exception:  # e.g. an array's item schema that cannot be read: left to the comparator,
                accept = None  # which meets the same error when a value reaches it
            required = key in node.required
            omitted = default is not MISSING and key not in expected
            missing = (comparer.both_omit(sub, path, True) if omitted else
                       comparer.key(sub, e, default, path, True, True)) if required else None
            keys.append(_Key(key, sub, path, e, default, required, accept, missing, omitted))
        self.keys = tuple(keys)
        return self.keys

    def ready(self) -> bool:
        """Count one use; whether the compiled keys exist now (they are built at the second use)."""
        return self.keys is not None or self._build() is not None

    def compile(self) -> ArgsPlan:
        """Build the compiled keys now instead of at the second use; returns the plan."""
        if self.keys is None:
            self._build(now=True)
        return self

    def run(self, got: Mapping[str, Any], ctx: CompareContext | None = None) -> list[FieldResult]:
        """Compare the emitted arguments ``got`` with the label call's.

        Args:
            got: the emitted arguments.
            ctx: state for predicates and time zones; ``None`` = none.

        Returns:
            One :class:`~.compare.FieldResult` per judged field (paths ``tool.field``), as
            :func:`~.compare.compare_args` gives them; read it, never change it (lists of
            results may be shared with the plan).

        Raises:
            LookupError: a predicate reads a state value or user callable that does not exist.

        """
        node = self.node
        keys = self.keys if self.keys is not None else self._build()
        if keys is None:
            return self.compare(got, ctx)
        comparer: Comparer | None = None
        results: list[FieldResult] = []
        if self.declared is not None and not got.keys() <= self.declared:
            comparer = Comparer(self.tool, self.rules, ctx or NO_CONTEXT)
            results.extend(comparer.undeclared(node, got, self.tool))
        for k in keys:
            g = got.get(k.key, MISSING)
            if g is MISSING:
                if k.missing is not None:
                    results.extend(k.missing)
                    continue
            elif k.accept is not None:
                hit = k.accept.results(g)
                if hit is not None:
                    results.extend(hit)
                    continue
            if comparer is None:
                comparer = Comparer(self.tool, self.rules, ctx or NO_CONTEXT)
            absent = g is MISSING
            if absent and k.omitted:
                results.extend(comparer.both_omit(k.node, k.path, k.required))
                continue
            results.extend(comparer.key(k.node, k.expected, k.default if absent else g, k.path, k.required, absent))
        return results

    def compare(self, got: Mapping[str, Any], ctx: CompareContext | None = None) -> list[FieldResult]:
        """:meth:`run` through the comparator alone (no use is counted towards compiling)."""
        return Comparer(self.tool, self.rules, ctx or NO_CONTEXT).object(self.node, self.expected, got, self.tool)

    def failures(self, got: Mapping[str, Any], ctx: CompareContext | None = None) -> int:
        """How many of :meth:`run`'s results would fail, without writing them where it can.

        Used to cost the pairs of a parallel turn's assignment; the chosen pairs are then run.

        Args:
            got: the emitted arguments.
            ctx: state for predicates and time zones; ``None`` = none.

        Returns:
            The number of failing fields.

        Raises:
            LookupError: a predicate reads a state value or user callable that does not exist.

        """
        keys = self.keys if self.keys is not None else self._build()
        if keys is None:
            return sum(not r.ok for r in self.run(got, ctx))
        node = self.node
        n = 0
        if self.declared is not None and not got.keys() <= self.declared:
            n += sum(key not in node.props for key in got)
        comparer: Comparer | None = None
        for k in keys:
            g = got.get(k.key, MISSING)
            if g is MISSING:
                if k.missing is not None:
                    n += 1
                    continue
            elif k.accept is not None:
                failing = k.accept.failing(g)
                if failing is not None:
                    n += failing
                    continue
            if comparer is None:
                comparer = Comparer(self.tool, self.rules, ctx or NO_CONTEXT)
            absent = g is MISSING
            if absent and k.omitted:
                n += sum(not r.ok for r in comparer.both_omit(k.node, k.path, k.required))
                continue
            n += sum(not r.ok for r in comparer.key(k.node, k.expected, k.default if absent else g, k.path,
                                                    k.required, absent))
        return n


def compile_call(tool: str, schema: Mapping[str, Any], expected: Mapping[str, Any], rules: RuleSet) -> ArgsPlan:
    """A new :class:`ArgsPlan` of the label arguments ``expected`` for ``tool``.

    Args:
        tool: the tool's name.
        schema: its JSON-schema ``parameters`` (compiled once per rule set, by identity: it must
            not change afterwards).
        expected: the label call's arguments (values may be ``{"$any_of": [...]}``).
        rules: the family's rules.

    Returns:
        The plan; its lookup tables are built at its second use, or by :meth:`ArgsPlan.compile`.

    """
    return ArgsPlan(tool, schema_plan(tool, schema or {}, rules), expected, rules)
