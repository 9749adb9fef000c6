"""Validating a case against its family: label arguments against the tools' schemas, the
message history, and the world rows and effects of a sandboxed case.

Each problem is ``(field, message)``; :mod:`.cases` turns them into problems naming the file
and the case id.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pytest_tooleffect.collect.family import LoadedFamily
from pytest_tooleffect.collect.traces import position_bucket
from pytest_tooleffect.formats import Action, Case, ForbiddenAction, ParallelGroup, ToolSpec
from pytest_tooleffect.oracle import ANY_OF, OMITTED, CompareContext, compare_args, parse_date, parse_datetime
from pytest_tooleffect.oracle.rulecheck import rule_problems
from pytest_tooleffect.oracle.values import MISSING

__all__ = ["content_problem", "history_problems", "validate_case"]


def _check_args(tool: ToolSpec, args: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    """Label args must be declared by the tool's schema and valid against it: ``(field, message)``."""
    problems = []
    props = tool.parameters.get("properties") or {}
    open_schema = tool.parameters.get("additionalProperties") is True
    for key in args:
        if key not in props and not open_schema:
            problems.append((f"{where}.args.{key}", f"not in the schema of {tool.name}"))
    plain = {}
    required = set(tool.parameters.get("required") or [])
    for k, v in args.items():
        if isinstance(v, Mapping) and ANY_OF in v:
            alts = v[ANY_OF]
            if set(v) != {ANY_OF} or not isinstance(alts, list) or not alts:
                problems.append((f"{where}.args.{k}", f"{ANY_OF} takes a non-empty list of alternatives and nothing "
                                 "else beside it"))
                continue
            for alt in alts:
                if isinstance(alt, Mapping) and alt.get(OMITTED):
                    if k in required:
                        problems.append((f"{where}.args.{k}", f"{OMITTED}: a required argument cannot be omitted"))
                else:
                    problems += _schema_errors(tool, k, _first_alternatives(alt), f"{where}.args.{k}")
        elif k in props:
            plain[k] = v
    for k, v in plain.items():
        problems += _schema_errors(tool, k, _first_alternatives(v), f"{where}.args.{k}")
        problems += _undeclared(props.get(k), _first_alternatives(v), f"{where}.args.{k}", tool.name)
    return problems


def _undeclared(schema: Any, value: Any, where: str, tool: str) -> list[tuple[str, str]]:
    """Keys inside nested objects that their schema does not declare (the oracle fails them)."""
    if not isinstance(schema, Mapping):
        return []
    if isinstance(value, Mapping):
        props = schema.get("properties")
        if not isinstance(props, Mapping) or schema.get("additionalProperties") is True:
            return []
        out = [(f"{where}.{k}", f"not in the schema of {tool}") for k in value if k not in props]
        for k, v in value.items():
            out += _undeclared(props.get(k), v, f"{where}.{k}", tool)
        return out
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _undeclared(schema.get("items"), v, f"{where}[{i}]", tool)]
    return []


def _first_alternatives(value: Any) -> Any:
    """A nested label value with each inner ``$any_of`` replaced by its first non-omitted
    alternative (and omitted-only keys dropped), so the schema can check it.
    """
    if isinstance(value, Mapping):
        if ANY_OF in value and isinstance(value[ANY_OF], list):
            kept = [a for a in value[ANY_OF] if not (isinstance(a, Mapping) and a.get(OMITTED)) and a is not None]
            return _first_alternatives(kept[0]) if kept else None
        out = {}
        for k, v in value.items():
            inner = _first_alternatives(v)
            if inner is None and isinstance(v, Mapping) and ANY_OF in v:
                continue
            out[k] = inner
        return out
    if isinstance(value, list):
        return [_first_alternatives(v) for v in value]
    return value


_VALIDATORS: dict[tuple[int, str], tuple[ToolSpec, Any]] = {}


def _is_datetime(value: str) -> bool:
    try:
        parse_datetime(value, None)
    except ValueError:
        return False
    return True


