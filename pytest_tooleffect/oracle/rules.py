"""The family's oracle rule language (``oracle/<family>.yaml``).

A rules file maps ``tool.field`` paths to rules::

    version: 1
    defaults:                      # string normalisers for every field without its own
      string: {normalise: [nfkc, strip, collapse_whitespace, casefold]}
    fields:
      calendar.create_event.title: {normalise: [nfkc, casefold]}
      calendar.create_event.start+timezone: {compare: instant}       # judged together
      modify_items.item_ids+new_item_ids: {compare: paired}          # reordered together
      calendar.create_event.attendees:
        order: any
        predicates: [{superset: [ana@example.com]}]
      calendar.create_event.start:
        predicates: [{within: {start: "2025-03-19T09:00", end: "2025-03-19T18:00"}}]
      mail.reply.body: {compare: free_text, rubric: "acknowledges the booking"}
      book_reservation.passengers.first_name: {normalise: [casefold]}   # into array items
      "*.user_id": {compare: exact}                                     # any tool

Paths go through nested objects and array items by field name (no indices).  A key holding
``+`` names fields of one object judged together.  ``compare`` is one of ``exact`` (a value
as written under JSON equality: no normalisers, no tolerance, numbers by value, ``true`` is not
``1``; an array item by item, in order unless ``order: any``, its items exact unless a
``<array>[]`` rule says otherwise; an object field by field, each under its own rules),
``string``,
``number``, ``boolean``, ``date``, ``datetime``, ``instant`` (date-time + zone field),
``paired`` (index-paired lists), ``free_text``, ``any`` (every value accepted) and ``none``
(only the predicates judge).  Predicates: ``within``, ``superset``, ``equals_state``,
``in_messages``, ``pattern``, ``range``, ``callable``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_tooleffect.oracle.values import parse_datetime

__all__ = ["COMPARES", "NORMALISERS", "PREDICATES", "Rule", "RuleError", "RuleSet", "UniqueKeyLoader",
           "document_digest", "load_rules"]

COMPARES = frozenset(
    {"exact", "string", "number", "boolean", "date", "datetime", "instant", "paired", "free_text", "any", "none"}
)
NORMALISERS = frozenset({"nfkc", "casefold", "strip", "collapse_whitespace", "strip_punctuation"})
#: The rule-language versions a rules file may declare (``version:``; absent = the last).
RULES_VERSIONS: tuple[int, ...] = (1,)
PREDICATES = frozenset({"within", "superset", "equals_state", "in_messages", "pattern", "range", "callable"})
_RULE_KEYS = frozenset({"compare", "normalise", "order", "predicates", "numeric_strings", "threshold", "rubric"})


_SURROGATE = re.compile("[\ud800-\udfff]")


class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    r"""YAML's safe loader refusing a key given twice in one mapping (plain YAML keeps the last one
    without a word), and a scalar holding a lone surrogate (a double-quoted ``"\ud800"``: not
    valid Unicode; PyYAML does not join a pair of such escapes either, so a character past U+FFFF is
    written ``\U0001F600`` or as itself; libyaml's parser, when present, refuses the escape itself).
    A merge key (``<<``) may still be overridden.
    """

    def construct_scalar(self, node: Any) -> Any:
        value = super().construct_scalar(node)
        # the oracle imports only itself and the formats: util.unicode's test, inlined
        found = _SURROGATE.search(value) if isinstance(value, str) and not value.isascii() else None
        if found is not None:
            mark = node.start_mark
            raise yaml.YAMLError(f"line {mark.line + 1}, column {mark.column + 1}: the text holds U+"
                                 f"{ord(found.group()):04X}, a lone surrogate, at character {found.start()}: not "
                                 "valid Unicode text (a character "
                                 "past U+FFFF is written as itself or as \\UXXXXXXXX, never as two \\u escapes)")
        return value

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # an unhashable key: the constructor refuses it itself
                    continue
                if first is not key_node.start_mark:
                    mark = key_node.start_mark
                    raise yaml.YAMLError(f"line {mark.line + 1}, column {mark.column + 1}: the key {key!r} is "
                                         f"given twice in one mapping (first on line {first.line + 1})")
        return super().construct_mapping(node, deep)


class RuleError(ValueError):
    """A rules file or rule that cannot be read; the message names the file and the key."""


@dataclass(frozen=True)
class Rule:
    """How one field (or a group of fields judged together) is compared.

    Attributes:
        compare: comparator name (see module docstring); ``None`` picks it from the schema.
        normalise: string normalisers applied to both sides, in order.
        order: ``"ordered"`` or ``"any"`` for arrays (``"any"`` = multiset, optimal matching).
        predicates: constraint predicates on the emitted value, each ``{name: argument}``.
        numeric_strings: accept ``"12"`` where a number is declared.
        threshold: free-text fallback: minimum token Jaccard similarity (0–1).
        rubric: free-text rubric for the LLM judge.
        source: where the rule came from, shown in records (``rule:<key>``, ``default:<type>``).

    """

    compare: str | None = None
    normalise: tuple[str, ...] | None = None
    order: str | None = None
    predicates: tuple[Mapping[str, Any], ...] = ()
    numeric_strings: bool = False
    threshold: float = 0.5
    rubric: str | None = None
    source: str = ""


def _parse_rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise RuleError(f"{where}: a rule must be a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise RuleError(f"{where}: unknown rule keys {sorted(unknown)} (known: {sorted(_RULE_KEYS)})")
    compare = raw.get("compare")
    if compare is not None and compare not in COMPARES:
        raise RuleError(f"{where}: compare {compare!r} is not one of {sorted(COMPARES)}")
    norm = raw.get("normalise")
    if norm is not None:
        if isinstance(norm, str):
            norm = [norm]
        if not isinstance(norm, list) or not all(isinstance(n, str) for n in norm):
            raise RuleError(f"{where}: normalise is a list of normaliser names")
        bad = [n for n in norm if n not in NORMALISERS]
        if bad:
            raise RuleError(f"{where}: unknown normalisers {bad} (known: {sorted(NORMALISERS)})")
    if compare == "exact" and norm is not None:
        raise RuleError(f"{where}: compare: exact compares the value as written; it takes no normalise")
    # keys another comparator would never read: refused, not ignored
    if compare != "free_text" and ("threshold" in raw or "rubric" in raw):
        raise RuleError(f"{where}: threshold and rubric are read by compare: free_text only")
    if compare not in (None, "number") and "numeric_strings" in raw:
        raise RuleError(f"{where}: numeric_strings is read by number fields only (no compare, or compare: number)")
    order = raw.get("order")
    if order is not None and order not in ("ordered", "any"):
        raise RuleError(f"{where}: order must be 'ordered' or 'any', got {order!r}")
    preds = raw.get("predicates") or []
    if not isinstance(preds, list):
        raise RuleError(f"{where}: predicates must be a list")
    for p in preds:
        if not isinstance(p, Mapping) or len(p) != 1 or next(iter(p)) not in PREDICATES:
            raise RuleError(f"{where}: each predicate is one of {sorted(PREDICATES)} with its argument, got {p!r}")
        _check_predicate(*next(iter(p.items())), where)
    threshold = raw.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise RuleError(f"{where}: threshold must be a number in [0, 1]")
    if not isinstance(raw.get("numeric_strings", False), bool):
        raise RuleError(f"{where}: numeric_strings must be true or false")
    if raw.get("rubric") is not None and not isinstance(raw.get("rubric"), str):
        raise RuleError(f"{where}: rubric must be text")
    return Rule(
        compare=compare,
        normalise=tuple(norm) if norm is not None else None,
        order=order,
        predicates=tuple(preds),
        numeric_strings=bool(raw.get("numeric_strings", False)),
        threshold=float(threshold),
        rubric=raw.get("rubric"),
        source=where,
    )


def _check_predicate(name: str, arg: Any, where: str) -> None:
    """Reject predicate arguments that could only fail at scoring time."""
    import re

    def bad(expected: str) -> RuleError:
        return RuleError(f"{where}: predicate {name} takes {expected}, got {arg!r}")

    if name == "within":
        if not isinstance(arg, Mapping) or not set(arg) <= {"start", "end"} or not arg:
            raise bad("{start: ISO date-time, end: ISO date-time}")
        for key, value in arg.items():
            try:
                parse_datetime(value, None)
            except ValueError as exc:
                raise RuleError(f"{where}: predicate within.{key}: {exc}") from exc
    elif name == "superset" and not isinstance(arg, (list, str)):
        raise bad("a list of required members, or the name of a list in the state")
    elif name == "equals_state" and not isinstance(arg, str):
        raise bad("the dotted name of a state value")
    elif name == "in_messages" and arg is not True:
        raise bad("true")
    elif name == "pattern":
        if not isinstance(arg, str):
            raise bad("a regular expression")
        try:
            re.compile(arg)
        except re.error as exc:
            raise RuleError(f"{where}: predicate pattern: invalid regular expression: {exc}") from exc
    elif name == "range":
        if (not isinstance(arg, Mapping) or not arg or not set(arg) <= {"min", "max"}
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in arg.values())):
            raise bad("{min: number, max: number}")
    elif name == "callable":
        if not (isinstance(arg, str) or (isinstance(arg, Mapping) and isinstance(arg.get("name"), str))):
            raise bad("a registered name, or {name: NAME, **parameters}")


@dataclass(frozen=True)
class RuleSet:
    """Compiled rules: per-field rules keyed ``tool.path``, composites, per-type defaults.

    ``compiled`` caches each tool schema compiled under these rules (filled by the comparator;
    keyed by tool name and the schema's identity, so a schema may not change once compared).
    Label calls compiled against a schema are kept on the label itself.
    """

    fields: Mapping[str, Rule] = field(default_factory=dict)
    defaults: Mapping[str, Rule] = field(default_factory=dict)
    composites: Mapping[str, tuple[tuple[tuple[str, ...], Rule], ...]] = field(default_factory=dict)
    compiled: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict, init=False, repr=False,
                                                             compare=False)
    #: SHA-256 (16 hex digits) of the rules document as parsed (canonical JSON): two files that say the
    #: same thing in other words or comments share it; no rules at all is the digest of ``{}``
    digest: str = field(default="", compare=False)

    @functools.cached_property
    def calls_out(self) -> bool:
        """Some rule runs code outside the oracle: a ``callable`` predicate, or the free-text judge.

        Scoring then never runs a comparison twice (a paid judge call, a predicate with state).
        """
        rules = [*self.fields.values(), *self.defaults.values(), *(r for group in self.composites.values()
                                                                   for _, r in group)]
        return any(r.compare == "free_text" or any("callable" in p for p in r.predicates) for r in rules)

    def lookup(self, tool: str, path: str) -> Rule | None:
        """The rule of ``tool.path`` (``path`` without array indices), else of ``*.path``."""
        if not self.fields:
            return None
        return self.fields.get(f"{tool}.{path}") or self.fields.get(f"*.{path}")

    def unknown_tools(self, tools: Sequence[str]) -> list[str]:
        """Rule keys naming a tool outside ``tools`` (a typo would otherwise be ignored)."""
        keys = [*self.fields, *self.composites]
        out = []
        for key in keys:
            if key.startswith("*"):
                continue
            if not any(key == t or key.startswith(t + ".") for t in tools):
                out.append(key)
        return sorted(set(out))

    def callables(self) -> list[tuple[str, str]]:
        """The user predicates the rules call: ``(rule key, predicate name)`` pairs, sorted.

        Returns:
            One pair per ``callable`` predicate, keyed ``fields.<key>`` (``defaults.<type>``).
        """
        rules = [*((f"fields.{k}", r) for k, r in self.fields.items()),
                 *((f"defaults.{k}", r) for k, r in self.defaults.items()),
                 *((f"fields.{head}.{'+'.join(names)}", r) for head, groups in self.composites.items()
                   for names, r in groups)]
        out = set()
        for key, rule in rules:
            for pred in rule.predicates:
                if "callable" in pred:
                    arg = pred["callable"]
                    out.add((key, str(arg if isinstance(arg, str) else arg.get("name"))))
        return sorted(out)

    def unknown_fields(self, schemas: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
        """Rule keys whose path is not a field of the tool's schema (a typo would otherwise be ignored).

        A path goes through nested objects and array items by field name (a last ``[]`` means
        the array's items); it stops being checked where the schema does not say which fields
        an object has (no ``properties``, ``additionalProperties`` allowed, ``anyOf``/``oneOf``/
        ``allOf``/``$ref``).  A wildcard key (``*.field``) needs one tool that has the path; keys
        naming no tool of ``schemas`` (:meth:`unknown_tools` reports those) are not judged here.

        Args:
            schemas: each tool's JSON-schema ``parameters`` by tool name.

        Returns:
            ``(key, reason)`` pairs, sorted by key.
        """
        out = []
        keys = [*self.fields, *(f"{head}.{name}" for head, groups in self.composites.items()
                                for names, _ in groups for name in names)]
        for key in sorted(set(keys)):
            if key.startswith("*.") and schemas:  # any tool: at least one must have the field
                reasons = [_missing_field(schema, key[2:].split(".")) for schema in schemas.values()]
                if all(reasons):
                    out.append((key, f"no tool of the family has the field {key[2:]!r}"))
                continue
            tool = max((t for t in schemas if key.startswith(t + ".")), key=len, default=None)
            if key.startswith("*") or tool is None:
                continue
            why = _missing_field(schemas[tool], key[len(tool) + 1:].split("."))
            if why is not None:
                out.append((key, f"{tool} has no field {why}"))
        return out

    def composites_at(self, tool: str, prefix: str) -> tuple[tuple[tuple[str, ...], Rule], ...]:
        """Groups of fields judged together inside the object at ``prefix`` (``""`` = top)."""
        key = f".{prefix}" if prefix else ""
        return self.composites.get(tool + key, ()) + self.composites.get("*" + key, ())

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None, origin: str = "<rules>") -> RuleSet:
        """Compile a parsed rules document.

        Raises:
            RuleError: unknown keys, comparators, normalisers or predicates, or a ``version``
                not in :data:`RULES_VERSIONS` (names ``origin``).

        """
        if not raw:
            return cls(digest=document_digest({}))
        if not isinstance(raw, Mapping):
            raise RuleError(f"{origin}: the rules document must be a mapping")
        extra = set(raw) - {"version", "defaults", "fields", "description"}
        if extra:
            raise RuleError(f"{origin}: unknown top-level keys {sorted(map(str, extra))}")
        version = raw.get("version", RULES_VERSIONS[-1])
        if isinstance(version, bool) or version not in RULES_VERSIONS:
            raise RuleError(f"{origin}: version: {version!r} is not a version of the rule language this release "
                            f"reads ({', '.join(map(str, RULES_VERSIONS))}; absent = {RULES_VERSIONS[-1]})")
        for section in ("defaults", "fields"):
            value = raw.get(section)
            if value is not None and not isinstance(value, Mapping):
                raise RuleError(f"{origin}: {section} must be a mapping")
            if any(not isinstance(k, str) for k in value or {}):
                raise RuleError(f"{origin}: {section}: every key is text ('tool.field')")
        for t, r in (raw.get("defaults") or {}).items():  # only the string normalisers are read: say so, never ignore
            if t != "string" or (isinstance(r, Mapping) and set(r) - {"normalise"}):
                raise RuleError(f"{origin}: defaults.{t}: a family default is string: {{normalise: [...]}} only; "
                                "give other types and comparators per field (fields: {tool.field: ...}, '*.field')")
        defaults = {t: _parse_rule(r, f"{origin}: defaults.{t}") for t, r in (raw.get("defaults") or {}).items()}
        defaults = {t: Rule(**{**r.__dict__, "source": f"default:{t}"}) for t, r in defaults.items()}
        fields_: dict[str, Rule] = {}
        composites: dict[str, list[tuple[tuple[str, ...], Rule]]] = {}
        for key, r in (raw.get("fields") or {}).items():
            rule = _parse_rule(r, f"{origin}: fields.{key}")
            rule = Rule(**{**rule.__dict__, "source": f"rule:{key}"})
            head, _, last = key.rpartition(".")
            if "+" in last:
                if not head:
                    raise RuleError(f"{origin}: fields.{key}: a composite key needs a tool name before the fields")
                names = tuple(last.split("+"))
                if rule.compare not in ("instant", "paired") or len(names) != 2:
                    raise RuleError(
                        f"{origin}: fields.{key}: fields judged together take compare: instant "
                        "(date-time+zone) or compare: paired (two index-paired lists)"
                    )
                unread = [k for k in ("normalise", "order", "predicates") if k in r]
                if unread:
                    raise RuleError(f"{origin}: fields.{key}: a group rule reads only compare; "
                                    f"{', '.join(unread)} would be ignored (give them to each field)")
                composites.setdefault(head, []).append((names, rule))
            else:
                if "." not in key:
                    raise RuleError(f"{origin}: fields.{key}: a rule key is 'tool.field'")
                fields_[key] = rule
        return cls(fields_, defaults, {k: tuple(v) for k, v in composites.items()}, digest=document_digest(raw))


def document_digest(document: Any) -> str:
    """SHA-256 (16 hex digits) of a parsed document's canonical JSON (keys sorted; a value JSON
    cannot hold, a YAML date, as its text).
    """
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _closed_properties(node: Any) -> Mapping[str, Any] | None:
    """The properties of an object schema that says which fields it has, else ``None`` (open)."""
    if not isinstance(node, Mapping) or any(k in node for k in ("anyOf", "oneOf", "allOf", "$ref")):
        return None
    props = node.get("properties")
    if not isinstance(props, Mapping) or node.get("additionalProperties") not in (None, False):
        return None
    return props


def _missing_field(schema: Mapping[str, Any], segments: Sequence[str]) -> str | None:
    """The first segment of a rule path the schema does not have (quoted, with its parent), else ``None``."""
    node: Any = schema
    done: list[str] = []
    for seg in segments:
        name, items = (seg[:-2], True) if seg.endswith("[]") else (seg, False)
        while isinstance(node, Mapping) and (node.get("type") == "array" or "items" in node):
            node = node.get("items")  # paths go into array items by field name
        kind = node.get("type") if isinstance(node, Mapping) else None
        if kind in ("string", "number", "integer", "boolean", "null") and done:
            return f"{name!r} in {'.'.join(done)} (a {kind}, not an object)"
        props = _closed_properties(node)
        if props is None:
            return None
        if name not in props:
            where = ".".join(done)
            return f"{name!r}" + (f" in {where}" if where else "") + f" (fields: {', '.join(sorted(props)) or 'none'})"
        node = props[name]
        done.append(seg)
        if items:
            if not (isinstance(node, Mapping) and (node.get("type") == "array" or "items" in node)):
                return f"{seg!r}: {name} is not an array"
            node = node.get("items")
    return None


def load_rules(path: str | Path) -> RuleSet:
    """Read and compile a YAML (or JSON) rules file.

    Raises:
        RuleError: the file is missing, does not parse, or holds an unknown rule.

    """
    p = Path(path)
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)
    except FileNotFoundError as exc:
        raise RuleError(f"{p}: rules file not found") from exc
    except yaml.YAMLError as exc:
        raise RuleError(f"{p}: not valid YAML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"{p}: cannot read: {exc}") from exc
    return RuleSet.from_mapping(raw, str(p))
