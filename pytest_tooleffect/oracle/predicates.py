"""Constraint predicates on an emitted value (a rule's ``predicates: [{name: argument}]``).

Each predicate is a function ``(argument, value, ctx) -> (ok, reason)`` registered under its
name in :data:`REGISTRY` by :func:`register`; :func:`evaluate` runs one by name.  The rule
language (:data:`~.rules.PREDICATES`) names the same predicates and checks their arguments
when a rules file is read.  A predicate raises :class:`LookupError` for a configuration error
(a state value or user callable that does not exist): the item becomes a scoring error, not
the agent's failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pytest_tooleffect.oracle.context import CompareContext
from pytest_tooleffect.oracle.values import MISSING, is_number, json_key, normaliser, parse_datetime

__all__ = ["INPUT_TYPES", "REGISTRY", "PredicateFn", "evaluate", "register"]

#: A registered predicate: ``(argument, emitted value, ctx) -> (ok, reason)``; ``reason`` empty when ok.
PredicateFn = Callable[[Any, Any, CompareContext], tuple[bool, str]]

#: The predicates by name.
REGISTRY: dict[str, PredicateFn] = {}

#: The JSON-schema types a predicate can accept, by name (the names of
#: :func:`~.rulecheck.field_type`); a predicate absent here reads a value of any type.  A rule
#: putting a predicate on a field whose declared type is not among them is refused at load
#: (it would fail every call).
INPUT_TYPES: dict[str, frozenset[str]] = {}


def register(name: str, types: frozenset[str] | None = None) -> Callable[[PredicateFn], PredicateFn]:
    """Register the decorated function as the predicate ``name`` (replacing any under that name).

    Args:
        name: the predicate's name in rules files.
        types: the field types (``string``, ``number``, ``integer``, ``boolean``, ``array``,
            ``object``, ``null``) whose values it can accept; ``None`` = any type.

    Returns:
        A decorator that registers its function and returns it unchanged.

    """

    def add(fn: PredicateFn) -> PredicateFn:
        REGISTRY[name] = fn
        if types is None:
            INPUT_TYPES.pop(name, None)
        else:
            INPUT_TYPES[name] = frozenset(types)
        return fn

    return add


def evaluate(name: str, arg: Any, value: Any, ctx: CompareContext) -> tuple[bool, str]:
    """Run the predicate ``name`` on an emitted value.

    Args:
        name: the predicate's name.
        arg: its argument, as the rule gives it.
        value: the emitted value.
        ctx: the comparison's context (time zone, state, messages, user callables).

    Returns:
        ``(ok, reason)``; an unknown name fails with a reason saying so.

    Raises:
        LookupError: the predicate reads a state value or user callable that does not exist.

    """
    fn = REGISTRY.get(name)
    if fn is None:
        return False, f"unknown predicate {name}"
    return fn(arg, value, ctx)


_LOOSE_TEXT = normaliser(("nfkc", "casefold", "strip"))


def _norm_item(x: Any) -> Any:
    """A hashable form of a list member or state value: JSON equality (:func:`~.values.json_key`),
    text through NFKC, casefold and strip at every depth.
    """
    return json_key(x, _LOOSE_TEXT)


def _lookup(state: Mapping[str, Any], dotted: str) -> Any:
    """The state's value at the dotted key ``a.b.c``, else :data:`~.values.MISSING`."""
    cur: Any = state
    for part in dotted.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            return MISSING
    return cur


