"""Argument comparison, field by field (DESIGN.md scoring rule 4).

Both sides are read through the tool's JSON schema: schema defaults fill omitted fields,
numbers compare by value at every nesting level (``12 == 12.0``; a bool is never a number),
enums exactly, ``format: date`` / ``date-time`` as dates and instants (a naive time is read in
the user's zone), arrays in order unless a rule says ``order: any`` (then as a multiset, by
optimal one-to-one matching), objects recursively.  Keys the schema does not declare fail the
call.  A leaf that neither the family's rules nor the schema's type rules (string fields with
no enum or format) is compared raw and listed as *unruled*.

The schema is compiled once per rule set (:mod:`.schema`); values are read through
:mod:`.values`; predicates are looked up in :mod:`.predicates`.  The compiled fast path for a
label call scored many times is :mod:`.compiled`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from pytest_tooleffect.oracle.context import NO_CONTEXT, CompareContext
from pytest_tooleffect.oracle.predicates import evaluate
from pytest_tooleffect.oracle.rules import Rule, RuleSet
from pytest_tooleffect.oracle.schema import DYNAMIC, Node, compile_node, join_path, members, schema_plan, schema_type
from pytest_tooleffect.oracle.values import (
    ANY_OF,
    MISSING,
    OMITTED,
    fresh,
    is_mapping,
    is_number,
    json_key,
    near,
    normalise_string,
    parse_date,
    parse_datetime,
    same_instant,
    same_json,
    tokens,
)

__all__ = ["NO_RULES", "Comparer", "FieldResult", "compare_args"]

#: The rules of a comparison given none: schema rules only.
NO_RULES = RuleSet()


class FieldResult(NamedTuple):
    """The verdict on one field (or group of fields judged together); immutable.

    Attributes:
        path: ``tool.field`` path, array items as ``[i]``, a group as ``a+b``.
        ok: the emitted value is acceptable.
        rule: what judged it: ``rule:<key>``, ``default:<type>``, ``schema:<type>``, or ``raw``.
        reason: why it failed (empty when ok).
        expected: the label's value (``None`` when the label leaves it to predicates).
        got: the emitted value.
        approximate: judged by the deterministic free-text fallback instead of a judge.

    """

    path: str
    ok: bool
    rule: str
    reason: str = ""
    expected: Any = None
    got: Any = None
    approximate: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        d = {"path": self.path, "ok": self.ok, "rule": self.rule}
        if self.reason:
            d["reason"] = self.reason
        d["expected"] = fresh(self.expected)  # records may be edited in place: never hand out the label's values
        d["got"] = fresh(self.got)
        if self.approximate:
            d["approximate"] = True
        return d


class Comparer:
    """Compares a label's values with emitted ones, walking a tool's compiled schema (:class:`Node`).

    One per comparison of a call; :func:`compare_args` is its entry point, and the compiled
    path (:mod:`.compiled`) calls it for every field its lookups do not settle.

    Args:
        tool: the tool's name (rules are looked up as ``tool.path``).
        rules: the family's rules.
        ctx: the state for predicates, time zones and the free-text judge.

    """

    def __init__(self, tool: str, rules: RuleSet, ctx: CompareContext) -> None:
        self.tool = tool
        self.rules = rules
        self.ctx = ctx

    # -- entry points
    def object(self, node: Node, expected: Mapping[str, Any], got: Mapping[str, Any],
               path: str, subset: bool = False) -> list[FieldResult]:
        props = node.props
        required = node.required
        results: list[FieldResult] = []
        open_schema = node.open
        static_paths = path == node.rpath  # not inside an array: display paths are the rule paths
        if not subset and not open_schema and not got.keys() <= props.keys():
            results.extend(self.undeclared(node, got, path))
        exp = self.with_defaults(node, expected) if node.defaults else expected
        emi = self.with_defaults(node, got) if node.defaults else got
        done: set[str] = set()
        for names, rule in node.composites:
            if subset and not any(n in expected for n in names):
                continue
            done.update(names)
            judged = self._composite(node, names, rule, exp, emi, path)
            if judged is not None:
                results.append(judged)
        keyed = props.items() if not subset and expected.keys() <= props.keys() else self.judged(node, expected, subset)
        for key, sub in keyed:
            if done and key in done:
                continue
            fpath = sub.rpath if static_paths else join_path(path, key)
            if sub.default is not MISSING and key not in expected and key not in got:
                results.extend(self.both_omit(sub, fpath, key in required))
                continue
            e, g = exp.get(key, MISSING), emi.get(key, MISSING)
            results.extend(self.key(sub, e, g, fpath, key in required, not subset and key not in got))
        return results

    def both_omit(self, sub: Node, path: str, required: bool) -> list[FieldResult]:
        """A key with a schema default that neither the label nor the call sends.

        Both sides are the same call at execution, so nothing is compared (a default that breaks
        its own schema, common in real tool specs, must not fail an identical call); a required
        key is still missing, and a rule's predicates still judge the default.
        """
        if required:
            return self.key(sub, MISSING, MISSING, path, True, True)
        rule = sub.rule
        if rule is not None and rule.predicates and rule.compare != "any":
            return [self._predicates(rule, sub.schema, sub.default, path, None)]
        return []

    def judged(self, node: Node, expected: Mapping[str, Any], subset: bool = False) -> Iterator[tuple[str, Node]]:
        """The keys of an object that are judged, in order, with their compiled nodes.

        The schema's keys, then the label's keys the schema does not declare; with ``subset``,
        the label's keys alone.
        """
        props = node.props
        if subset:
            keys: Iterable[str] = expected
        elif expected.keys() <= props.keys():
            keys = props
        else:
            keys = dict.fromkeys([*props, *expected])
        for key in keys:
            sub = props.get(key)
            if sub is None:
                if not node.open and key not in expected:
                    continue
                sub = self.extra(node, key)
            yield key, sub

    def undeclared(self, node: Node, got: Mapping[str, Any], path: str) -> list[FieldResult]:
        """A failing result for each emitted key that ``node``'s (closed) schema does not declare."""
        return [FieldResult(join_path(path, key), False, "schema", "argument not in the tool's schema", None, value)
                for key, value in got.items() if key not in node.props]

    def key(self, sub: Node, e: Any, g: Any, path: str, required: bool, absent: bool) -> list[FieldResult]:
        """One key of an object: the label's ``e`` against the emitted ``g``, defaults filled in.

        ``absent``: the key is not in the emitted arguments (before defaults were filled in).
        """
        if required and absent:
            # a required argument must be sent even when the schema gives it a default
            return [FieldResult(path, False, "schema", "required argument missing", None if e is MISSING else e, None)]
        if is_mapping(e) and ANY_OF in e:
            return self._alternatives(sub, e[ANY_OF], g, path, required)
        return self._field(sub, e, g, path, required)

    def extra(self, node: Node, key: str) -> Node:
        """The compiled node of ``key``, which ``node``'s schema does not declare (compiled once)."""
        sub = node.extras.get(key)
        if sub is None:
            rpath = join_path(node.rpath, key)
            sub = node.extras[key] = compile_node(self.tool, {}, rpath, self.rules.lookup(self.tool, rpath), self.rules)
        return sub

    # -- helpers
    @staticmethod
    def with_defaults(node: Node, values: Mapping[str, Any]) -> Mapping[str, Any]:
        """``values`` with the schema defaults of ``node``'s keys it leaves out (``values`` itself when none)."""
        missing = [(k, v) for k, v in node.defaults if k not in values]
        if not missing:
            return values
        out = dict(values)
        out.update(missing)
        return out

    def _alternatives(self, node: Node, alts: Sequence[Any], got: Any, path: str,
                      required: bool) -> list[FieldResult]:
        best: list[FieldResult] | None = None
        for alt in alts:
            if is_mapping(alt) and alt.get(OMITTED):
                if got is MISSING or same_json(got, node.default):
                    return [FieldResult(path, True, "label:$any_of", "", alt, None)]
                continue
            res = self._field(node, alt, got, path, required)
            if all(r.ok for r in res):
                return res
            if best is None:
                best = res
        if best is None:
            return [FieldResult(path, False, "label:$any_of", "field present but the label allows only omission",
                                list(alts), None if got is MISSING else got)]
        return [FieldResult(r.path, r.ok, r.rule, r.reason + " (no alternative matched)" if not r.ok else "",
                            list(alts) if r.path == path else r.expected, r.got, r.approximate) for r in best]

    def _field(self, node: Node, e: Any, g: Any, path: str, required: bool) -> list[FieldResult]:
        rule = node.rule
        if rule is None:  # schema rules only
            if g is MISSING:
                if e is MISSING and required:
                    return [FieldResult(path, False, "schema", "required argument missing", None, None)]
                if e is MISSING:
                    return []
                return [FieldResult(path, False, "schema", "argument missing", e, None)]
            if e is MISSING:
                return [FieldResult(path, False, "label", "argument the label leaves out (and no default)", None, g)]
            return self.value(node, e, g, path)
        compare = rule.compare
        shown_g = None if g is MISSING else g
        shown_e = None if e is MISSING else e
        if g is MISSING:
            if e is MISSING:
                if required and compare not in ("any", "none"):
                    return [FieldResult(path, False, "schema", "required argument missing", None, None)]
                if rule.predicates and compare != "any":
                    return [FieldResult(path, False, rule.source, "argument missing; predicates need it")]
                return []
            return [FieldResult(path, False, rule.source, "argument missing", shown_e, None)]
        if compare == "any":
            return [self._predicates(rule, node.schema, g, path, shown_e) if rule.predicates
                    else FieldResult(path, True, rule.source, "", shown_e, shown_g)]
        if e is MISSING:
            if rule.predicates or compare == "none":
                return [self._predicates(rule, node.schema, g, path, None)]
            return [FieldResult(path, False, "label", "argument the label leaves out (and no default)", None, g)]
        results = self.value(node, e, g, path)
        if rule.predicates and all(r.ok for r in results):
            return [self._predicates(rule, node.schema, g, path, e)]
        return results

    def value(self, node: Node, e: Any, g: Any, path: str) -> list[FieldResult]:
        """Compare one value at ``node``; returns the leaf results."""
        compare = node.compare
        src = node.src
        if compare == "none" or compare == "any":  # array items ruled any or none (a field's any is in _field)
            return [FieldResult(path, True, src, "", e, g)]
        if compare == "exact" and not is_mapping(e):  # a scalar as written: no normalisers, no tolerance
            if isinstance(e, list) and isinstance(g, list):
                return self._array(node, e, g, path)  # item by item (the items exact unless ruled otherwise)
            ok = same_json(g, e)
            return [FieldResult(path, ok, src, "" if ok else "different value (compared exactly)", e, g)]
        kind = schema_type(node.schema, g) if node.kind is DYNAMIC else node.kind
        if compare == "free_text":
            return [self._free_text(node.rule, e, g, path)]
        if node.temporal is not None:
            return [self._temporal(node.temporal, e, g, path, node.temporal_src)]
        if e is None or g is None:
            ok = e is None and g is None
            return [FieldResult(path, ok, src or "schema:null", "" if ok else "null against a value", e, g)]
        if node.enum is not None:
            key = json_key(g)
            member = key in members(node)
            same = key == json_key(e) or (isinstance(g, str) and isinstance(e, str)
                                           and unicodedata.normalize("NFKC", g) == unicodedata.normalize("NFKC", e))
            ok = member and same
            reason = "" if ok else "different enum value" if member else "not one of the schema's enum values"
            return [FieldResult(path, ok, "schema:enum", reason, e, g)]
        if (compare == "number" or kind == "number" or kind == "integer"
                or (kind is None and is_number(e) and node.rule is not None and node.rule.numeric_strings)):
            return [self._number(node.rule, kind, e, g, path, src or f"schema:{kind or 'number'}")]
        if compare == "boolean" or kind == "boolean":
            ok = isinstance(g, bool) and isinstance(e, bool) and g == e
            reason = "" if ok else ("not a boolean" if not isinstance(g, bool) else "different value")
            return [FieldResult(path, ok, src or "schema:boolean", reason, e, g)]
        if kind == "array" or (kind is None and isinstance(e, list) and isinstance(g, list)):
            return self._array(node, e, g, path)
        if kind == "object" or (kind is None and is_mapping(e) and is_mapping(g)):
            if not is_mapping(g):
                return [FieldResult(path, False, "schema:object", "not an object", e, g)]
            if not is_mapping(e):
                return [FieldResult(path, False, "schema:object", "label value is not an object", e, g)]
            return self.object(node, e, g, path)
        if compare == "string" or kind == "string" or (kind is None and isinstance(e, str)):
            if not isinstance(g, str):
                return [FieldResult(path, False, src or "schema:string", "not a string", e, g)]
            steps = node.str_steps
            if node.str_raw:
                ok = g == e
                return [FieldResult(path, ok, "raw", "" if ok else "different string (compared raw: no rule)", e, g)]
            ok = g == e or normalise_string(g, steps or ()) == normalise_string(str(e), steps or ())
            return [FieldResult(path, ok, node.str_src, "" if ok else "different string after normalisation", e, g)]
        ok = same_json(g, e)
        return [FieldResult(path, ok, src or "raw", "" if ok else "different value (compared raw: no rule)", e, g)]

    def _number(self, rule: Rule | None, kind: str | None, e: Any, g: Any, path: str, src: str) -> FieldResult:
        gv = g
        if isinstance(g, str) and rule is not None and rule.numeric_strings:
            try:
                gv = float(g)
            except ValueError:
                return FieldResult(path, False, src, "not a number", e, g)
        if not is_number(gv):
            return FieldResult(path, False, src, f"a {type(g).__name__} where a number is declared", e, g)
        if kind == "integer" and isinstance(gv, float) and not gv.is_integer():
            return FieldResult(path, False, src, "not an integer", e, g)
        if not is_number(e):
            return FieldResult(path, False, src, "label value is not a number", e, g)
        ok = near(gv, e) is True
        return FieldResult(path, ok, src, "" if ok else "different number", e, g)

    def _temporal(self, fmt: str, e: Any, g: Any, path: str, src: str) -> FieldResult:
        try:
            if fmt == "date":
                ok = parse_date(g) == parse_date(e)
                return FieldResult(path, ok, src, "" if ok else "different date", e, g)
            ge, gg = parse_datetime(e, self.ctx.timezone), parse_datetime(g, self.ctx.timezone)
        except ValueError as exc:
            return FieldResult(path, False, src, str(exc), e, g)
        ok, reason = same_instant(ge, gg)
        return FieldResult(path, ok, src, reason, e, g)

    def _free_text(self, rule: Rule | None, e: Any, g: Any, path: str) -> FieldResult:
        src = rule.source if rule else "free_text"
        if not isinstance(g, str):
            return FieldResult(path, False, src, "not a string", e, g)
        if self.ctx.judge is not None:
            ok, reason = self.ctx.judge(rule.rubric if rule else None, e, g)
            return FieldResult(path, ok, src + " (judge)", "" if ok else reason, e, g)
        a, b = tokens(str(e)), tokens(g)
        sim = len(a & b) / len(a | b) if a | b else 1.0
        threshold = rule.threshold if rule else 0.5
        ok = sim >= threshold
        return FieldResult(path, ok, src + " (fallback)", "" if ok else f"token overlap {sim:.2f} < {threshold:.2f}",
                           e, g, approximate=True)

    def items(self, node: Node) -> Node:
        """The compiled items of an array node (rule path ``<array>[]``, else the array's normalisers)."""
        if node.items is None:
            raw_items = node.schema.get("items")
            node.items = compile_node(self.tool, raw_items if isinstance(raw_items, Mapping) else {}, node.rpath,
                                  self.item_rule(node.rpath, node.rule), self.rules)
        return node.items

    def item_rule(self, rpath: str, rule: Rule | None) -> Rule | None:
        """The rule of the items of the array at ``rpath`` judged by ``rule``: its own (``<array>[]``),
        else the array's ``exact`` or normalisers, which apply to the items.
        """
        own = self.rules.lookup(self.tool, rpath + "[]")
        if own is not None or rule is None:
            return own
        if rule.compare == "exact":
            return Rule(compare="exact", source=rule.source)
        if rule.normalise is not None:
            return Rule(normalise=rule.normalise, source=rule.source)
        return None

    def _array(self, node: Node, e: Any, g: Any, path: str) -> list[FieldResult]:
        rule = node.rule
        src = rule.source if rule else "schema:array"
        if not isinstance(g, list):
            return [FieldResult(path, False, src, "not an array", e, g)]
        if not isinstance(e, list):
            return [FieldResult(path, False, src, "label value is not an array", e, g)]
        items = self.items(node)
        if rule is None or rule.order != "any":
            if len(e) != len(g):
                return [FieldResult(path, False, src, f"{len(g)} items where the label has {len(e)}", e, g)]
            out: list[FieldResult] = []
            for i, (ei, gi) in enumerate(zip(e, g)):
                out.extend(self.value(items, ei, gi, f"{path}[{i}]"))
            return out or [FieldResult(path, True, src, "", e, g)]
        ok, reason = self._multiset(items, e, g, path)
        return [FieldResult(path, ok, src, reason, e, g)]

    def _multiset(self, items: Node, e: Sequence[Any], g: Sequence[Any], path: str) -> tuple[bool, str]:
        if len(e) != len(g):
            return False, f"{len(g)} items where the label has {len(e)}"
        keys_e, keys_g = self._scalar_keys(items, e), self._scalar_keys(items, g)
        if keys_e is not None and keys_g is not None:  # plain scalars: compare canonical forms as multisets
            from collections import Counter

            ok = Counter(keys_e) == Counter(keys_g)
        else:
            fits = [[all(r.ok for r in self.value(items, ei, gi, f"{path}[{j}]")) for ei in e]
                    for j, gi in enumerate(g)]
            ok = _perfect_matching(fits)
        return (True, "") if ok else (False, "items do not match the label's items one to one (compared as a set)")

    def _scalar_keys(self, items: Node, values: Sequence[Any]) -> list[Any] | None:
        """Canonical forms of scalar items whose comparison is plain equality after normalisation."""
        rule = items.rule
        if rule is not None and (rule.predicates or rule.compare not in (None, "string", "exact")):
            return None
        if items.schema.get("format") in ("date", "date-time") or "enum" in items.schema:
            return None
        steps = rule.normalise if rule is not None and rule.normalise is not None else None
        if steps is None and (rule is None or rule.compare in (None, "string")):
            default = self.rules.defaults.get("string")
            steps = default.normalise if default is not None else None
        out: list[Any] = []
        for v in values:
            if isinstance(v, str):
                out.append(("s", normalise_string(v, steps or ())))
            elif isinstance(v, bool) or v is None:
                out.append(("b", v))
            elif isinstance(v, int):
                out.append(("n", v))
            elif isinstance(v, float) and v.is_integer():
                out.append(("n", int(v)))
            else:
                return None
        return out

    def _composite(self, node: Node, names: tuple[str, ...], rule: Rule,
                   exp: Mapping[str, Any], emi: Mapping[str, Any], path: str) -> FieldResult | None:
        cpath = join_path(path, "+".join(names))
        e = [exp.get(n, MISSING) for n in names]
        g = [emi.get(n, MISSING) for n in names]
        shown_e = {n: v for n, v in zip(names, e) if v is not MISSING}
        shown_g = {n: v for n, v in zip(names, g) if v is not MISSING}
        if all(v is MISSING for v in (*e, *g)):
            return None  # the group is absent on both sides: nothing to judge
        if rule.compare == "instant":  # the zone field may be absent: the user's zone applies
            e = [e[0], None if e[1] is MISSING else e[1]]
            g = [g[0], None if g[1] is MISSING else g[1]]
        if any(v is MISSING for v in g):
            return FieldResult(cpath, False, rule.source, "a field of the group is missing", shown_e, shown_g)
        if any(v is MISSING for v in e):
            return FieldResult(cpath, False, rule.source, "the label leaves a field of the group out", shown_e, shown_g)
        if rule.compare == "instant":
            try:
                ie = parse_datetime(e[0], str(e[1]) if e[1] else self.ctx.timezone)
                ig = parse_datetime(g[0], str(g[1]) if g[1] else self.ctx.timezone)
            except ValueError as exc:
                return FieldResult(cpath, False, rule.source, str(exc), shown_e, shown_g)
            ok, reason = same_instant(ie, ig)
            return FieldResult(cpath, ok, rule.source, reason, shown_e, shown_g)
        # paired lists: compare as a multiset of tuples
        if not all(isinstance(v, list) for v in (*e, *g)):
            return FieldResult(cpath, False, rule.source, "paired fields must both be arrays", shown_e, shown_g)
        if len(set(map(len, e))) != 1 or len(set(map(len, g))) != 1:
            return FieldResult(cpath, False, rule.source, "paired arrays differ in length", shown_e, shown_g)
        e_rows, g_rows = list(zip(*e)), list(zip(*g))
        if len(e_rows) != len(g_rows):
            return FieldResult(cpath, False, rule.source, f"{len(g_rows)} pairs where the label has {len(e_rows)}",
                               shown_e, shown_g)
        # each column's items, judged by the rule at <field>[] (found under the group's path)
        cols = []
        for n in names:
            sub = node.props.get(n)
            item_schema = (sub.schema.get("items") if sub is not None else None) or {}
            col_rule = self.item_rule(join_path(node.rpath, n), sub.rule if sub is not None else None)
            group = join_path(node.rpath, "+".join(names))
            cols.append(compile_node(self.tool, item_schema, group, col_rule, self.rules))

        def row_ok(er: Sequence[Any], gr: Sequence[Any], j: int) -> bool:
            return all(all(r.ok for r in self.value(c, a, b, f"{cpath}[{j}]")) for c, a, b in zip(cols, er, gr))

        e_cols = [self._scalar_keys(c, col) for c, col in zip(cols, e)]
        g_cols = [self._scalar_keys(c, col) for c, col in zip(cols, g)]
        if all(c is not None for c in (*e_cols, *g_cols)):  # scalar pairs: multisets of canonical tuples
            from collections import Counter

            ok = Counter(zip(*e_cols)) == Counter(zip(*g_cols))
        else:
            ok = _perfect_matching([[row_ok(er, gr, j) for er in e_rows] for j, gr in enumerate(g_rows)])
        return FieldResult(cpath, ok, rule.source, "" if ok else "pairs differ (compared as a set of pairs)",
                           shown_e, shown_g)

    # -- predicates
    def _predicates(self, rule: Rule, schema: Mapping[str, Any], g: Any, path: str, e: Any) -> FieldResult:
        for pred in rule.predicates:
            name, arg = next(iter(pred.items()))
            ok, reason = evaluate(name, arg, g, self.ctx)
            if not ok:
                return FieldResult(path, False, f"{rule.source} predicate:{name}", reason, e, g)
        return FieldResult(path, True, rule.source, "", e, g)


