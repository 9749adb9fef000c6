"""Loading families and case files, with validation that names file, case id and field.

A family lives in ``cases/<family>/``: ``family.yaml`` plus case files (``*.jsonl``: one case a
line; ``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``).  A bad case never stops the
others: :func:`load_case_file` returns the good cases and a :class:`CaseProblem` per bad one.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .models import Case, Family, Label, ParallelGroup, ToolSpec
from .oracle import ANY_OF, OMITTED, RuleError, RuleSet, load_rules, parse_date, parse_datetime
from .traces import position_bucket

__all__ = ["FAMILY_FILE", "CaseProblem", "FamilyError", "LoadedFamily", "is_case_file", "label_hash", "load_case_file",
           "load_family"]

FAMILY_FILE = "family.yaml"
CASE_SUFFIXES = (".jsonl", ".yaml", ".yml")


class _JSONLikeLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader without implicit timestamps: case data stays JSON-like (a date-time
    stays the string the author wrote, as it would in JSONL).
    """


_JSONLikeLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=_JSONLikeLoader)


class FamilyError(ValueError):
    """The family file (or a file it names) cannot be used; the message names the file.

    ``referenced_files``: the files the family file names (as :attr:`LoadedFamily.referenced_files`),
    as far as the family file could be read; set by :func:`load_family`.
    """

    referenced_files: frozenset[Path] = frozenset()


_NAMED_FILES = ("oracle", "tools_file", "system_prompt_file")  # the family file's keys that name files


def named_files(directory: Path, names: Iterable[Any]) -> frozenset[Path]:
    """The files ``names`` name in ``directory``, resolved; a name no path can hold is left out."""
    files = set()
    for n in names:
        if n and isinstance(n, str):
            try:
                files.add((directory / n).resolve())
            except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop
                continue
    return frozenset(files)


def is_case_file(path: Path, referenced: frozenset[Path]) -> bool:
    """``path`` is a case file of the family in its directory: a case-file suffix, neither the
    family file nor a file it names (``referenced``: the family's ``referenced_files``).
    """
    if path.suffix not in CASE_SUFFIXES or path.name == FAMILY_FILE:
        return False
    try:
        return path.resolve() not in referenced
    except (OSError, RuntimeError):  # a symlink loop: not a file the family names; reading it says what is wrong
        return True


@dataclass(frozen=True)
class CaseProblem:
    """One validation problem: where it is and what is wrong."""

    file: str
    case_id: str | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"case {self.case_id}" if self.case_id else "file"
        return f"{self.file}: {where}: {self.field}: {self.message}"


@dataclass(frozen=True)
class LoadedFamily:
    """A family ready for scoring: its model, resolved tools, system prompt and compiled rules."""

    name: str
    directory: Path
    family: Family
    tools: tuple[ToolSpec, ...]
    system_prompt: str | None
    rules: RuleSet
    tools_by_name: Mapping[str, ToolSpec] = field(default_factory=dict)
    world_layout: Mapping[str, Mapping[str, Any]] | None = None
    world_tools: frozenset[str] = frozenset()

    @property
    def referenced_files(self) -> frozenset[Path]:
        """Files the family file names (rules, tools, prompt): never collected as case files."""
        return named_files(self.directory, (getattr(self.family, key) for key in _NAMED_FILES))

    @property
    def meta(self) -> dict[str, Any]:
        """What the report needs from the family: quota and population per bucket."""
        return {"quota": self.family.quota, "population": self.family.population,
                "production": self.family.production}


def load_family(directory: Path) -> LoadedFamily:
    """Load ``directory/family.yaml`` and the files it names (tools, prompt, oracle rules).

    Raises:
        FamilyError: the family file or a file it names is missing or invalid.
    """
    path = directory / FAMILY_FILE
    try:
        return _load_family(directory, path)
    except FamilyError as exc:
        exc.referenced_files = _referenced_anyway(directory, path)
        raise
    except Exception as exc:  # any unreadable input becomes one clear error, never a crash
        error = FamilyError(f"{path}: {type(exc).__name__}: {exc}")
        error.referenced_files = _referenced_anyway(directory, path)
        raise error from exc


def _referenced_anyway(directory: Path, path: Path) -> frozenset[Path]:
    """The files a family file names, read from it without validating it (none if it cannot be read).

    A family that fails to load still keeps its rules, tools and prompt files out of case
    collection.
    """
    try:
        raw = _yaml_load(path.read_text(encoding="utf-8-sig"))
    except Exception:  # unreadable: nothing to keep out
        return frozenset()
    return named_files(directory, (raw.get(key) for key in _NAMED_FILES)) if isinstance(raw, Mapping) else frozenset()


