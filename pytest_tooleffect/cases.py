"""Loading families and case files, with validation that names file, case id and field.

A family lives in ``cases/<family>/``: ``family.yaml`` plus case files (``*.jsonl``: one case a
line; ``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``).  A bad case never stops the
others: :func:`load_case_file` returns the good cases and a :class:`CaseProblem` per bad one.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .models import Action, Case, Family, Label, ParallelGroup, ToolSpec
from .oracle.compare import ANY_OF, OMITTED, parse_date, parse_datetime
from .oracle.rules import RuleError, RuleSet, load_rules
from .traces import position_bucket

__all__ = ["FAMILY_FILE", "CaseProblem", "FamilyError", "LoadedFamily", "label_hash", "load_case_file", "load_family"]

FAMILY_FILE = "family.yaml"
CASE_SUFFIXES = (".jsonl", ".yaml", ".yml")


def _yaml_load(text: str) -> Any:
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class FamilyError(ValueError):
    """The family file (or a file it names) cannot be used; the message names the file."""


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

    @property
    def meta(self) -> dict[str, Any]:
        """What the report needs from the family: quota and population per bucket."""
        return {"quota": self.family.quota, "population": self.family.population}


def load_family(directory: Path) -> LoadedFamily:
    """Load ``directory/family.yaml`` and the files it names (tools, prompt, oracle rules).

    Raises:
        FamilyError: the family file or a file it names is missing or invalid.

    """
    path = directory / FAMILY_FILE
    try:
        raw = _yaml_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FamilyError(f"{path}: cannot read: {exc}") from exc
    except Exception as exc:
        raise FamilyError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, Mapping):
        raise FamilyError(f"{path}: a family file is a mapping")
    raw = dict(raw)
    raw.setdefault("name", directory.name)
    if raw.get("tools_file"):
        tf = directory / raw["tools_file"]
        try:
            raw["tools"] = [*json.loads(tf.read_text(encoding="utf-8")), *raw.get("tools", [])]
        except (OSError, json.JSONDecodeError) as exc:
            raise FamilyError(f"{path}: tools_file {tf}: {exc}") from exc
    try:
        fam = Family.model_validate(raw)
    except ValidationError as exc:
        raise FamilyError("; ".join(f"{path}: {_loc(e['loc'])}: {e['msg']}" for e in exc.errors())) from exc
    prompt = fam.system_prompt
    if fam.system_prompt_file:
        try:
            prompt = (directory / fam.system_prompt_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise FamilyError(f"{path}: system_prompt_file: {exc}") from exc
    try:
        rules = load_rules(directory / fam.oracle) if fam.oracle else RuleSet()
    except RuleError as exc:
        raise FamilyError(f"{path}: oracle: {exc}") from exc
    names = [t.name for t in fam.tools]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise FamilyError(f"{path}: tools: duplicate tool names {dup}")
    return LoadedFamily(fam.name, directory, fam, tuple(fam.tools), prompt, rules, {t.name: t for t in fam.tools})


def _loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _raw_cases(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line or index, raw case, parse error)``; a JSONL case comes as its line's text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
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
        return [CaseProblem(fname, cid_s, _loc(e["loc"]), e["msg"]) for e in errors]


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
    for k, v in args.items():
        if isinstance(v, Mapping) and ANY_OF in v:
            for alt in v[ANY_OF]:
                if not (isinstance(alt, Mapping) and alt.get(OMITTED)):
                    problems += _schema_errors(tool, k, alt, f"{where}.args.{k}")
        elif k in props:
            plain[k] = v
    for k, v in plain.items():
        problems += _schema_errors(tool, k, v, f"{where}.args.{k}")
    return problems


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
    if not isinstance(sub, Mapping):
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
            for k, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
                call_id = tc.get("id") if isinstance(tc, Mapping) else None
                pending[call_id or f"#{i}.{k}"] = (i, str(fn.get("name")))
        elif role == "tool":
            result_id = m.get("tool_call_id")
            if result_id in pending:
                pending.pop(result_id)
            elif result_id is None and pending:
                pending.pop(next(iter(pending)))
            else:
                problems.append((f"messages[{i}]", f"tool result for unknown call {result_id!r}"))
    for cid, (j, name) in pending.items():
        problems.append((f"messages[{j}].tool_calls", f"call {name} ({cid}) has no tool result"))
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
            if isinstance(alt, Action) and alt.tool == fb.tool and not fb.args:
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
        case = _parse_case(n, raw, fname)
        if isinstance(case, list):
            problems += case
            continue
        if case.id in seen:
            problems.append(CaseProblem(fname, case.id, "id", f"duplicate case id in family {family.name}"))
            continue
        seen.add(case.id)
        bad = validate_case(case, family)
        if bad:
            problems += [CaseProblem(fname, case.id, f, m) for f, m in bad]
            continue
        cases.append(case)