def _is_date(value: str) -> bool:
    try:
        parse_date(value)
    except ValueError:
        return False
    return True


#: Label times may be naive (read in the case's time zone), so the formats accept ISO 8601
#: with or without an offset.
_FORMATS = {"date-time": _is_datetime, "date": _is_date}


def _schema_errors(tool: ToolSpec, key: str, value: Any, where: str) -> list[tuple[str, str]]:
    """Validate one label value against its parameter's JSON schema (``fastjsonschema``,
    compiled once per tool parameter).
    """
    sub = (tool.parameters.get("properties") or {}).get(key)
    if not isinstance(sub, Mapping) or value is None:  # null: an explicit null the label allows
        return []
    import fastjsonschema

    cache_key = (id(tool), key)
    entry = _VALIDATORS.get(cache_key)
    if entry is None:  # the entry keeps the tool alive: its id is not reused meanwhile
        check = None
        if "$ref" not in json.dumps(sub):  # never resolve references (a remote one would be fetched): no check
            try:
                check = fastjsonschema.compile(dict(sub), formats=_FORMATS)
            except (fastjsonschema.JsonSchemaDefinitionException, TypeError, ValueError):
                check = None
        entry = _VALIDATORS[cache_key] = (tool, check)
    if entry[1] is None:
        return []
    try:
        entry[1](value)
    except fastjsonschema.JsonSchemaValueException as exc:
        return [(where, f"{value!r} {exc.message.removeprefix('data').strip()}")]
    return []


def content_problem(role: str, content: Any) -> str | None:
    """What makes a message's ``content`` unreadable as a turn's text, in words; ``None`` when it is text.

    Text is a string, or a list of OpenAI content parts (mappings with a ``type``; a ``text`` part's
    ``text`` a string; other parts, such as ``image_url``, kept as they are).  An assistant message may
    have no content (``null``: a turn of tool calls); a tool result's ``null`` is left as it is read.

    Args:
        role: the message's role.
        content: its ``content`` (``None`` when absent).

    Returns:
        One line, or ``None``.
    """
    if isinstance(content, str) or (content is None and role in ("assistant", "tool")):
        return None
    if content is None:
        return f"a {role} message needs its text (a string, or a list of content parts), got null"
    if not isinstance(content, list):
        return (f"must be text (a string, or a list of content parts {{type: text, text: ...}}), got "
                f"{type(content).__name__}")
    for j, part in enumerate(content):
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            return f"part {j} is not a content part ({{type: text, text: ...}}): got {type(part).__name__}"
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            return f"part {j} is a text part whose text is not a string"
    return None


