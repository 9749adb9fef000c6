"""A tool's JSON schema compiled under a rule set: the plan the comparator walks.

Each position of the schema becomes a :class:`Node` holding what the comparator would
otherwise look up per value: the rule that applies, the schema type, the date or date-time
reading, the string normalisers, and for objects the children, required keys and defaults.
A tool's plan is made once per rule set and schema (:func:`schema_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_tooleffect.oracle.rules import Rule, RuleSet
from pytest_tooleffect.oracle.values import MISSING, is_mapping, json_key

__all__ = ["DYNAMIC", "Node", "compile_node", "join_path", "members", "schema_plan", "schema_type"]

#: A node's kind that depends on the value (a type list holding ``"null"``).
DYNAMIC = "<dynamic>"

_TEMPORAL = {"date-time": "date-time", "date": "date"}  # the formats read as dates and instants
_PLAN_LIMIT = 4096  # compiled schemas kept per rule set before the cache is emptied


def schema_type(schema: Mapping[str, Any], value: Any) -> str | None:
    """The JSON-schema type that judges ``value`` at ``schema``.

    Args:
        schema: the schema position (``{"type": ..., "properties": ..., ...}``).
        value: the value judged there (read only for a type list holding ``"null"``).

    Returns:
        The type name; ``"null"`` for ``None`` under a nullable type list; ``"object"``,
        ``"array"`` or ``"enum"`` for an untyped schema with properties, items or an enum;
        ``None`` when nothing says.

    """
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


def join_path(path: str, key: str) -> str:
    """``path.key``, or ``key`` at the top (``path == ""``).

    Args:
        path: a rule or display path.
        key: an object key.

    Returns:
        The path of the key.

    """
    return f"{path}.{key}" if path else key


@dataclass(slots=True, eq=False)
class Node:
    """One position of a tool's schema, compiled once per rule set (see :func:`compile_node`).

    Paths are rule paths: no array indices (``passengers.first_name``).

    Attributes:
        schema: the schema position as written.
        rpath: its rule path (``""`` at the top).
        rule: the rule that judges it, or ``None`` (schema rules only).
        compare: the rule's comparator name, or ``None``.
        src: the rule's source (``rule:<key>``), or ``""``.
        kind: the schema type, :data:`DYNAMIC` when it depends on the value, or ``None``.
        temporal: ``"date"`` or ``"date-time"`` when read as a date or an instant, else ``None``.
        temporal_src: the rule name a date or instant result carries.
        enum: the schema's enum (unless a comparator is ruled), or ``None``.
        enum_keys: the enum's members as JSON keys, made on first use by :func:`members`.
        default: the schema default, or :data:`~.values.MISSING`.
        str_steps: the string normalisers (the field's, else the family's string default), or ``None``.
        str_src: the rule name a string result carries.
        str_raw: strings are compared raw (no rule at all).
        props: objects: the declared keys' nodes.
        required: objects: the required keys.
        open: objects: keys the schema does not declare are allowed.
        defaults: objects: ``(key, default)`` of the declared keys with a default.
        composites: objects: groups of keys judged together, with their rule.
        extras: objects: nodes of keys an open schema does not declare (made on first use).
        items: arrays: the items' node (made on first use).

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
    enum_keys: frozenset[Any] | None = None
    default: Any = MISSING
    str_steps: tuple[str, ...] | None = None
    str_src: str = ""
    str_raw: bool = False
    # objects
    props: dict[str, Node] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    open: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()
    composites: tuple[tuple[tuple[str, ...], Rule], ...] = ()
    extras: dict[str, Node] = field(default_factory=dict)
    # arrays (compiled on first use)
    items: Node | None = None


def members(node: Node) -> frozenset[Any]:
    """The members of ``node``'s enum as JSON keys (:func:`~.values.json_key`), made once per position.

    Args:
        node: a node with an enum.

    Returns:
        The set of the enum members' JSON keys.

    """
    if node.enum_keys is None:
        node.enum_keys = frozenset(map(json_key, node.enum))
    return node.enum_keys


def compile_node(tool: str, schema: Any, rpath: str, rule: Rule | None, rules: RuleSet) -> Node:
    """Compile the schema at rule path ``rpath`` (judged by ``rule``) and everything below it.

    Array items are compiled on first use, by the comparator (their rule depends on the array's).

    Args:
        tool: the tool's name (rules are looked up as ``tool.path``).
        schema: the schema position; anything but a mapping reads as ``{}``.
        rpath: its rule path (``""`` at the top).
        rule: the rule that judges it, or ``None``.
        rules: the family's rules (children's rules, the string default, composites).

    Returns:
        The compiled :class:`Node`.

    """
    if not is_mapping(schema):
        schema = {}
    get = schema.get
    t = get("type")
    kind = t if type(t) is str else DYNAMIC if isinstance(t, list) else schema_type(schema, None)
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
    node = Node(schema, rpath, rule, compare, src, kind, temporal, (src or f"schema:{temporal}") if temporal else "",
                schema["enum"] if compare is None and "enum" in schema else None, None, get("default", MISSING),
                steps, str_src, steps is None and not str_src)
    # objects (a leaf keeps the defaults: no properties, open, nothing required)
    props = get("properties")
    if props and isinstance(props, Mapping):
        children, defaults = node.props, []
        for key, sub in props.items():
            child = join_path(rpath, key)
            children[key] = compile_node(tool, sub, child, rules.lookup(tool, child), rules)
            if is_mapping(sub) and "default" in sub:
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


def schema_plan(tool: str, schema: Mapping[str, Any], rules: RuleSet) -> Node:
    """The compiled root of ``tool``'s parameters schema, cached on ``rules``.

    The cache is keyed by the schema object's identity (it holds the schema, so the identity
    stays unique): a schema is read once, so it must not change after its first comparison
    (``ToolSpec`` is frozen).  It holds up to 4,096 schemas, then starts again.

    Args:
        tool: the tool's name.
        schema: its JSON-schema ``parameters``.
        rules: the family's rules (holds the cache).

    Returns:
        The root :class:`Node`.

    """
    key = (tool, id(schema))
    hit = rules.compiled.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]  # type: ignore[no-any-return]
    if len(rules.compiled) >= _PLAN_LIMIT:
        rules.compiled.clear()
    node = compile_node(tool, schema, "", None, rules)
    rules.compiled[key] = (schema, node)
    return node