def _read(path: Path, what: str, family_file: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise FamilyError(f"{family_file}: {what} {path}: cannot read: {exc}") from exc


def _load_family(directory: Path, path: Path) -> LoadedFamily:
    try:
        raw = _yaml_load(_read(path, "family file", path))
    except yaml.YAMLError as exc:
        raise FamilyError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise FamilyError(f"{path}: a family file is a mapping")
    raw = dict(raw)
    raw.setdefault("name", directory.name)
    if raw.get("tools_file"):
        if not isinstance(raw["tools_file"], str):
            raise FamilyError(f"{path}: tools_file: a path to a JSON list of tool specs")
        tf = directory / raw["tools_file"]
        try:
            listed = json.loads(_read(tf, "tools_file", path))
        except json.JSONDecodeError as exc:
            raise FamilyError(f"{path}: tools_file {tf}: not valid JSON: {exc}") from exc
        if not isinstance(listed, list):
            raise FamilyError(f"{path}: tools_file {tf}: holds a JSON {type(listed).__name__}, not a list of tools")
        inline = raw.get("tools") or []
        raw["tools"] = [*listed, *(inline if isinstance(inline, list) else [inline])]
    try:
        fam = Family.model_validate(raw)
    except ValidationError as exc:
        raise FamilyError("; ".join(f"{path}: {_loc(e['loc'])}: {e['msg']}" for e in exc.errors())) from exc
    for t in fam.tools:
        props = t.parameters.get("properties", {})
        if not isinstance(props, Mapping) or t.parameters.get("type", "object") != "object":
            raise FamilyError(f"{path}: tools.{t.name}.parameters: an object schema with a properties mapping")
    prompt = fam.system_prompt
    if fam.system_prompt_file:
        prompt = _read(directory / fam.system_prompt_file, "system_prompt_file", path)
    try:
        rules = load_rules(directory / fam.oracle) if fam.oracle else RuleSet()
    except RuleError as exc:
        raise FamilyError(f"{path}: oracle: {exc}") from exc
    names = [t.name for t in fam.tools]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise FamilyError(f"{path}: tools: duplicate tool names {dup}")
    if names:
        unknown = rules.unknown_tools(names)
        if unknown:
            raise FamilyError(f"{path}: oracle: rules for tools the family does not offer: {', '.join(unknown)}")
    layout, world_tools = None, frozenset[str]()
    if fam.sandbox is not None:
        from .sandbox.environment import SandboxError
        from .sandbox.image import world_spec

        try:
            layout, world_tools = world_spec(fam.sandbox.world)
        except SandboxError as exc:
            raise FamilyError(f"{path}: sandbox.world: {exc}") from exc
    return LoadedFamily(fam.name, directory, fam, tuple(fam.tools), prompt, rules, {t.name: t for t in fam.tools},
                        layout, world_tools)


def _loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _raw_cases(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line or index, raw case, parse error)``; a JSONL case comes as its line's text."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.split("\n"), 1):
            if line.strip():
                yield n, line, None
        return
    try:
        doc = _yaml_load(text)
    except Exception as exc:
        yield 0, None, f"not valid YAML: {exc}"
        return
    if isinstance(doc, Mapping) and "cases" in doc:
        doc = doc["cases"]
    if doc is None:
        return
    if not isinstance(doc, list):
        yield 0, None, "a YAML case file holds a list of cases (or a mapping with 'cases:')"
        return
    for n, raw in enumerate(doc):
        yield n, raw, None


def _parse_case(n: int, raw: Any, fname: str) -> Case | list[CaseProblem]:
    """Validate one raw case (a JSONL line's text, or a parsed mapping)."""
    try:
        if isinstance(raw, str):
            return Case.model_validate_json(raw)
        if not isinstance(raw, Mapping):
            return [CaseProblem(fname, f"#{n}", "<case>", f"a case is a mapping, got {type(raw).__name__}")]
        return Case.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        if isinstance(raw, str) and errors and errors[0]["type"] == "json_invalid":
            try:
                json.loads(raw)
            except json.JSONDecodeError as jexc:
                return [CaseProblem(fname, None, "<file>",
                                    f"line {n} is not valid JSON: {jexc.msg} (column {jexc.colno})")]
        try:
            doc = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            doc = None
        cid = doc.get("id") if isinstance(doc, Mapping) else None
        if isinstance(raw, str) and not isinstance(doc, Mapping):
            return [CaseProblem(fname, f"line {n}", "<case>", "a case is a JSON object")]
        cid_s = str(cid) if cid is not None else f"#{n}"
        return [CaseProblem(fname, cid_s, _loc(e["loc"]), e["msg"].removeprefix("Value error, ")) for e in errors]


def label_hash(label: Label | None) -> str:
    """SHA-256 (16 hex digits) of the label's canonical JSON (reasons and labellers excluded)."""
    if label is None:
        return "unlabelled"
    data = label.model_dump(mode="json", exclude={"labelled_by", "notes"})
    for group in ("valid_actions", "forbidden_actions"):
        for a in data[group]:
            a.pop("reason", None)
            for m in a.get("parallel") or []:
                m.pop("reason", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


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
    if "$ref" in json.dumps(sub):  # never resolve references (a remote one would be fetched): skip the check
        return []
    import fastjsonschema

    cache_key = (id(tool), key)
    entry = _VALIDATORS.get(cache_key)
    if entry is None:
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


def _history_problems(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    pending: dict[str, tuple[int, str]] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool", "developer"):
            problems.append((f"messages[{i}].role", f"unknown role {role!r}"))
            continue
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
                for name in ("expected_effects", "forbidden_effects", "faults") if getattr(case, name)]
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
                problems.append((where, "unchanged / only_changed are conditions to expect, not to forbid"))
            if effect.table in layout:
                for part in ("where", "every"):
                    for col, value in getattr(effect, part).items():
                        if col not in layout[effect.table]["columns"]:
                            problems.append((f"{where}.{part}.{col}", f"no column {col!r} in {effect.table}"))
                        elif (why := _condition_problem(layout[effect.table]["columns"][col], value)) is not None:
                            problems.append((f"{where}.{part}.{col}", why))
    for tool in case.faults:
        if tool not in tools:
            problems.append((f"faults.{tool}", f"unknown tool {tool!r} (offered: {', '.join(sorted(tools))})"))
        elif tool not in family.world_tools:
            problems.append((f"faults.{tool}", f"the sandbox world does not implement {tool!r}, so no fault "
                             "can fire there"))
    return problems


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
    for i, fb in enumerate(case.label.forbidden_actions):
        where = f"label.forbidden_actions[{i}]"
        if fb.tool not in tools:
            problems.append((f"{where}.tool", f"unknown tool {fb.tool!r}"))
        elif fb.args:
            problems += _check_args(tools[fb.tool], fb.args, where)
        for k, alt in enumerate(case.label.valid_actions):
            members = alt.parallel if isinstance(alt, ParallelGroup) else [alt]
            for a in members:
                if a.tool == fb.tool and (not fb.args or all(a.args.get(key) == val for key, val in fb.args.items())):
                    problems.append((where, f"{fb.tool} is both valid (valid_actions[{k}]) and forbidden"))
    return problems


def load_case_file(path: Path, family: LoadedFamily, seen: set[str] | None = None
                   ) -> tuple[list[Case], list[CaseProblem]]:
    """Load and validate every case of one file.

    Args:
        path: the case file.
        family: its loaded family.
        seen: case ids already loaded from this family (updated; a repeat is a problem).

    Returns:
        ``(cases, problems)``: the usable cases, and one problem per unusable case or file.

    """
    seen = seen if seen is not None else set()
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    fname = str(path)
    try:
        raws = list(_raw_cases(path))
    except (OSError, UnicodeDecodeError) as exc:
        return [], [CaseProblem(fname, None, "<file>", f"cannot read: {exc}")]
    gc_was_enabled = gc.isenabled()
    gc.disable()  # thousands of long-lived models: generational GC passes would rescan them all
    try:
        _load_all(raws, fname, family, seen, cases, problems)
    finally:
        if gc_was_enabled:
            gc.enable()
    # the cases live for the whole run: keep later collections from rescanning them
    gc.freeze()
    return cases, problems


def _load_all(raws: list[tuple[int, Any, str | None]], fname: str, family: LoadedFamily, seen: set[str],
              cases: list[Case], problems: list[CaseProblem]) -> None:
    for n, raw, error in raws:
        if error:
            problems.append(CaseProblem(fname, None, "<file>", error))
            continue
        try:
            case = _parse_case(n, raw, fname)
        except (RecursionError, ValueError, TypeError) as exc:
            problems.append(CaseProblem(fname, f"line {n}", "<case>", f"cannot read: {type(exc).__name__}: {exc}"))
            continue
        if isinstance(case, list):
            problems += case
            continue
        if case.id in seen:
            problems.append(CaseProblem(fname, case.id, "id", f"duplicate case id in family {family.name}"))
            continue
        seen.add(case.id)
        try:
            bad = validate_case(case, family)
        except Exception as exc:  # a case shape the checks did not foresee: report it, go on
            bad = [("<case>", f"cannot validate: {type(exc).__name__}: {exc}")]
        if bad:
            problems += [CaseProblem(fname, case.id, f, m) for f, m in bad]
            continue
        cases.append(case)
