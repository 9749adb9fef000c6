"""Argument comparison, field by field (DESIGN.md scoring rule 4).

Both sides are read through the tool's JSON schema: schema defaults fill omitted fields,
numbers compare by value at every nesting level (``12 == 12.0``; a bool is never a number),
enums exactly, ``format: date`` / ``date-time`` as dates and instants (a naive time is read in
the user's zone), arrays in order unless a rule says ``order: any`` (then as a multiset, by
optimal one-to-one matching), objects recursively.  Keys the schema does not declare fail the
call.  A leaf that neither the family's rules nor the schema's type rules (string fields with
no enum or format) is compared raw and listed as *unruled*.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any

from .rules import Rule, RuleSet

__all__ = ["ANY_OF", "OMITTED", "CompareContext", "FieldResult", "compare_args"]

#: Label value holding alternatives: ``{"$any_of": [v1, v2, {"$omitted": true}]}``.
ANY_OF = "$any_of"
#: Alternative meaning "the field may be left out".
OMITTED = "$omitted"
_MISSING = object()


@dataclass(slots=True)
class FieldResult:
    """The verdict on one field (or group of fields judged together).

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
        d["expected"] = self.expected
        d["got"] = self.got
        if self.approximate:
            d["approximate"] = True
        return d


Predicate = Callable[..., Any]


@dataclass(frozen=True)
class CompareContext:
    """What predicates and time parsing may read from the state.

    Attributes:
        timezone: the user's IANA zone; naive times are read in it.
        state: named values of the state (``equals_state`` reads them by dotted key).
        messages: the state's messages (``in_messages`` searches their text).
        predicates: user callables by name (registered through ``pytest_tooleffect_predicates``).
        judge: free-text judge ``(rubric, expected, got) -> (ok, reason)``; ``None`` = fallback.

    """

    timezone: str | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    messages: Sequence[Mapping[str, Any]] = ()
    predicates: Mapping[str, Predicate] = field(default_factory=dict)
    judge: Callable[[str | None, Any, Any], tuple[bool, str]] | None = None


_INDEX = re.compile(r"\[\d+\]")


@lru_cache(maxsize=4096)
def _strip_indices(path: str) -> str:
    return _INDEX.sub("", path) if "[" in path else path


# ---------------------------------------------------------------- normalisers and parsers

_PUNCT = re.compile(r"[\s,./\-_*^]+")


def normalise_string(value: str, steps: Sequence[str]) -> str:
    """Apply string normalisers in order (``nfkc``, ``casefold``, ``strip``, …)."""
    for step in steps:
        if step == "nfkc":
            value = unicodedata.normalize("NFKC", value)
        elif step == "casefold":
            value = value.casefold()
        elif step == "strip":
            value = value.strip()
        elif step == "collapse_whitespace":
            value = " ".join(value.split())
        elif step == "strip_punctuation":
            value = _PUNCT.sub("", value)
    return value


