"""Loading case files, with validation that names file, case id and field.

A family lives in ``cases/<family>/``: ``family.yaml`` (:mod:`.family`) plus case files
(``*.jsonl``: one case a line; ``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``).  A
bad case never stops the others: :func:`load_case_file` returns the good cases and a
:class:`CaseProblem` per bad one.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .family import (
    CASE_SUFFIXES,
    FAMILY_FILE,
    FamilyError,
    LoadedFamily,
    error_location,
    is_case_file,
    load_family,
    named_files,
    yaml_load,
)
from .models import Case, Label
from .validation import validate_case

__all__ = ["CASE_SUFFIXES", "FAMILY_FILE", "CaseProblem", "FamilyError", "LoadedFamily", "is_case_file",
           "label_hash", "load_case_file", "load_family", "named_files", "validate_case"]


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


def _raw_cases(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line or index, raw case, parse error)``; a JSONL case comes as its line's text."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.split("\n"), 1):
            if line.strip():
                yield n, line, None
        return
    try:
        doc = yaml_load(text)
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
        return [CaseProblem(fname, cid_s, error_location(e["loc"]), e["msg"].removeprefix("Value error, "))
                for e in errors]


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