def _history_problems(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    pending: dict[str, tuple[int, str]] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool", "developer"):
            problems.append((f"messages[{i}].role", f"unknown role {role!r}"))
            continue
        why = content_problem(role, m.get("content"))
        if why is not None:
            problems.append((f"messages[{i}].content", why))
        if role in ("user", "assistant") and pending:
            for cid, (j, name) in pending.items():
                problems.append((f"messages[{j}].tool_calls", f"call {name} ({cid}) has no tool result before "
                                 f"messages[{i}]"))
            pending.clear()
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                problems.append((f"messages[{i}].tool_calls", "must be a list of tool calls"))
                continue
            for k, tc in enumerate(calls):
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else None
                if not isinstance(fn, Mapping):
                    problems.append((f"messages[{i}].tool_calls[{k}]", "a tool call is {id, function: {name, "
                                     "arguments}}"))
                    continue
                call_id = tc.get("id")
                if call_id is not None and not isinstance(call_id, str):
                    problems.append((f"messages[{i}].tool_calls[{k}].id", "must be a string"))
                    continue
                key = call_id or f"#{i}.{k}"
                if key in pending:
                    problems.append((f"messages[{i}].tool_calls[{k}].id", f"duplicate call id {call_id!r}"))
                pending[key] = (i, str(fn.get("name")))
        elif role == "tool":
            result_id = m.get("tool_call_id")
            if result_id is not None and not isinstance(result_id, str):
                problems.append((f"messages[{i}].tool_call_id", "must be a string"))
            elif result_id in pending:
                pending.pop(result_id)
            elif result_id is None and pending:
                pending.pop(next(iter(pending)))
            else:
                problems.append((f"messages[{i}]", f"tool result for unknown call {result_id!r}"))
    for cid, (j, name) in pending.items():
        problems.append((f"messages[{j}].tool_calls", f"call {name} ({cid}) has no tool result"))
    return problems


def history_problems(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """What makes a conversation unusable as a case's ``messages``, as collection refuses it: an
    unknown role, content that is not text, a tool result for no call, a call with no result, a call
    id given twice.

    Returns:
        ``(field, message)`` pairs (``("messages[1]", "tool result for unknown call 'zz'")``), in order.
    """
    return _history_problems(messages)


def _column_value_problem(column_type: str, value: Any) -> str | None:
    """Why ``value`` cannot seed a column of ``column_type`` (TEXT, INTEGER, REAL, JSON, DATETIME)."""
    if value is None or column_type == "JSON":
        return None
    if column_type == "TEXT" and not isinstance(value, str):
        return f"a TEXT column takes a string, not {type(value).__name__}"
    if column_type == "INTEGER" and (not isinstance(value, int) or isinstance(value, bool)):
        return f"an INTEGER column takes a whole number, not {type(value).__name__}"
    if column_type == "INTEGER" and not -(2**63) <= value < 2**63:
        return f"{value} does not fit an INTEGER column (64-bit)"
    if column_type == "REAL" and (not isinstance(value, int | float) or isinstance(value, bool)):
        return f"a REAL column takes a number, not {type(value).__name__}"
    if column_type == "DATETIME" and not (isinstance(value, str) and _is_datetime(value)):
        return f"a DATETIME column takes an ISO 8601 date-time, not {value!r}"
    return None


def _condition_problem(column_type: str, value: Any) -> str | None:
    """Why ``value`` can never match a column of ``column_type`` in an effect's where / every."""
    if isinstance(value, Mapping) and any(str(k).startswith("$") for k in value):
        if set(value) != {"$any_of"}:
            return f"only $any_of is understood here, not {', '.join(sorted(map(str, value)))}"
        options = value["$any_of"]
        if not isinstance(options, list) or not options:
            return "$any_of takes a non-empty list of values"
        for option in options:
            if (why := _condition_problem(column_type, option)) is not None:
                return f"$any_of: {why}"
        return None
    if column_type == "JSON" and isinstance(value, str):
        return None  # a JSON column may hold a string
    return _column_value_problem(column_type, value)


def _world_problems(case: Case, family: LoadedFamily, tools: Mapping[str, ToolSpec]) -> list[tuple[str, str]]:
    """The world's rows, the effects' tables and columns, and the faults' tools exist."""
    if case.world is None:
        return [(name, "needs a world (the seed rows its conditions are about)")
                for name in ("expected_effects", "forbidden_effects", "faults", "conversation") if getattr(case, name)]
    layout = family.world_layout
    if layout is None:
        return [("world", f"family {family.name} declares no sandbox (family.yaml: sandbox: {{world: NAME}})")]
    problems: list[tuple[str, str]] = []
    for table, rows in case.world.items():
        if table not in layout:
            problems.append((f"world.{table}", f"no table {table!r} (tables: {', '.join(layout)})"))
            continue
        columns = layout[table]["columns"]
        key = layout[table]["key"]
        seen: set[Any] = set()
        for i, row in enumerate(rows):
            for col, value in row.items():
                if col not in columns:
                    problems.append((f"world.{table}[{i}].{col}", f"no column {col!r} in {table}"))
                elif (why := _column_value_problem(columns[col], value)) is not None:
                    problems.append((f"world.{table}[{i}].{col}", why))
            if row.get(key) is None:
                problems.append((f"world.{table}[{i}]", f"missing key column {key!r} (or null)"))
            elif repr(row[key]) in seen:
                problems.append((f"world.{table}[{i}].{key}", f"duplicate key {row[key]!r}"))
            else:
                seen.add(repr(row[key]))
    for group in ("expected_effects", "forbidden_effects"):
        for i, effect in enumerate(getattr(case, group)):
            where = f"{group}[{i}]"
            named = [effect.table] if effect.table else list(effect.unchanged or effect.only_changed or [])
            for table in named:
                if table not in layout:
                    problems.append((where, f"no table {table!r} (tables: {', '.join(layout)})"))
            if group == "forbidden_effects" and effect.table is None:
                problems.append((where, "unchanged / only_changed / same_as_after are conditions to expect, "
                                 "not to forbid"))
            for j, call in enumerate(effect.same_as_after or ()):
                if family.world_tools and call.name not in family.world_tools:
                    problems.append((f"{where}.same_as_after[{j}].name",
                                     f"the sandbox world does not implement {call.name!r}"))
            if effect.table in layout:
                for part in ("where", "every"):
                    for col, value in getattr(effect, part).items():
                        if col not in layout[effect.table]["columns"]:
                            problems.append((f"{where}.{part}.{col}", f"no column {col!r} in {effect.table}"))
                        elif (why := _condition_problem(layout[effect.table]["columns"][col], value)) is not None:
                            problems.append((f"{where}.{part}.{col}", why))
    problems += _conversation_problems(case, family, tools)
    for tool in case.faults:
        if tool not in tools:
            problems.append((f"faults.{tool}", f"unknown tool {tool!r} (offered: {', '.join(sorted(tools))})"))
        elif tool not in family.world_tools:
            problems.append((f"faults.{tool}", f"the sandbox world does not implement {tool!r}, so no fault "
                             "can fire there"))
    return problems


def _conversation_problems(case: Case, family: LoadedFamily, tools: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A conversation needs a family that plays conversations, and each turn's reference calls
    must be tools offered at that turn.
    """
    if case.conversation is None:
        return []
    spec = family.family.sandbox
    if spec is None or spec.rollout != "conversation":
        return [("conversation", f"family {family.name} does not play conversations "
                                 "(family.yaml: sandbox: {world: NAME, rollout: conversation})")]
    problems: list[tuple[str, str]] = []
    offered = set(tools)
    for k, turn in enumerate(case.conversation.turns):
        problems += [(f"conversation.turns[{k}].user[{i}].content", why) for i, m in enumerate(turn.user)
                     if (why := content_problem(str(m.get("role")), m.get("content"))) is not None]
        if turn.tools is not None:
            offered = {t.name for t in turn.tools}
        for j, call in enumerate(turn.reference):
            if call.name not in offered:
                problems.append((f"conversation.turns[{k}].reference[{j}].name",
                                 f"{call.name!r} is not offered at turn {k}"))
    return problems


def _judged_without_label(family: LoadedFamily, tool: str, key: str) -> bool:
    """The family's rules judge ``tool.key`` with no label value (``compare: any`` or ``none``, or predicates)."""
    rule = family.rules.lookup(tool, key)
    return rule is not None and (rule.compare in ("any", "none") or bool(rule.predicates))


def validate_case(case: Case, family: LoadedFamily) -> list[tuple[str, str]]:
    """Checks beyond the model: tools named in the label exist, label args fit the schema,
    no valid action is also forbidden, every tool call in the history has its result.

    Returns:
        ``(field, message)`` pairs; empty when the case is usable.

    """
    problems = _history_problems(case.messages)
    p = case.placement
    if p.bucket in ("first", "middle", "last") and p.bucket != position_bucket(p.step, p.run_length):
        problems.append(("placement.bucket", f"step {p.step} of {p.run_length} is bucket "
                         f"{position_bucket(p.step, p.run_length)!r}, not {p.bucket!r}"))
    tools = {t.name: t for t in case.tools} if case.tools is not None else dict(family.tools_by_name)
    problems += _world_problems(case, family, tools)
    if case.tools is not None and (family.rules.fields or family.rules.composites):
        problems += [("tools", f"the family's rule fields.{key}: {reason} (the rule would not take effect)")
                     for key, reason in rule_problems(family.rules, {t.name: t.parameters for t in case.tools or ()},
                                                      unknown_tools=False)]
    if case.label is None:
        return problems
    for i, alt in enumerate(case.label.valid_actions):
        members = alt.parallel if isinstance(alt, ParallelGroup) else [alt]
        for j, a in enumerate(members):
            where = f"label.valid_actions[{i}]" + (f".parallel[{j}]" if isinstance(alt, ParallelGroup) else "")
            if a.tool is None:
                continue
            if a.tool not in tools:
                problems.append((f"{where}.tool", f"unknown tool {a.tool!r} (offered: {', '.join(sorted(tools))})"))
                continue
            problems += _check_args(tools[a.tool], a.args, where)
            problems += [(f"{where}.args.{k}", f"required argument of {a.tool} left out of the label (no call "
                          "that sends it can match, and no call may leave it out)")
                         for k in tools[a.tool].parameters.get("required") or []
                         if k not in a.args and not _judged_without_label(family, a.tool, k)]
    for i, fb in enumerate(case.label.forbidden_actions):
        where = f"label.forbidden_actions[{i}]"
        if fb.tool not in tools:
            problems.append((f"{where}.tool", f"unknown tool {fb.tool!r}"))
        elif fb.args:
            problems += _check_args(tools[fb.tool], fb.args, where)
        for k, alt in enumerate(case.label.valid_actions):
            members = alt.parallel if isinstance(alt, ParallelGroup) else [alt]
            for a in members:
                if a.tool == fb.tool and _overlaps(a, fb, tools.get(fb.tool), family, case):
                    problems.append((where, f"{fb.tool} is both valid (valid_actions[{k}]) and forbidden"))
    return problems


_CANDIDATES = 256  # concrete calls tried per valid action and forbidden entry


def _concrete(value: Any) -> Iterator[Any]:
    """Every concrete value a label value accepts, its ``$any_of`` alternatives expanded at any
    depth (``MISSING`` for an ``$omitted`` one; at most :data:`_CANDIDATES` of them).
    """
    if isinstance(value, Mapping):
        if ANY_OF in value and isinstance(value[ANY_OF], list):
            for alt in value[ANY_OF]:
                if isinstance(alt, Mapping) and alt.get(OMITTED):
                    yield MISSING
                else:
                    yield from _concrete(alt)
            return
        keys = list(value)
        for combo in itertools.islice(itertools.product(*(list(itertools.islice(_concrete(value[k]), _CANDIDATES))
                                                          for k in keys)), _CANDIDATES):
            yield {k: v for k, v in zip(keys, combo, strict=True) if v is not MISSING}
        return
    if isinstance(value, list):
        for combo in itertools.islice(itertools.product(*(list(itertools.islice(_concrete(v), _CANDIDATES))
                                                          for v in value)), _CANDIDATES):
            yield [v for v in combo if v is not MISSING]
        return
    yield value


def _overlaps(valid: Action, fb: ForbiddenAction, tool: ToolSpec | None, family: LoadedFamily, case: Case) -> bool:
    """A call the valid action accepts is also one the forbidden entry refuses: some concrete
    value of each key the entry restricts (the valid action's ``$any_of`` alternatives expanded)
    is hit by the entry, as the oracle judges it under the family's rules.
    """
    if not fb.args:
        return True
    if any(key not in valid.args for key in fb.args):
        return False
    restricted = {key: valid.args[key] for key in fb.args}
    schema = tool.parameters if tool is not None else {}
    ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages)
    for candidate in _concrete(restricted):
        try:
            results = compare_args(fb.tool, schema, fb.args, candidate, family.rules, ctx, subset=True)
        except LookupError:  # a predicate reads what only the run has: judge the raw values
            if all(candidate.get(key, MISSING) == val for key, val in fb.args.items()):
                return True
            continue
        if all(r.ok for r in results):
            return True
    return False