def _zone(name: str | None) -> Any:
    if not name:
        return None
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def parse_datetime(value: Any, zone: str | None) -> datetime:
    """Parse an ISO 8601 date-time; a naive value is read in ``zone`` when one is given.

    Only ISO 8601 is accepted (``dateutil.parser.isoparse``; a space may separate date and
    time): free-form text such as ``"Monday 10am"`` or ``"10:00 EST"`` would be completed from
    today's date or lose its zone, so it is rejected rather than guessed.

    Raises:
        ValueError: not an ISO 8601 date-time, or ``zone`` is unknown.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        from dateutil import parser

        try:
            dt = parser.isoparse(value.strip())
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"{value!r} is not an ISO 8601 date-time") from exc
    else:
        raise ValueError(f"{value!r} is not a date-time string")
    if dt.tzinfo is None and zone:
        try:
            dt = dt.replace(tzinfo=_zone(zone))
        except Exception as exc:  # zoneinfo raises several types
            raise ValueError(f"unknown time zone {zone!r}") from exc
    return dt


def parse_date(value: Any) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return parse_datetime(value, None).date()
    raise ValueError(f"{value!r} is not a date")


def _same_instant(a: datetime, b: datetime) -> tuple[bool, str]:
    if (a.tzinfo is None) != (b.tzinfo is None):
        return False, "one time is naive and the user's time zone is unknown"
    # aware times compare as POSIX timestamps: datetime's == across zones is False for a time in
    # a DST fold or gap (PEP 495), although both name the same instant
    same = a.timestamp() == b.timestamp() if a.tzinfo is not None else a == b
    if same:
        return True, ""
    return False, f"{a.isoformat()} and {b.isoformat()} are different instants"


def _tokens(s: str) -> set[str]:
    return set(re.findall(r"\w+", unicodedata.normalize("NFKC", s).casefold()))


# ---------------------------------------------------------------- the comparator


def _schema_type(schema: Mapping[str, Any], value: Any) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        if value is None and "null" in t:
            return "null"
        t = non_null[0] if len(non_null) == 1 else None
    if t is None:
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        if "enum" in schema:
            return "enum"
    return t


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Comparer:
    def __init__(self, tool: str, rules: RuleSet, ctx: CompareContext) -> None:
        self.tool = tool
        self.rules = rules
        self.ctx = ctx

    # -- entry points
    def object(self, schema: Mapping[str, Any], expected: Mapping[str, Any], got: Mapping[str, Any],
               path: str, subset: bool = False) -> list[FieldResult]:
        props: Mapping[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        results: list[FieldResult] = []
        open_schema = schema.get("additionalProperties") is True or (not props and "properties" not in schema)
        if not subset:
            for key in got:
                if key not in props and not open_schema:
                    results.append(FieldResult(self._p(path, key), False, "schema",
                                               "argument not in the tool's schema", None, got[key]))
        exp = self._with_defaults(props, expected)
        emi = self._with_defaults(props, got)
        done: set[str] = set()
        composites = self.rules.composites_at(self.tool, _strip_indices(path)) if self.rules.composites else ()
        for names, rule in composites:
            if subset and not any(n in expected for n in names):
                continue
            done.update(names)
            judged = self._composite(props, names, rule, exp, emi, path)
            if judged is not None:
                results.append(judged)
        keys = list(expected) if subset else list(dict.fromkeys([*props, *expected]))
        for key in keys:
            if key in done or (key not in props and not open_schema and key not in expected):
                continue
            sub = props.get(key, {})
            e, g = exp.get(key, _MISSING), emi.get(key, _MISSING)
            fpath = self._p(path, key)
            if key in required and key not in got and not subset:
                # a required argument must be sent even when the schema gives it a default
                results.append(FieldResult(fpath, False, "schema", "required argument missing",
                                           None if e is _MISSING else e, None))
                continue
            if isinstance(e, Mapping) and ANY_OF in e:
                results.extend(self._alternatives(sub, e[ANY_OF], g, fpath, key in required))
                continue
            results.extend(self._field(sub, e, g, fpath, key in required))
        return results

    # -- helpers
    @staticmethod
    def _p(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    @staticmethod
    def _with_defaults(props: Mapping[str, Any], values: Mapping[str, Any]) -> Mapping[str, Any]:
        missing = [k for k, sub in props.items() if k not in values and isinstance(sub, Mapping) and "default" in sub]
        if not missing:
            return values
        out = dict(values)
        for key in missing:
            out[key] = props[key]["default"]
        return out

    def _rule(self, path: str) -> Rule | None:
        return self.rules.lookup(self.tool, _strip_indices(path))

    def _alternatives(self, schema: Mapping[str, Any], alts: Sequence[Any], got: Any, path: str,
                      required: bool) -> list[FieldResult]:
        best: list[FieldResult] | None = None
        for alt in alts:
            if isinstance(alt, Mapping) and alt.get(OMITTED):
                if got is _MISSING or (isinstance(schema, Mapping) and got == schema.get("default", _MISSING)):
                    return [FieldResult(path, True, "label:$any_of", "", alt, None)]
                continue
            res = self._field(schema, alt, got, path, required)
            if all(r.ok for r in res):
                return res
            if best is None:
                best = res
        if best is None:
            return [FieldResult(path, False, "label:$any_of", "field present but the label allows only omission",
                                list(alts), None if got is _MISSING else got)]
        return [FieldResult(r.path, r.ok, r.rule, r.reason + " (no alternative matched)" if not r.ok else "",
                            list(alts) if r.path == path else r.expected, r.got, r.approximate) for r in best]

    def _field(self, schema: Mapping[str, Any], e: Any, g: Any, path: str, required: bool) -> list[FieldResult]:
        rule = self._rule(path)
        compare = rule.compare if rule else None
        shown_g = None if g is _MISSING else g
        shown_e = None if e is _MISSING else e
        if g is _MISSING:
            if e is _MISSING:
                if required and not (rule and compare in ("any", "none")):
                    return [FieldResult(path, False, "schema", "required argument missing", None, None)]
                if rule and rule.predicates and compare != "any":
                    return [FieldResult(path, False, rule.source, "argument missing; predicates need it")]
                return []
            return [FieldResult(path, False, rule.source if rule else "schema", "argument missing", shown_e, None)]
        if compare == "any":
            return [self._predicates(rule, schema, g, path, shown_e) if rule and rule.predicates
                    else FieldResult(path, True, rule.source if rule else "rule", "", shown_e, shown_g)]
        if e is _MISSING:
            if rule and (rule.predicates or compare == "none"):
                return [self._predicates(rule, schema, g, path, None)]
            return [FieldResult(path, False, "label", "argument the label leaves out (and no default)", None, g)]
        results = self.value(schema, e, g, path, rule)
        if rule and rule.predicates and all(r.ok for r in results):
            return [self._predicates(rule, schema, g, path, e)]
        return results

    def value(self, schema: Mapping[str, Any], e: Any, g: Any, path: str, rule: Rule | None) -> list[FieldResult]:
        """Compare one value; returns the leaf results."""
        compare = rule.compare if rule else None
        src = rule.source if rule else ""
        if compare == "none":
            return [FieldResult(path, True, src, "", e, g)]
        kind = _schema_type(schema, g)
        if compare == "free_text":
            return [self._free_text(rule, e, g, path)]
        if compare in ("datetime", "date") or (compare is None and isinstance(schema.get("format"), str)
                                               and schema["format"] in ("date-time", "date")):
            fmt = "date" if (compare == "date" or (compare is None and schema.get("format") == "date")) else "date-time"
            return [self._temporal(fmt, e, g, path, src or f"schema:{fmt}")]
        if e is None or g is None:
            ok = e is None and g is None
            return [FieldResult(path, ok, src or "schema:null", "" if ok else "null against a value", e, g)]
        if "enum" in schema and compare is None:
            same = g == e or (isinstance(g, str) and isinstance(e, str)
                              and unicodedata.normalize("NFKC", g) == unicodedata.normalize("NFKC", e))
            ok = g in schema["enum"] and same
            reason = ("" if ok else "different enum value" if g in schema["enum"]
                      else "not one of the schema's enum values")
            return [FieldResult(path, ok, "schema:enum", reason, e, g)]
        if compare == "number" or kind in ("number", "integer"):
            return [self._number(rule, kind, e, g, path, src or f"schema:{kind or 'number'}")]
        if compare == "boolean" or kind == "boolean":
            ok = isinstance(g, bool) and isinstance(e, bool) and g == e
            reason = "" if ok else ("not a boolean" if not isinstance(g, bool) else "different value")
            return [FieldResult(path, ok, src or "schema:boolean", reason, e, g)]
        if kind == "array" or (kind is None and isinstance(e, list) and isinstance(g, list)):
            return self._array(schema, e, g, path, rule)
        if kind == "object" or (kind is None and isinstance(e, Mapping) and isinstance(g, Mapping)):
            if not isinstance(g, Mapping):
                return [FieldResult(path, False, "schema:object", "not an object", e, g)]
            if not isinstance(e, Mapping):
                return [FieldResult(path, False, "schema:object", "label value is not an object", e, g)]
            return self.object(schema, e, g, path)
        if compare == "string" or kind == "string" or (kind is None and isinstance(e, str)):
            if not isinstance(g, str):
                return [FieldResult(path, False, src or "schema:string", "not a string", e, g)]
            steps = rule.normalise if rule and rule.normalise is not None else None
            default = self.rules.defaults.get("string")
            if steps is None and default is not None and (rule is None or rule.normalise is None):
                steps, src = default.normalise, src or default.source
            if steps is None and not src:
                ok = g == e
                return [FieldResult(path, ok, "raw", "" if ok else "different string (compared raw: no rule)", e, g)]
            ok = normalise_string(g, steps or ()) == normalise_string(str(e), steps or ())
            return [FieldResult(path, ok, src, "" if ok else "different string after normalisation", e, g)]
        ok = g == e and type(g) is type(e) or (_is_number(g) and _is_number(e) and g == e)
        return [FieldResult(path, ok, src or "raw", "" if ok else "different value (compared raw: no rule)", e, g)]

    def _number(self, rule: Rule | None, kind: str | None, e: Any, g: Any, path: str, src: str) -> FieldResult:
        gv = g
        if isinstance(g, str) and rule is not None and rule.numeric_strings:
            try:
                gv = float(g)
            except ValueError:
                return FieldResult(path, False, src, "not a number", e, g)
        if not _is_number(gv):
            return FieldResult(path, False, src, f"a {type(g).__name__} where a number is declared", e, g)
        if kind == "integer" and isinstance(gv, float) and not gv.is_integer():
            return FieldResult(path, False, src, "not an integer", e, g)
        if not _is_number(e):
            return FieldResult(path, False, src, "label value is not a number", e, g)
        try:
            ok = gv == e or math.isclose(gv, e, rel_tol=1e-9, abs_tol=0.0)
        except OverflowError:
            ok = False
        return FieldResult(path, ok, src, "" if ok else "different number", e, g)

    def _temporal(self, fmt: str, e: Any, g: Any, path: str, src: str) -> FieldResult:
        try:
            if fmt == "date":
                ok = parse_date(g) == parse_date(e)
                return FieldResult(path, ok, src, "" if ok else "different date", e, g)
            ge, gg = parse_datetime(e, self.ctx.timezone), parse_datetime(g, self.ctx.timezone)
        except ValueError as exc:
            return FieldResult(path, False, src, str(exc), e, g)
        ok, reason = _same_instant(ge, gg)
        return FieldResult(path, ok, src, reason, e, g)

    def _free_text(self, rule: Rule | None, e: Any, g: Any, path: str) -> FieldResult:
        src = rule.source if rule else "free_text"
        if not isinstance(g, str):
            return FieldResult(path, False, src, "not a string", e, g)
        if self.ctx.judge is not None:
            ok, reason = self.ctx.judge(rule.rubric if rule else None, e, g)
            return FieldResult(path, ok, src + " (judge)", "" if ok else reason, e, g)
        a, b = _tokens(str(e)), _tokens(g)
        sim = len(a & b) / len(a | b) if a | b else 1.0
        threshold = rule.threshold if rule else 0.5
        ok = sim >= threshold
        return FieldResult(path, ok, src + " (fallback)", "" if ok else f"token overlap {sim:.2f} < {threshold:.2f}",
                           e, g, approximate=True)

    def _array(self, schema: Mapping[str, Any], e: Any, g: Any, path: str, rule: Rule | None) -> list[FieldResult]:
        src = rule.source if rule else "schema:array"
        if not isinstance(g, list):
            return [FieldResult(path, False, src, "not an array", e, g)]
        if not isinstance(e, list):
            return [FieldResult(path, False, src, "label value is not an array", e, g)]
        raw_items = schema.get("items")
        items: Mapping[str, Any] = raw_items if isinstance(raw_items, Mapping) else {}
        item_rule = self._rule(path + "[]")
        if item_rule is None and rule is not None and rule.normalise is not None:
            item_rule = Rule(normalise=rule.normalise, source=rule.source)  # normalise applies to the items
        if rule is None or rule.order != "any":
            if len(e) != len(g):
                return [FieldResult(path, False, src, f"{len(g)} items where the label has {len(e)}", e, g)]
            out: list[FieldResult] = []
            for i, (ei, gi) in enumerate(zip(e, g)):
                out.extend(self.value(items, ei, gi, f"{path}[{i}]", item_rule))
            return out or [FieldResult(path, True, src, "", e, g)]
        ok, reason = self._multiset(items, e, g, path, item_rule)
        return [FieldResult(path, ok, src, reason, e, g)]

    def _multiset(self, items: Mapping[str, Any], e: Sequence[Any], g: Sequence[Any], path: str,
                  item_rule: Rule | None) -> tuple[bool, str]:
        if len(e) != len(g):
            return False, f"{len(g)} items where the label has {len(e)}"
        keys_e, keys_g = self._scalar_keys(items, e, item_rule), self._scalar_keys(items, g, item_rule)
        if keys_e is not None and keys_g is not None:  # plain scalars: compare canonical forms as multisets
            from collections import Counter

            ok = Counter(keys_e) == Counter(keys_g)
        else:
            fits = [[all(r.ok for r in self.value(items, ei, gi, f"{path}[{j}]", item_rule)) for ei in e]
                    for j, gi in enumerate(g)]
            ok = _perfect_matching(fits)
        return (True, "") if ok else (False, "items do not match the label's items one to one (compared as a set)")

    def _scalar_keys(self, items: Mapping[str, Any], values: Sequence[Any], rule: Rule | None) -> list[Any] | None:
        """Canonical forms of scalar items whose comparison is plain equality after normalisation."""
        if rule is not None and (rule.predicates or rule.compare not in (None, "string", "exact")):
            return None
        if items.get("format") in ("date", "date-time") or "enum" in items:
            return None
        steps = rule.normalise if rule is not None and rule.normalise is not None else None
        if steps is None and (rule is None or rule.compare is None):
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

    def _composite(self, props: Mapping[str, Any], names: tuple[str, ...], rule: Rule,
                   exp: Mapping[str, Any], emi: Mapping[str, Any], path: str) -> FieldResult | None:
        cpath = self._p(path, "+".join(names))
        e = [exp.get(n, _MISSING) for n in names]
        g = [emi.get(n, _MISSING) for n in names]
        shown_e = {n: v for n, v in zip(names, e) if v is not _MISSING}
        shown_g = {n: v for n, v in zip(names, g) if v is not _MISSING}
        if all(v is _MISSING for v in (*e, *g)):
            return None  # the group is absent on both sides: nothing to judge
        if rule.compare == "instant":  # the zone field may be absent: the user's zone applies
            e = [e[0], None if e[1] is _MISSING else e[1]]
            g = [g[0], None if g[1] is _MISSING else g[1]]
        if any(v is _MISSING for v in g):
            return FieldResult(cpath, False, rule.source, "a field of the group is missing", shown_e, shown_g)
        if any(v is _MISSING for v in e):
            return FieldResult(cpath, False, rule.source, "the label leaves a field of the group out", shown_e, shown_g)
        if rule.compare == "instant":
            try:
                ie = parse_datetime(e[0], str(e[1]) if e[1] else self.ctx.timezone)
                ig = parse_datetime(g[0], str(g[1]) if g[1] else self.ctx.timezone)
            except ValueError as exc:
                return FieldResult(cpath, False, rule.source, str(exc), shown_e, shown_g)
            ok, reason = _same_instant(ie, ig)
            return FieldResult(cpath, ok, rule.source, reason, shown_e, shown_g)
        # paired lists: compare as a multiset of tuples
        if not all(isinstance(v, list) for v in (*e, *g)):
            return FieldResult(cpath, False, rule.source, "paired fields must both be arrays", shown_e, shown_g)
        if len(set(map(len, e))) != 1 or len(set(map(len, g))) != 1:
            return FieldResult(cpath, False, rule.source, "paired arrays differ in length", shown_e, shown_g)
        item_schemas = [(props.get(n) or {}).get("items") or {} for n in names]
        e_rows, g_rows = list(zip(*e)), list(zip(*g))
        if len(e_rows) != len(g_rows):
            return FieldResult(cpath, False, rule.source, f"{len(g_rows)} pairs where the label has {len(e_rows)}",
                               shown_e, shown_g)

        def row_ok(er: Sequence[Any], gr: Sequence[Any], j: int) -> bool:
            return all(all(r.ok for r in self.value(s, a, b, f"{cpath}[{j}]", self._rule(self._p(path, n) + "[]")))
                       for s, a, b, n in zip(item_schemas, er, gr, names))

        col_rules = [self._rule(self._p(path, n) + "[]") for n in names]
        e_cols = [self._scalar_keys(sch, col, r) for sch, col, r in zip(item_schemas, e, col_rules)]
        g_cols = [self._scalar_keys(sch, col, r) for sch, col, r in zip(item_schemas, g, col_rules)]
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
            ok, reason = self._predicate(name, arg, g, path)
            if not ok:
                return FieldResult(path, False, f"{rule.source} predicate:{name}", reason, e, g)
        return FieldResult(path, True, rule.source, "", e, g)

    def _predicate(self, name: str, arg: Any, g: Any, path: str) -> tuple[bool, str]:
        ctx = self.ctx
        if name == "within":
            try:
                t = parse_datetime(g, ctx.timezone)
                lo = parse_datetime(arg["start"], ctx.timezone) if arg.get("start") else None
                hi = parse_datetime(arg["end"], ctx.timezone) if arg.get("end") else None
            except (ValueError, TypeError, KeyError) as exc:
                return False, f"within: {exc}"
            try:
                inside = (lo is None or lo <= t) and (hi is None or t <= hi)
            except TypeError:
                return False, "within: cannot compare a naive time with a zoned window (no user time zone)"
            return inside, "" if inside else f"{g} is outside the window {arg.get('start')} – {arg.get('end')}"
        if name == "superset":
            required = arg if isinstance(arg, list) else _lookup(ctx.state, str(arg))
            if required is _MISSING:
                raise LookupError(f"superset: the state has no value {arg!r}")
            if not isinstance(g, list) or not isinstance(required, list):
                return False, "superset: needs a list"
            have = {_norm_item(x) for x in g}
            missing = [x for x in required if _norm_item(x) not in have]
            return not missing, "" if not missing else f"missing required members {missing}"
        if name == "equals_state":
            want = _lookup(ctx.state, str(arg))
            if want is _MISSING:
                raise LookupError(f"equals_state: the state has no value {arg!r}")
            ok = _norm_item(g) == _norm_item(want)
            return ok, "" if ok else f"{g!r} is not the state's {arg} ({want!r})"
        if name == "in_messages":
            needle = str(g)
            ok = any(needle in str(m.get("content") or "") for m in ctx.messages)
            return ok, "" if ok else f"{g!r} does not appear in the conversation"
        if name == "pattern":
            ok = isinstance(g, str) and re.fullmatch(str(arg), g) is not None
            return ok, "" if ok else f"{g!r} does not match /{arg}/"
        if name == "range":
            if not _is_number(g):
                return False, "range: not a number"
            lo, hi = arg.get("min"), arg.get("max")
            ok = (lo is None or g >= lo) and (hi is None or g <= hi)
            return ok, "" if ok else f"{g} outside [{lo}, {hi}]"
        if name == "callable":
            fname = arg if isinstance(arg, str) else arg.get("name")
            params = {} if isinstance(arg, str) else {k: v for k, v in arg.items() if k != "name"}
            fn = ctx.predicates.get(fname)
            if fn is None:  # a configuration error, not the agent's: the item becomes a scoring error
                raise LookupError(f"no predicate registered under {fname!r} (pytest_tooleffect_predicates)")
            res = fn(g, ctx, **params)
            if isinstance(res, tuple):
                return bool(res[0]), str(res[1])
            return bool(res), "" if res else f"predicate {fname} rejected {g!r}"
        return False, f"unknown predicate {name}"


def _norm_item(x: Any) -> Any:
    return unicodedata.normalize("NFKC", x).casefold().strip() if isinstance(x, str) else x


def _lookup(state: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = state
    for part in dotted.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


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

    """
    comparer = _Comparer(tool, rules or RuleSet(), ctx or CompareContext())
    return comparer.object(schema or {}, expected, got, "", subset=subset)
