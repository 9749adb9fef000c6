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

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple

from .rules import Rule, RuleSet

__all__ = ["ANY_OF", "OMITTED", "ArgsPlan", "CompareContext", "FieldResult", "compare_args", "compile_call"]

#: Label value holding alternatives: ``{"$any_of": [v1, v2, {"$omitted": true}]}``.
ANY_OF = "$any_of"
#: Alternative meaning "the field may be left out".
OMITTED = "$omitted"
_MISSING = object()


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
        d["expected"] = _fresh(self.expected)  # records may be edited in place: never hand out the label's values
        d["got"] = _fresh(self.got)
        if self.approximate:
            d["approximate"] = True
        return d


def _fresh(value: Any) -> Any:
    """A copy of a JSON-like value that shares no dict or list with the original."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


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


# ---------------------------------------------------------------- normalisers and parsers

_PUNCT = re.compile(r"[\s,./\-_*^]+")


_NORMALISERS: dict[str, Callable[[str], str]] = {
    "nfkc": functools.partial(unicodedata.normalize, "NFKC"),
    "casefold": str.casefold,
    "strip": str.strip,
    "collapse_whitespace": lambda value: " ".join(value.split()),
    "strip_punctuation": lambda value: _PUNCT.sub("", value),
}


@functools.cache
def normaliser(steps: tuple[str, ...]) -> Callable[[str], str]:
    """The string normalisers ``steps`` (``nfkc``, ``casefold``, ``strip``, …) as one function, applied in order."""
    fns = tuple(_NORMALISERS[step] for step in steps if step in _NORMALISERS)

    def apply(value: str) -> str:
        for fn in fns:
            value = fn(value)
        return value

    return apply


def normalise_string(value: str, steps: Sequence[str]) -> str:
    """Apply string normalisers in order (``nfkc``, ``casefold``, ``strip``, …)."""
    return normaliser(tuple(steps))(value)


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


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_JSON_TYPES = _SCALAR_TYPES | {list, dict}


def _is_mapping(v: Any) -> bool:
    """``isinstance(v, Mapping)``, answered without the ABC check for dicts and scalars (the common cases)."""
    return type(v) is dict or (type(v) not in _SCALAR_TYPES and isinstance(v, Mapping))


def _json_key(value: Any, text: Callable[[str], str] | None = None, depth: int = 0) -> Any:
    """A hashable form of a JSON value under JSON equality (JSON Schema's ``enum`` and ``const``).

    Equal forms mean equal JSON values: numbers by value (``1`` is ``1.0``), a boolean never a
    number (``true`` is not ``1``), strings as written (or through ``text``), arrays in order,
    objects by key (as text).  Other values stand for themselves (by ``repr`` when unhashable).
    An array or object nested deeper than :data:`_KEY_DEPTH` levels is equal only to itself.
    """
    if type(value) is str or isinstance(value, str):
        value = str.__str__(value)  # a subclass by its text
        return ("s", text(value) if text is not None else value)
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if depth >= _KEY_DEPTH and isinstance(value, (Mapping, list, tuple)):
        return ("deep", id(value))  # equal only to itself: no recursion into a value nested this deep
    if isinstance(value, Mapping):
        return ("o", frozenset((str(k), _json_key(v, text, depth + 1)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("l", tuple(_json_key(v, text, depth + 1) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("r", repr(value))
    return ("x", value)


_KEY_DEPTH = 64  # far past any tool's arguments, far below Python's recursion limit


def _same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value (:func:`_json_key`); ``True == 1`` is not."""
    if a is b:
        return True
    if type(a) is type(b) and type(a) in _SCALAR_TYPES:
        return bool(a == b)
    return bool(_json_key(a) == _json_key(b))


def _members(node: _Node) -> frozenset[Any]:
    """The members of ``node``'s enum as JSON keys (:func:`_json_key`), made once per schema position."""
    if node.enum_keys is None:
        node.enum_keys = frozenset(map(_json_key, node.enum))
    return node.enum_keys


_DYNAMIC = "<dynamic>"  # a node's kind that depends on the value (a type list holding "null")


@dataclass(slots=True, eq=False)
class _Node:
    """One position of a tool's schema, compiled once per rule set (see :func:`_compile`).

    Everything the comparator would otherwise look up per value is read here: the rule that
    applies, the schema type, the string normalisers, and for objects the children, required
    keys and defaults.  Paths are rule paths: no array indices (``passengers.first_name``).
    """

    schema: Mapping[str, Any]
    rpath: str
    rule: Rule | None
    compare: str | None = None
    src: str = ""
    kind: str | None = None
    temporal: str | None = None
    temporal_src: str = ""
    enum: Any = None
    enum_keys: frozenset[Any] | None = None  # the enum's members as JSON keys: :func:`_members`
    default: Any = _MISSING
    str_steps: tuple[str, ...] | None = None
    str_src: str = ""
    str_raw: bool = False
    # objects
    props: dict[str, _Node] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    open: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()
    composites: tuple[tuple[tuple[str, ...], Rule], ...] = ()
    extras: dict[str, _Node] = field(default_factory=dict)  # keys an open schema does not declare
    # arrays (compiled on first use)
    items: _Node | None = None


def _compile(tool: str, schema: Any, rpath: str, rule: Rule | None, rules: RuleSet) -> _Node:
    """Compile the schema at rule path ``rpath`` (judged by ``rule``) and everything below it."""
    if not _is_mapping(schema):
        schema = {}
    get = schema.get
    t = get("type")
    kind = t if type(t) is str else _DYNAMIC if isinstance(t, list) else _schema_type(schema, None)
    fmt = get("format")
    temporal: str | None
    if rule is None:
        compare, src, steps = None, "", None
        temporal = _TEMPORAL.get(fmt) if isinstance(fmt, str) else None
    else:
        compare, src, steps = rule.compare, rule.source, rule.normalise
        if compare == "date" or compare == "datetime":
            temporal = "date" if compare == "date" else "date-time"
        else:
            temporal = _TEMPORAL.get(fmt) if compare is None and isinstance(fmt, str) else None
    # strings: the field's normalisers, else the family's string default, else compared raw
    str_src = src
    if steps is None:
        default = rules.defaults.get("string")
        if default is not None:
            steps, str_src = default.normalise, src or default.source
    node = _Node(schema, rpath, rule, compare, src, kind, temporal, (src or f"schema:{temporal}") if temporal else "",
                 schema["enum"] if compare is None and "enum" in schema else None, None, get("default", _MISSING),
                 steps, str_src, steps is None and not str_src)
    # objects (a leaf keeps the defaults: no properties, open, nothing required)
    props = get("properties")
    if props and isinstance(props, Mapping):
        children, defaults = node.props, []
        for key, sub in props.items():
            child = _Comparer.join(rpath, key)
            children[key] = _compile(tool, sub, child, rules.lookup(tool, child), rules)
            if _is_mapping(sub) and "default" in sub:
                defaults.append((key, sub["default"]))
        node.defaults = tuple(defaults)
        node.open = get("additionalProperties") is True
    else:
        node.open = get("additionalProperties") is True or "properties" not in schema
    if "required" in schema:
        node.required = frozenset(schema["required"] or ())
    if rules.composites:
        node.composites = rules.composites_at(tool, rpath)
    return node


_TEMPORAL = {"date-time": "date-time", "date": "date"}  # the formats read as dates and instants


_PLAN_LIMIT = 4096


def _plan(tool: str, schema: Mapping[str, Any], rules: RuleSet) -> _Node:
    """The compiled root of ``tool``'s parameters schema, cached on ``rules``.

    The cache is keyed by the schema object's identity (it holds the schema, so the identity
    stays unique): a schema is read once, so it must not change after its first comparison
    (``ToolSpec`` is frozen).
    """
    key = (tool, id(schema))
    hit = rules.compiled.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]  # type: ignore[no-any-return]
    if len(rules.compiled) >= _PLAN_LIMIT:
        rules.compiled.clear()
    node = _compile(tool, schema, "", None, rules)
    rules.compiled[key] = (schema, node)
    return node


