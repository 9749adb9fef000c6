"""A family's rules against its tools' schemas: every rule takes effect or is refused at load.

:func:`rule_problems` resolves each rule key to the schema position it names and refuses what
the comparator would never read there (DESIGN.md scoring rule 8), so that nothing the rules
file states is accepted and then silently ignored:

* a key naming no field of the tool's schema (a closed object, or a path through a scalar), or
  with ``[]`` anywhere but at its end;
* a comparator that cannot judge the field's type (``compare: string`` on an array, ``number`` on
  a string, ``date`` on an object, …); ``instant`` and ``paired`` judge two fields together
  (``tool.start+timezone``) and are refused on one field;
* ``normalise`` where no string is compared: a number, boolean or object field, a date or
  date-time field without ``compare: string``, an enum field (compared by membership), an array
  whose items are not strings or have their own ``<array>[]`` rule, or beside a comparator that
  reads no normalisers (``number``, ``date``, ``free_text``, ``any``, …);
* ``order`` on a field that is not an array, or beside a comparator that does not walk arrays;
* ``numeric_strings`` on a field that is not a number (and not ``compare: number``);
* ``predicates`` on array items (``<array>[]``: predicates judge a field, never its items), and
  a predicate on a field whose type it cannot accept (:data:`~.predicates.INPUT_TYPES`:
  ``range`` reads numbers, ``superset`` arrays, ``pattern`` and ``within`` strings), which
  would fail every call;
* a rule below a field compared ``any`` or ``none`` (the comparator does not descend there), and
  a rule on a field that a group rule (``a+b``) already judges;
* a group whose fields do not exist, or are not a date-time string and a zone string
  (``instant``) or two arrays (``paired``).

A position the schema leaves untyped (no ``type``, an ``anyOf``, a type list) accepts every
comparator: its type depends on the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_tooleffect.oracle.predicates import INPUT_TYPES
from pytest_tooleffect.oracle.rules import Rule, RuleSet

__all__ = ["COMPARE_TYPES", "field_type", "rule_problems"]

#: The field types each comparator judges (``untyped``: the schema does not say).
COMPARE_TYPES: Mapping[str, frozenset[str]] = {
    "exact": frozenset({"string", "number", "integer", "boolean", "array", "object", "untyped", "null"}),
    "any": frozenset({"string", "number", "integer", "boolean", "array", "object", "untyped", "null"}),
    "none": frozenset({"string", "number", "integer", "boolean", "array", "object", "untyped", "null"}),
    "string": frozenset({"string", "untyped"}),
    "free_text": frozenset({"string", "untyped"}),
    "date": frozenset({"string", "untyped"}),
    "datetime": frozenset({"string", "untyped"}),
    "number": frozenset({"number", "integer", "untyped"}),
    "boolean": frozenset({"boolean", "untyped"}),
    "instant": frozenset(),
    "paired": frozenset(),
}
_NORMALISED_BY = (None, "string")  # the comparators that read normalisers on a string
_ORDERED_BY = (None, "exact")  # the comparators that walk an array item by item


def field_type(schema: Any) -> str:
    """The type of a schema position as the rule check reads it.

    Args:
        schema: a JSON-schema position (anything but a mapping reads as untyped).

    Returns:
        ``string``, ``number``, ``integer``, ``boolean``, ``array``, ``object``, ``null`` or
        ``untyped`` (no type, several non-null types, or only ``anyOf`` / ``oneOf``).

    """
    if not isinstance(schema, Mapping):
        return "untyped"
    t = schema.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        t = rest[0] if len(rest) == 1 else None
    if isinstance(t, str) and t in ("string", "number", "integer", "boolean", "array", "object", "null"):
        return t
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "untyped"


def _a(kind: str) -> str:
    """``kind`` with its indefinite article."""
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _items(schema: Mapping[str, Any]) -> Any:
    items = schema.get("items")
    return items if isinstance(items, Mapping) else {}


def _resolve(schema: Mapping[str, Any], parts: list[str]) -> tuple[Any, list[tuple[str, Any]]] | str:
    """The schema at ``parts`` (array items passed through) and the positions on the way.

    Returns ``(schema, [(path, schema), ...])`` (the ancestors by rule path, arrays' items as
    ``path[]``), or the reason the path names nothing.
    """
    here: Any = schema
    trail: list[tuple[str, Any]] = []
    path = ""
    for part in parts:
        while field_type(here) == "array":
            trail.append((path + "[]", _items(here)))
            here = _items(here)
        kind = field_type(here)
        if kind not in ("object", "untyped"):
            return f"{path or 'the arguments'} is {_a(kind)} field: it has no field {part!r}"
        props = here.get("properties") if isinstance(here, Mapping) else None
        props = props if isinstance(props, Mapping) else {}
        if part in props:
            here = props[part]
        elif kind == "object" and here.get("additionalProperties") is not True:
            known = ", ".join(sorted(props)) or "none"
            return f"the schema declares no field {part!r} at {path or 'the top'} (declared: {known})"
        else:
            here = {}  # a key an open object allows: untyped
        path = f"{path}.{part}" if path else part
        trail.append((path, here))
    return here, trail


def _field_problems(rule: Rule, schema: Any, items_rule: bool, own_items_rule: bool) -> list[str]:
    """Why ``rule`` would not take effect on ``schema`` (empty when it does)."""
    kind = field_type(schema)
    fmt = schema.get("format") if isinstance(schema, Mapping) else None
    enum = isinstance(schema, Mapping) and "enum" in schema
    compare = rule.compare
    out: list[str] = []
    if compare in ("instant", "paired"):
        out.append(f"compare: {compare} judges two fields together (a key 'tool.a+b'); "
                   + ("for one date-time field use compare: datetime" if compare == "instant"
                      else "one array is compared item by item (order: any for a multiset)"))
    elif compare is not None and kind not in COMPARE_TYPES[compare]:
        out.append(f"compare: {compare} cannot judge {_a(kind)} field "
                   f"(it judges {', '.join(sorted(COMPARE_TYPES[compare] - {'untyped'})) or 'no single field'})")
    if rule.normalise is not None:
        if compare not in _NORMALISED_BY:
            out.append(f"normalise is not read by compare: {compare}")
        elif kind == "array":
            item_kind = field_type(_items(schema))
            if own_items_rule:
                out.append("normalise on an array applies to its items, which have their own rule ('<array>[]')")
            elif item_kind not in ("string", "untyped"):
                out.append(f"normalise on an array applies to its items, which are {item_kind}s, not strings")
        elif kind not in ("string", "untyped"):
            out.append(f"normalise is read on strings; this is {_a(kind)} field")
        elif compare is None and fmt in ("date", "date-time"):
            out.append(f"a {fmt} field is compared as {'a date' if fmt == 'date' else 'an instant'}, not as text: "
                       "normalise is not read (add compare: string to compare it as text)")
        elif compare is None and enum:
            out.append("an enum field is compared by membership: normalise is not read "
                       "(add compare: string to compare it as text)")
    if rule.order is not None:
        if compare not in _ORDERED_BY:
            out.append(f"order is not read by compare: {compare}")
        elif kind not in ("array", "untyped"):
            out.append(f"order is read on arrays; this is {_a(kind)} field")
    if rule.numeric_strings and compare != "number" and kind not in ("number", "integer", "untyped"):
        out.append(f"numeric_strings is read on number fields; this is {_a(kind)} field")
    if rule.predicates and items_rule:
        out.append("predicates judge a field, not the items of an array: put them on the array "
                   "(superset, callable) or on the items' fields")
    elif kind != "untyped":
        for pred in rule.predicates:
            name = next(iter(pred))
            needs = INPUT_TYPES.get(name)
            if needs is not None and kind not in needs:
                out.append(f"predicate {name} reads {' or '.join(_a(t) for t in sorted(needs))}; this is "
                           f"{_a(kind)} field: it would fail every call")
    return out


def _group_problems(names: tuple[str, ...], rule: Rule, parent: Any) -> list[str]:
    props = parent.get("properties") if isinstance(parent, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    open_ = field_type(parent) == "untyped" or (isinstance(parent, Mapping)
                                                and parent.get("additionalProperties") is True)
    missing = [n for n in names if n not in props and not open_]
    if missing:
        return [f"the schema declares no field {', '.join(map(repr, missing))} (declared: "
                f"{', '.join(sorted(props)) or 'none'})"]
    kinds = [field_type(props.get(n, {})) for n in names]
    if rule.compare == "instant" and not all(k in ("string", "untyped") for k in kinds):
        return [f"compare: instant reads a date-time string and a zone string; these are {' and '.join(kinds)}"]
    if rule.compare == "paired" and not all(k in ("array", "untyped") for k in kinds):
        return [f"compare: paired reads two arrays; these are {' and '.join(kinds)}"]
    return []


def rule_problems(rules: RuleSet, tools: Mapping[str, Mapping[str, Any]],
                  unknown_tools: bool = True) -> list[tuple[str, str]]:
    """The rules of ``rules`` that would not take effect on ``tools``.

    Args:
        rules: the family's compiled rules.
        tools: each tool's JSON-schema ``parameters`` by tool name.
        unknown_tools: report a key naming a tool not in ``tools`` (off when ``tools`` holds only
            some of the family's tools, e.g. one case's own tools).

    Returns:
        ``(key, reason)`` pairs, the key as written under ``fields:`` (sorted; empty when every
        rule takes effect).

    """
    problems: list[tuple[str, str]] = []
    by_tool: dict[str, list[tuple[str, str, Rule]]] = {}  # tool -> (key, path, rule)
    for key, rule in rules.fields.items():
        tool, path = _split(key, tools)
        if tool is None:
            if unknown_tools and not key.startswith("*."):
                problems.append((key, "names no tool the family offers"))
            continue
        by_tool.setdefault(tool, []).append((key, path, rule))
    groups: list[tuple[str, str, tuple[str, ...], Rule]] = []  # (key, tool, names, rule) at head
    for head, group_rules in rules.composites.items():
        for names, rule in group_rules:
            groups.append((f"{head}.{'+'.join(names)}", head, names, rule))
    for key, rule in rules.fields.items():
        if key.startswith("*."):
            path = key[2:]
            matched = [t for t in tools if not isinstance(_resolve(tools[t], _parts(path)), str)]
            if not matched and tools and unknown_tools:
                problems.append((key, f"no tool has a field {path!r} (tools: {', '.join(sorted(tools))})"))
            for t in matched:
                if rules.fields.get(f"{t}.{path}") is None:  # a tool's own rule wins over the wildcard
                    by_tool.setdefault(t, []).append((key, path, rule))
    for tool, entries in by_tool.items():
        schema = tools[tool]
        for key, path, rule in entries:
            for reason in _check(rules, tool, schema, path, rule):
                problems.append((key, f"in {tool}: {reason}" if key.startswith("*.") else reason))
    for key, head, names, rule in groups:
        tool, prefix = _split(head, tools)
        targets = [(tool, prefix)] if tool is not None else (
            [(t, head[2:] if head.startswith("*.") else "") for t in tools] if head.startswith("*") else [])
        if tool is None and not head.startswith("*"):
            if unknown_tools:
                problems.append((key, "names no tool the family offers"))
            continue
        for t, pre in targets:
            found = _resolve(tools[t], _parts(pre)) if pre else (tools[t], [])
            if isinstance(found, str):
                if tool is not None:
                    problems.append((key, found))
                continue
            parent = found[0]
            while field_type(parent) == "array":
                parent = _items(parent)
            for reason in _group_problems(names, rule, parent):
                problems.append((key, reason if tool is not None else f"in {t}: {reason}"))
    return sorted(set(problems))


def _parts(path: str) -> list[str]:
    return [p for p in path.split(".") if p]


def _split(key: str, tools: Iterable[str]) -> tuple[str | None, str]:
    """``key`` as ``(tool, path)``: the longest tool name it starts with (tool names hold dots)."""
    best: str | None = None
    for t in tools:
        if (key == t or key.startswith(t + ".")) and (best is None or len(t) > len(best)):
            best = t
    if best is None:
        return None, key
    return best, key[len(best) + 1:]


def _check(rules: RuleSet, tool: str, schema: Mapping[str, Any], path: str, rule: Rule) -> list[str]:
    items_rule = path.endswith("[]")
    bare = path[:-2] if items_rule else path
    if "[]" in bare:
        return ["'[]' may only end a key (the items of the array before it); a path goes through "
                "array items by field name alone"]
    found = _resolve(schema, _parts(bare))
    if isinstance(found, str):
        return [found]
    here, trail = found
    out: list[str] = []
    if items_rule:
        if field_type(here) not in ("array", "untyped"):
            return [f"{bare} is {_a(field_type(here))} field: '[]' names the items of an array"]
        here = _items(here) if isinstance(here, Mapping) else {}
    own_items = rules.lookup(tool, bare + "[]") is not None and not items_rule
    out += _field_problems(rule, here, items_rule, own_items)
    # a rule below a field compared any / none is never read; nor is one a group already judges
    for anc_path, _ in trail[:-1] if not items_rule else trail:
        anc = rules.lookup(tool, anc_path)
        if anc is not None and anc.compare in ("any", "none") and anc_path != path:
            out.append(f"{anc_path} is compared {anc.compare}: the rules below it are never read")
    head, _, last = bare.rpartition(".")
    if not items_rule:
        for names, _grp in rules.composites_at(tool, head):
            if last in names:
                out.append(f"{last} is judged with {'+'.join(n for n in names if n != last)} by the group rule "
                           f"{'+'.join(names)}: its own rule is never read")
    return out