@register("within", frozenset({"string"}))
def within(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value is an instant inside the window ``{start, end}`` (either bound may be left out; bounds included).

    Args:
        arg: ``{"start": ISO date-time, "end": ISO date-time}``.
        g: the emitted value, an ISO 8601 date-time.
        ctx: naive times are read in ``ctx.timezone``.

    Returns:
        ``(ok, reason)``.

    """
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


@register("superset", frozenset({"array"}))
def superset(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value is a list holding every required member (text through NFKC, casefold and strip).

    Args:
        arg: the required members (a list), or the dotted name of a list in ``ctx.state``.
        g: the emitted value.
        ctx: the state.

    Returns:
        ``(ok, reason)``.

    Raises:
        LookupError: the state has no value under the name ``arg``.

    """
    required = arg if isinstance(arg, list) else _lookup(ctx.state, str(arg))
    if required is MISSING:
        raise LookupError(f"superset: the state has no value {arg!r}")
    if not isinstance(g, list) or not isinstance(required, list):
        return False, "superset: needs a list"
    have = {_norm_item(x) for x in g}
    missing = [x for x in required if _norm_item(x) not in have]
    return not missing, "" if not missing else f"missing required members {missing}"


@register("equals_state")
def equals_state(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value equals a value of the state (text through NFKC, casefold and strip).

    Args:
        arg: the state value's dotted name.
        g: the emitted value.
        ctx: the state.

    Returns:
        ``(ok, reason)``.

    Raises:
        LookupError: the state has no value under the name ``arg``.

    """
    want = _lookup(ctx.state, str(arg))
    if want is MISSING:
        raise LookupError(f"equals_state: the state has no value {arg!r}")
    ok = _norm_item(g) == _norm_item(want)
    return ok, "" if ok else f"{g!r} is not the state's {arg} ({want!r})"


@register("in_messages")
def in_messages(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value's text appears in the content of one of the state's messages.

    Args:
        arg: ``True``.
        g: the emitted value (read as text).
        ctx: the state's messages.

    Returns:
        ``(ok, reason)``.

    """
    needle = str(g)
    ok = any(needle in str(m.get("content") or "") for m in ctx.messages)
    return ok, "" if ok else f"{g!r} does not appear in the conversation"


@register("pattern", frozenset({"string"}))
def pattern(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value is a string the regular expression matches in full (:func:`re.fullmatch`).

    Args:
        arg: the regular expression.
        g: the emitted value.
        ctx: not read.

    Returns:
        ``(ok, reason)``.

    """
    ok = isinstance(g, str) and re.fullmatch(str(arg), g) is not None
    return ok, "" if ok else f"{g!r} does not match /{arg}/"


@register("range", frozenset({"number", "integer"}))
def range_(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """The value is a number in ``[min, max]`` (either bound may be left out; bounds included).

    Args:
        arg: ``{"min": number, "max": number}``.
        g: the emitted value.
        ctx: not read.

    Returns:
        ``(ok, reason)``.

    """
    if not is_number(g):
        return False, "range: not a number"
    lo, hi = arg.get("min"), arg.get("max")
    ok = (lo is None or g >= lo) and (hi is None or g <= hi)
    return ok, "" if ok else f"{g} outside [{lo}, {hi}]"


@register("callable")
def user_callable(arg: Any, g: Any, ctx: CompareContext) -> tuple[bool, str]:
    """A user predicate registered through ``pytest_tooleffect_predicates`` accepts the value.

    The user predicate is called as ``fn(value, ctx, **parameters)`` and returns a bool or
    ``(bool, reason)``.

    Args:
        arg: the predicate's name, or ``{"name": NAME, **parameters}``.
        g: the emitted value.
        ctx: the context (holds the user predicates by name; passed on to the predicate).

    Returns:
        ``(ok, reason)``.

    Raises:
        LookupError: no user predicate is registered under the name.

    """
    fname = arg if isinstance(arg, str) else arg.get("name")
    params = {} if isinstance(arg, str) else {k: v for k, v in arg.items() if k != "name"}
    fn = ctx.predicates.get(fname)
    if fn is None:  # a configuration error, not the agent's: the item becomes a scoring error
        raise LookupError(f"no predicate registered under {fname!r} (pytest_tooleffect_predicates)")
    res = fn(g, ctx, **params)
    if isinstance(res, tuple):
        return bool(res[0]), str(res[1])
    return bool(res), "" if res else f"predicate {fname} rejected {g!r}"