def _perfect_matching(fits: Sequence[Sequence[bool]]) -> bool:
    """Is there a one-to-one assignment using only fitting pairs?

    Solved as an assignment problem (``scipy.optimize.linear_sum_assignment``, cost 0 for a
    fitting pair and 1 otherwise): a perfect matching exists iff the optimum costs 0.
    """
    n = len(fits)
    if n == 0:
        return True
    from scipy.optimize import linear_sum_assignment

    cost = [[0 if ok else 1 for ok in row] for row in fits]
    rows, cols = linear_sum_assignment(cost)
    return all(cost[r][c] == 0 for r, c in zip(rows, cols))


def compare_args(tool: str, schema: Mapping[str, Any], expected: Mapping[str, Any], got: Mapping[str, Any],
                 rules: RuleSet | None = None, ctx: CompareContext | None = None,
                 subset: bool = False) -> list[FieldResult]:
    """Compare emitted arguments with a label's arguments.

    Args:
        tool: tool name (rules are looked up as ``tool.path``).
        schema: the tool's JSON-schema ``parameters``.
        expected: the label's arguments (values may be ``{"$any_of": [...]}``).
        got: the emitted arguments.
        rules: the family's rules; ``None`` = schema rules only.
        ctx: state for predicates and time zones.
        subset: judge only the label's keys (used for ``forbidden_actions`` with ``args``).

    Returns:
        One :class:`FieldResult` per judged leaf or group; the call's arguments are acceptable
        when every result is ``ok``.

    Raises:
        LookupError: a predicate reads a state value or user callable that does not exist
            (a configuration error, not the agent's).

    """
    rules = rules or NO_RULES
    comparer = Comparer(tool, rules, ctx or NO_CONTEXT)
    return comparer.object(schema_plan(tool, schema or {}, rules), expected, got, "", subset=subset)