class _Comparer:
    def __init__(self, tool: str, rules: RuleSet, ctx: CompareContext) -> None:
        self.tool = tool
        self.rules = rules
        self.ctx = ctx

    # -- entry points
    def object(self, node: _Node, expected: Mapping[str, Any], got: Mapping[str, Any],
               path: str, subset: bool = False) -> list[FieldResult]:
        props = node.props
        required = node.required
        results: list[FieldResult] = []
        open_schema = node.open
        static_paths = path == node.rpath  # not inside an array: display paths are the rule paths
        if not subset and not open_schema and not got.keys() <= props.keys():
            results.extend(self.undeclared(node, got, path))
        exp = self._with_defaults(node, expected) if node.defaults else expected
        emi = self._with_defaults(node, got) if node.defaults else got
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
            e, g = exp.get(key, _MISSING), emi.get(key, _MISSING)
            fpath = sub.rpath if static_paths else self.join(path, key)
            results.extend(self.key(sub, e, g, fpath, key in required, not subset and key not in got))
        return results

    def judged(self, node: _Node, expected: Mapping[str, Any], subset: bool = False) -> Iterator[tuple[str, _Node]]:
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

    def undeclared(self, node: _Node, got: Mapping[str, Any], path: str) -> list[FieldResult]:
        """A failing result for each emitted key that ``node``'s (closed) schema does not declare."""
        return [FieldResult(self.join(path, key), False, "schema", "argument not in the tool's schema", None, value)
                for key, value in got.items() if key not in node.props]

    def key(self, sub: _Node, e: Any, g: Any, path: str, required: bool, absent: bool) -> list[FieldResult]:
        """One key of an object: the label's ``e`` against the emitted ``g``, defaults filled in.

        ``absent``: the key is not in the emitted arguments (before defaults were filled in).
        """
        if required and absent:
            # a required argument must be sent even when the schema gives it a default
            return [FieldResult(path, False, "schema", "required argument missing", None if e is _MISSING else e, None)]
        if _is_mapping(e) and ANY_OF in e:
            return self._alternatives(sub, e[ANY_OF], g, path, required)
        return self._field(sub, e, g, path, required)

    def extra(self, node: _Node, key: str) -> _Node:
        """The compiled node of ``key``, which ``node``'s schema does not declare (compiled once)."""
        sub = node.extras.get(key)
        if sub is None:
            rpath = self.join(node.rpath, key)
            sub = node.extras[key] = _compile(self.tool, {}, rpath, self.rules.lookup(self.tool, rpath), self.rules)
        return sub

    # -- helpers
    @staticmethod
    def join(path: str, key: str) -> str:
        """``path.key``, or ``key`` at the top."""
        return f"{path}.{key}" if path else key

    @staticmethod
    def _with_defaults(node: _Node, values: Mapping[str, Any]) -> Mapping[str, Any]:
        missing = [(k, v) for k, v in node.defaults if k not in values]
        if not missing:
            return values
        out = dict(values)
        out.update(missing)
        return out

    def _alternatives(self, node: _Node, alts: Sequence[Any], got: Any, path: str,
                      required: bool) -> list[FieldResult]:
        best: list[FieldResult] | None = None
        for alt in alts:
            if _is_mapping(alt) and alt.get(OMITTED):
                if got is _MISSING or _same_json(got, node.default):
                    return [FieldResult(path, True, "label:$any_of", "", alt, None)]
                continue
            res = self._field(node, alt, got, path, required)
            if all(r.ok for r in res):
                return res
            if best is None:
                best = res
        if best is None:
            return [FieldResult(path, False, "label:$any_of", "field present but the label allows only omission",
                                list(alts), None if got is _MISSING else got)]
        return [FieldResult(r.path, r.ok, r.rule, r.reason + " (no alternative matched)" if not r.ok else "",
                            list(alts) if r.path == path else r.expected, r.got, r.approximate) for r in best]

    def _field(self, node: _Node, e: Any, g: Any, path: str, required: bool) -> list[FieldResult]:
        rule = node.rule
        if rule is None:  # schema rules only
            if g is _MISSING:
                if e is _MISSING and required:
                    return [FieldResult(path, False, "schema", "required argument missing", None, None)]
                if e is _MISSING:
                    return []
                return [FieldResult(path, False, "schema", "argument missing", e, None)]
            if e is _MISSING:
                return [FieldResult(path, False, "label", "argument the label leaves out (and no default)", None, g)]
            return self.value(node, e, g, path)
        compare = rule.compare
        shown_g = None if g is _MISSING else g
        shown_e = None if e is _MISSING else e
        if g is _MISSING:
            if e is _MISSING:
                if required and compare not in ("any", "none"):
                    return [FieldResult(path, False, "schema", "required argument missing", None, None)]
                if rule.predicates and compare != "any":
                    return [FieldResult(path, False, rule.source, "argument missing; predicates need it")]
                return []
            return [FieldResult(path, False, rule.source, "argument missing", shown_e, None)]
        if compare == "any":
            return [self._predicates(rule, node.schema, g, path, shown_e) if rule.predicates
                    else FieldResult(path, True, rule.source, "", shown_e, shown_g)]
        if e is _MISSING:
            if rule.predicates or compare == "none":
                return [self._predicates(rule, node.schema, g, path, None)]
            return [FieldResult(path, False, "label", "argument the label leaves out (and no default)", None, g)]
        results = self.value(node, e, g, path)
        if rule.predicates and all(r.ok for r in results):
            return [self._predicates(rule, node.schema, g, path, e)]
        return results

    def value(self, node: _Node, e: Any, g: Any, path: str) -> list[FieldResult]:
        """Compare one value at ``node``; returns the leaf results."""
        compare = node.compare
        src = node.src
        if compare == "none":
            return [FieldResult(path, True, src, "", e, g)]
        if compare == "exact" and not _is_mapping(e):  # a scalar as written: no normalisers, no tolerance
            if isinstance(e, list) and isinstance(g, list):
                return self._array(node, e, g, path)  # item by item (the items exact unless ruled otherwise)
            ok = _same_json(g, e)
            return [FieldResult(path, ok, src, "" if ok else "different value (compared exactly)", e, g)]
        kind = _schema_type(node.schema, g) if node.kind is _DYNAMIC else node.kind
        if compare == "free_text":
            return [self._free_text(node.rule, e, g, path)]
        if node.temporal is not None:
            return [self._temporal(node.temporal, e, g, path, node.temporal_src)]
        if e is None or g is None:
            ok = e is None and g is None
            return [FieldResult(path, ok, src or "schema:null", "" if ok else "null against a value", e, g)]
        if node.enum is not None:
            key = _json_key(g)
            member = key in _members(node)
            same = key == _json_key(e) or (isinstance(g, str) and isinstance(e, str)
                                           and unicodedata.normalize("NFKC", g) == unicodedata.normalize("NFKC", e))
            ok = member and same
            reason = "" if ok else "different enum value" if member else "not one of the schema's enum values"
            return [FieldResult(path, ok, "schema:enum", reason, e, g)]
        if compare == "number" or kind == "number" or kind == "integer":
            return [self._number(node.rule, kind, e, g, path, src or f"schema:{kind or 'number'}")]
        if compare == "boolean" or kind == "boolean":
            ok = isinstance(g, bool) and isinstance(e, bool) and g == e
            reason = "" if ok else ("not a boolean" if not isinstance(g, bool) else "different value")
            return [FieldResult(path, ok, src or "schema:boolean", reason, e, g)]
        if kind == "array" or (kind is None and isinstance(e, list) and isinstance(g, list)):
            return self._array(node, e, g, path)
        if kind == "object" or (kind is None and _is_mapping(e) and _is_mapping(g)):
            if not _is_mapping(g):
                return [FieldResult(path, False, "schema:object", "not an object", e, g)]
            if not _is_mapping(e):
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
        ok = _same_json(g, e)
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
        ok = _near(gv, e) is True
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

    def items(self, node: _Node) -> _Node:
        """The compiled items of an array node (rule path ``<array>[]``, else the array's normalisers)."""
        if node.items is None:
            raw_items = node.schema.get("items")
            node.items = _compile(self.tool, raw_items if isinstance(raw_items, Mapping) else {}, node.rpath,
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

    def _array(self, node: _Node, e: Any, g: Any, path: str) -> list[FieldResult]:
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

    def _multiset(self, items: _Node, e: Sequence[Any], g: Sequence[Any], path: str) -> tuple[bool, str]:
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

    def _scalar_keys(self, items: _Node, values: Sequence[Any]) -> list[Any] | None:
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

    def _composite(self, node: _Node, names: tuple[str, ...], rule: Rule,
                   exp: Mapping[str, Any], emi: Mapping[str, Any], path: str) -> FieldResult | None:
        cpath = self.join(path, "+".join(names))
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
        e_rows, g_rows = list(zip(*e)), list(zip(*g))
        if len(e_rows) != len(g_rows):
            return FieldResult(cpath, False, rule.source, f"{len(g_rows)} pairs where the label has {len(e_rows)}",
                               shown_e, shown_g)
        # each column's items, judged by the rule at <field>[] (found under the group's path)
        cols = []
        for n in names:
            sub = node.props.get(n)
            item_schema = (sub.schema.get("items") if sub is not None else None) or {}
            col_rule = self.item_rule(self.join(node.rpath, n), sub.rule if sub is not None else None)
            cols.append(_compile(self.tool, item_schema, self.join(node.rpath, "+".join(names)), col_rule, self.rules))

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


# ---------------------------------------------------------------- a label call, compiled


class _Form(NamedTuple):
    """How a scalar schema position is judged by value alone (see :func:`_scalar_form`)."""

    canon: Callable[[Any], Any]  # value -> canonical form, or _MISSING when the type cannot match
    rule: str  # the rule name a passing result carries (null: ``null_rule``)
    null_rule: str
    tolerant: bool  # numbers: equal within tolerance without equal canonical forms
    enum: frozenset[Any] | None  # the enum's members as JSON keys (:func:`_members`)


def _scalar_form(node: _Node) -> _Form | None:
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
        return _Form(_canon_enum, "schema:enum", null_rule, False, _members(node))
    if node.kind == "boolean":
        return _Form(_canon_bool, node.src or "schema:boolean", null_rule, False, None)
    if node.kind in ("number", "integer"):
        canon = _canon_int if node.kind == "integer" else _canon_number
        return _Form(canon, node.src or f"schema:{node.kind}", null_rule, True, None)
    if node.str_raw:
        return _Form(_canon_raw, "raw", null_rule, False, None)
    norm = normaliser(node.str_steps or ())
    return _Form(lambda g: norm(g) if type(g) is str else _MISSING, node.str_src, null_rule,
                 False, None)


_NULL = object()  # canonical form of null


def _scalar(g: Any) -> bool:
    return type(g) in _SCALAR_TYPES


def _canon_raw(g: Any) -> Any:
    return g if type(g) is str else _MISSING


def _canon_bool(g: Any) -> Any:
    return g if type(g) is bool else _MISSING


def _canon_number(g: Any) -> Any:
    return g if type(g) is int or (type(g) is float and g == g) else _MISSING


def _canon_int(g: Any) -> Any:
    return g if type(g) is int or (type(g) is float and g.is_integer()) else _MISSING


def _canon_enum(g: Any) -> Any:
    if type(g) is str:
        return unicodedata.normalize("NFKC", g)
    if type(g) is bool:
        return (bool, g)  # a boolean member is never a number (True == 1 in Python)
    return g if type(g) in (int, float) and g == g else _MISSING


def _near(a: float, b: float) -> bool | None:
    """Numbers ``a`` and ``b`` are equal within the comparator's tolerance (relative 1e-9,
    ``math.isclose``); ``None`` when they are too large to tell (``OverflowError``).
    """
    try:
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    except OverflowError:
        return None


def _close_pair(values: Iterable[Any]) -> bool:
    """Two different numbers among ``values`` within the comparator's tolerance (or too large to tell)."""
    numbers = [v for v in values if _is_number(v)]
    return any(a != b and _near(a, b) is not False for a in numbers for b in numbers)


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
        self.first = first  # the first alternative that is not "$omitted" (_MISSING: none)
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
        self.numbers = tuple(alt for _, alt, _ in values.values() if _is_number(alt))  # for tolerance
        # a scalar emitted exactly as an alternative is written (same type and value): its results,
        # made once by :meth:`results` itself and shared (results are immutable, scalars too)
        self.exact: dict[Any, tuple[type, list[FieldResult]]] = {}
        for _, alt, _ in values.values():
            if type(alt) in _SCALAR_TYPES and not (type(alt) is float and alt == 0):  # -0.0 == 0.0: keep the sign
                same = self.results(alt)
                if same is not None:
                    self.exact.setdefault(alt, (type(alt), same))

    def _same(self, g: Any) -> list[FieldResult] | None:
        """The results made once for ``g`` when it is an alternative as written (same type and value)."""
        if type(g) in _SCALAR_TYPES:
            same = self.exact.get(g)
            if same is not None and same[0] is type(g):
                return same[1]
        return None

    def _hit(self, g: Any) -> tuple[int, Any, Any] | None:
        key = self.canon(g)
        if key is _MISSING:
            return None
        hit = self.values.get(key)
        if hit is None:
            return None
        if self.enum is not None and g is not None and not (_json_key(g) in self.enum if self.item_paths is None
                                                                 else all(x is None or _json_key(x) in self.enum
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
        if 0 <= self.omit_at < index and _same_json(g, self.default):  # the earlier "$omitted" alternative takes it
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
        if self.tolerant and (type(g) is list or _is_number(g) and any(_near(g, a) is not False for a in self.numbers)):
            return None  # within tolerance of an alternative: only the comparator can tell
        if type(g) not in _JSON_TYPES or (type(g) is list and any(type(x) not in _JSON_TYPES for x in g)):
            return None
        if self.omitted is not None and _same_json(g, self.default):
            return 0
        first = self.first
        if self.item_paths is None or type(g) is not list or type(first) is not list or len(g) != len(first):
            return 1
        canon, enum = self.item_canon, self.enum
        return sum(not (canon(b) == canon(a) is not _MISSING and (enum is None or b is None or _json_key(b) in enum))
                   for a, b in zip(first, g))


def _accepting(node: _Node, e: Any, path: str, items_of: Callable[[_Node], _Node]) -> _Accept | None:
    """The :class:`_Accept` of a field whose label value (or ``$any_of`` alternatives) is ``e``.

    ``None`` when the field is not judged by value alone (:func:`_scalar_form`): an object, an
    array compared as a set or holding more than scalars, or an alternative the canonical forms
    cannot express.
    """
    any_of = _is_mapping(e) and ANY_OF in e
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
            return _MISSING
        key = tuple(map(canon_item, g))
        return _MISSING if _MISSING in key else key

    def canon_field(g: Any) -> Any:
        return _NULL if g is None else canon_array(g)

    canon = canon_item if array_rule is None else canon_field
    values: dict[Any, tuple[int, Any, Any]] = {}
    omitted: tuple[int, Any] | None = None
    first: Any = _MISSING
    seen: list[Any] = []
    for i, alt in enumerate(alts):
        if any_of and _is_mapping(alt) and alt.get(OMITTED):
            omitted = omitted or (i, alt)
            continue
        if first is _MISSING:
            first = alt
        if alt is None:
            values.setdefault(_NULL, (i, None, node.src or "schema:null"))
            continue
        items = alt if array_rule is not None and type(alt) is list else [alt]
        if not all(_scalar(x) and not (type(x) is float and x != x) for x in items):
            return None
        key = canon(alt)
        if key is _MISSING:
            return None  # an alternative the field's type can never accept: the comparator says so
        if array_rule is None:
            rule_of: Any = form.rule
        elif not alt:
            rule_of = array_rule
        else:
            rule_of = tuple(form.null_rule if x is None else form.rule for x in alt)
        values.setdefault(key, (i, alt, rule_of))
        seen.extend(items)
    if form.tolerant and _close_pair(seen):
        return None  # tolerance could let an earlier alternative take a value equal to a later one
    return _Accept(path, canon, canon_item, values, first, omitted, node.default, form, array_rule)


@dataclass(slots=True, eq=False)
class _Key:
    """One key of a compiled label call."""

    key: str
    node: _Node
    path: str  # display path, ``tool.key``
    expected: Any  # the label's value, the schema default filled in
    default: Any  # what an omitted emitted value reads as
    required: bool
    accept: _Accept | None
    missing: list[FieldResult] | None  # required: the comparator's result when the key is absent (one failure)


class ArgsPlan:
    """A label call's arguments compiled against its tool's schema under a rule set.

    :meth:`run` gives the same results as :func:`compare_args` (paths prefixed ``tool.``), with
    each field judged by value alone looked up by canonical form (:class:`_Accept`); a field the
    lookup does not accept, and every object whose schema has fields judged together, goes to
    the comparator.  Built by :func:`compile_call`.
    """

    __slots__ = ("declared", "expected", "keys", "node", "rules", "tool", "used")

    def __init__(self, tool: str, node: _Node, expected: Mapping[str, Any], rules: RuleSet) -> None:
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
        comparer = _Comparer(tool, rules, _NO_CONTEXT)
        exp = comparer._with_defaults(node, expected) if node.defaults else expected
        keys = []
        for key, sub in comparer.judged(node, expected):
            e = exp.get(key, _MISSING)
            default = sub.default if key in node.props and node.defaults else _MISSING
            path = f"{tool}.{key}"
            try:
                accept = _accepting(sub, e, path, comparer.items) if e is not _MISSING else None
            except Exception:  # e.g. an array's item schema that cannot be read: left to the comparator,
                accept = None  # which meets the same error when a value reaches it
            required = key in node.required
            missing = comparer.key(sub, e, default, path, True, True) if required else None
            keys.append(_Key(key, sub, path, e, default, required, accept, missing))
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
        """Compare the emitted arguments ``got``; one :class:`FieldResult` per judged field."""
        node = self.node
        keys = self.keys if self.keys is not None else self._build()
        if keys is None:
            return self.compare(got, ctx)
        comparer: _Comparer | None = None
        results: list[FieldResult] = []
        if self.declared is not None and not got.keys() <= self.declared:
            comparer = _Comparer(self.tool, self.rules, ctx or _NO_CONTEXT)
            results.extend(comparer.undeclared(node, got, self.tool))
        for k in keys:
            g = got.get(k.key, _MISSING)
            if g is _MISSING:
                if k.missing is not None:
                    results.extend(k.missing)
                    continue
            elif k.accept is not None:
                hit = k.accept.results(g)
                if hit is not None:
                    results.extend(hit)
                    continue
            if comparer is None:
                comparer = _Comparer(self.tool, self.rules, ctx or _NO_CONTEXT)
            absent = g is _MISSING
            results.extend(comparer.key(k.node, k.expected, k.default if absent else g, k.path, k.required, absent))
        return results

    def compare(self, got: Mapping[str, Any], ctx: CompareContext | None = None) -> list[FieldResult]:
        """:meth:`run` through the comparator alone (no use is counted towards compiling)."""
        return _Comparer(self.tool, self.rules, ctx or _NO_CONTEXT).object(self.node, self.expected, got, self.tool)

    def failures(self, got: Mapping[str, Any], ctx: CompareContext | None = None) -> int:
        """How many of :meth:`run`'s results would fail, without writing them where it can.

        Used to cost the pairs of a parallel turn's assignment; the chosen pairs are then run.
        """
        keys = self.keys if self.keys is not None else self._build()
        if keys is None:
            return sum(not r.ok for r in self.run(got, ctx))
        node = self.node
        n = 0
        if self.declared is not None and not got.keys() <= self.declared:
            n += sum(key not in node.props for key in got)
        comparer: _Comparer | None = None
        for k in keys:
            g = got.get(k.key, _MISSING)
            if g is _MISSING:
                if k.missing is not None:
                    n += 1
                    continue
            elif k.accept is not None:
                failing = k.accept.failing(g)
                if failing is not None:
                    n += failing
                    continue
            if comparer is None:
                comparer = _Comparer(self.tool, self.rules, ctx or _NO_CONTEXT)
            absent = g is _MISSING
            n += sum(not r.ok for r in comparer.key(k.node, k.expected, k.default if absent else g, k.path,
                                                    k.required, absent))
        return n


def compile_call(tool: str, schema: Mapping[str, Any], expected: Mapping[str, Any], rules: RuleSet) -> ArgsPlan:
    """A new :class:`ArgsPlan` of the label arguments ``expected`` for ``tool`` (its schema compiled once per rules)."""
    return ArgsPlan(tool, _plan(tool, schema or {}, rules), expected, rules)


def _norm_item(x: Any) -> Any:
    """A hashable form of a list member or state value: JSON equality (:func:`_json_key`), text
    through NFKC, casefold and strip at every depth.
    """
    return _json_key(x, _LOOSE_TEXT)


_LOOSE_TEXT = normaliser(("nfkc", "casefold", "strip"))


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
    rules = rules or _NO_RULES
    comparer = _Comparer(tool, rules, ctx or _NO_CONTEXT)
    return comparer.object(_plan(tool, schema or {}, rules), expected, got, "", subset=subset)


_NO_RULES = RuleSet()
_NO_CONTEXT = CompareContext()
