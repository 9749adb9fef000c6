"""Loading case files, with validation that names file, case id and field.

A family lives in ``cases/<family>/``: ``family.yaml`` (:mod:`.family`) plus case files
(``*.jsonl``: one case a line; ``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``).  A
bad case never stops the others: :func:`load_case_file` returns the good cases and a
:class:`CaseProblem` per bad one.

A run keeps of each case only a :class:`CaseRef` (its id, class, bucket, label hash and where its
line is): :func:`case_refs` reads a JSONL file one line at a time and lets each parsed case go, and
an item reads its case again from its line (:meth:`CaseRef.load`) in setup, so memory does not grow
with the cases' size times their number, and an xdist worker holds only the cases of its items.
"""

from __future__ import annotations

import codecs
import errno
import gc
import hashlib
import json
import os
import stat
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_tooleffect.collect.family import (
    CASE_SUFFIXES,
    FAMILY_FILE,
    FamilyError,
    LoadedFamily,
    error_location,
    is_case_file,
    load_family,
    named_files,
    yaml_load_items,
    yaml_written,
)
from pytest_tooleffect.collect.validation import validate_case
from pytest_tooleffect.formats import Case, Label
from pytest_tooleffect.util.input_files import open_input, read_input_text
from pytest_tooleffect.util.jsonl import RepeatedKey, bare_cr_hint, loads
from pytest_tooleffect.util.known_keys import extra_key_message
from pytest_tooleffect.util.unicode import LoneSurrogate, Surrogate, find_surrogate, without_surrogates

__all__ = ["CASE_SUFFIXES", "FAMILY_FILE", "CaseProblem", "CaseRef", "CaseSpan", "FamilyError", "LoadedFamily",
           "case_label_hash", "case_refs", "is_case_file", "label_hash", "load_case_file",
           "load_family", "named_files", "validate_case"]


@dataclass(frozen=True)
class CaseProblem:
    """One validation problem: where it is and what is wrong."""

    file: str
    case_id: str | None
    field: str
    message: str
    line: int | None = None
    """The case's line in its file (1-based), when known."""

    def __str__(self) -> str:
        where = f"case {self.case_id}" if self.case_id else "file"
        return f"{self.file}: {where}: {self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class CaseSpan:
    """Where one JSONL case lies in its file: ``length`` bytes from byte ``offset`` (its line, no
    newline), and ``crc32``, the CRC-32 (:func:`zlib.crc32`) of those bytes as collected, which
    tells a line edited in place from the one validated (``None``: not checked); ``line``, its
    line number (1-based; ``None``: not known).
    """

    path: Path
    offset: int
    length: int
    crc32: int | None = None
    line: int | None = None

    def read(self) -> bytes:
        """The line's bytes, read again from the file (opened for this read alone).

        A path that is no longer a regular file (a pipe, say) is an error, never a wait.  Keeping
        the files open between reads saved 0.06 s CPU of a 10.8 s run at 10,000 decisions (0.6 %):
        not worth a process-wide cache of descriptors.

        Raises:
            OSError: the file cannot be read, or is no longer a regular file.
        """
        if not hasattr(os, "pread"):  # pragma: no cover - Windows: no positioned read
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                return fh.read(self.length)
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file any more", str(self.path))
            return os.pread(fd, self.length, self.offset)
        finally:
            os.close(fd)


@dataclass(frozen=True, slots=True)
class CaseRef:
    """What a run keeps of a validated case between collection and the item that needs it whole.

    Attributes:
        id: the case's id.
        label_class: ``single``, ``several`` or ``no_tool``; ``None`` for an unlabelled case.
        bucket: the state's position bucket.
        xfail: the case's ``xfail`` (a reason, ``True``, or ``None``/``False``).
        label_hash: :func:`label_hash` of its label (``unlabelled`` without one).
        span: where its line is, for a JSONL case; ``None`` when the case is kept whole.
        case: the case itself when it cannot be read again on its own (a YAML file's, parsed
            with its whole file); ``None`` for a JSONL case.
        line: where the case starts in its file (1-based: a JSONL case's line, the line of a YAML
            case's list item); ``None`` when not known.
    """

    id: str
    label_class: str | None
    bucket: str
    xfail: bool | str | None
    label_hash: str
    span: CaseSpan | None = None
    case: Case | None = None
    line: int | None = None

    @classmethod
    def of(cls, case: Case, span: CaseSpan | None = None, line: int | None = None,
           family: LoadedFamily | None = None) -> CaseRef:
        """The reference to ``case``: its line when ``span`` is given, else the case kept whole;
        ``line``, where it starts in its file (default: the span's line); ``family``, its family
        (an MCP family's catalog is part of its label hash, :func:`case_label_hash`).
        """
        if line is None and span is not None:
            line = span.line
        return cls(id=case.id, label_class=case.label.label_class if case.label is not None else None,
                   bucket=case.placement.bucket, xfail=case.xfail, label_hash=case_label_hash(case, family), span=span,
                   case=None if span is not None else case, line=line)

    def load(self) -> Case:
        """The case, parsed again from its line (validated at collection: not validated again).

        Raises:
            ValueError: the line cannot be read any more, or its bytes are not those collected (the
                file changed during the run); the message names the file, the case id and the offset.
        """
        if self.case is not None:
            return self.case
        assert self.span is not None
        where = f"{self.span.path}: case {self.id}"
        try:
            line = self.span.read()
            case = Case.model_validate_json(line)
        except (OSError, ValidationError) as exc:
            detail = f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else _first_error(exc)
            raise ValueError(f"{where}: cannot be read again at byte {self.span.offset} (the file changed during "
                             f"the run?): {detail}") from None
        if case.id != self.id:
            raise ValueError(f"{where}: the line at byte {self.span.offset} now holds case {case.id} "
                             "(the file changed during the run)")
        if self.span.crc32 is not None and zlib.crc32(line) != self.span.crc32:
            raise ValueError(f"{where}: the line at byte {self.span.offset} is not the one collected (the file "
                             "changed during the run)")
        return case


def _first_error(exc: ValidationError) -> str:
    """A validation error in one line: its first error's field path and message, and how many more."""
    errors = exc.errors(include_url=False)
    if not errors:
        return "ValidationError"
    first = errors[0]
    loc = ".".join(str(x) for x in first["loc"]) or "<case>"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first['msg']}{more}"


#: JSON's whitespace (RFC 8259 §2): a line of nothing else is blank
JSON_WHITESPACE = " \t\r\n"


def _raw_cases(path: Path) -> Iterator[tuple[int, Any, str | None, CaseSpan | None, int | None, yaml.Node | None]]:
    """Yield ``(line or index, raw case, problem, span, line, node)``; a JSONL case comes as its line's
    text with its span, one line at a time (the file is never held whole); a YAML case with the line its
    list item starts at and its YAML node (what the author wrote, for :func:`yaml_written`).

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: a YAML file that is not UTF-8.
    """
    if path.suffix == ".jsonl":
        for n, raw, problem, span, line in _jsonl_lines(path):
            yield n, raw, problem, span, line, None
        return
    text = read_input_text(path, "utf-8-sig", pipes=False)
    try:
        doc, items = yaml_load_items(text, "cases")
    except Exception as exc:
        yield 0, None, f"not valid YAML: {' '.join(str(exc).split())}", None, None, None
        return
    if isinstance(doc, Mapping) and "cases" in doc:
        doc = doc["cases"]
    if doc is None:
        return
    if not isinstance(doc, list):
        yield 0, None, "a YAML case file holds a list of cases (or a mapping with 'cases:')", None, None, None
        return
    for n, raw in enumerate(doc):
        node = items[n] if items is not None and n < len(items) else None
        yield n, raw, None, None, None if node is None else node.start_mark.line + 1, node


def _jsonl_lines(path: Path) -> Iterator[tuple[int, Any, str | None, CaseSpan | None, int | None]]:
    """The non-blank lines of a JSONL file (split at newlines, a leading BOM skipped), each with its
    span; a line that is not UTF-8 is a problem of the file naming the line, and the rest is read.
    """
    with open_input(path, pipes=False) as fh:
        end = 0
        for n, line in enumerate(fh, 1):
            start, end = end, end + len(line)
            if n == 1 and line.startswith(codecs.BOM_UTF8):
                line, start = line[len(codecs.BOM_UTF8):], start + len(codecs.BOM_UTF8)
            body = line[:-1] if line.endswith(b"\n") else line
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield n, None, f"line {n} is not UTF-8 text ({exc.reason} at byte {exc.start} of the line)", None, n
                continue
            if text.strip(JSON_WHITESPACE):  # str.strip() would also drop 0x1c-0x1f and Unicode spaces
                yield n, text, None, CaseSpan(path, start, len(body), zlib.crc32(body), n), n


def _parse_case(n: int, raw: Any, fname: str) -> Case | list[CaseProblem]:
    """Validate one raw case (a JSONL line's text, or a parsed mapping)."""
    parsed = None
    try:
        if isinstance(raw, str):
            try:
                raw = parsed = loads(raw)  # the shared reader: a key given twice is refused, not kept last
            except RepeatedKey as exc:
                owner = str(exc.owner) if isinstance(exc.owner, str | int) else f"line {n}"
                return [CaseProblem(fname, owner, exc.key, f"line {n}: {exc.plain}")]
            except LoneSurrogate as exc:
                return [_surrogate(fname, n, exc.found, exc.owner)]
            except (ValueError, RecursionError):
                return Case.model_validate_json(raw)  # not JSON: pydantic's error, told below
            if not isinstance(raw, Mapping):
                return [CaseProblem(fname, f"line {n}", "<case>", "a case is a JSON object")]
        if not isinstance(raw, Mapping):
            return [CaseProblem(fname, f"#{n}", "<case>", f"a case is a mapping, got {type(raw).__name__}")]
        found = find_surrogate(raw) if parsed is None else None  # a line read by loads was checked there
        if found is not None:  # a YAML case's tool-call arguments (JSON text) are read for one too
            return [_surrogate(fname, n, found, raw.get("id"))]
        return Case.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        if isinstance(raw, str) and errors and errors[0]["type"] == "json_invalid":
            try:
                json.loads(raw)
            except json.JSONDecodeError as jexc:
                return [CaseProblem(fname, None, "<file>",
                                    f"line {n} is not valid JSON: {jexc.msg} (column {jexc.colno})"
                                    + bare_cr_hint(raw))]
        try:
            doc = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            doc = None
        cid = doc.get("id") if isinstance(doc, Mapping) else None
        if not isinstance(doc, Mapping):
            return [CaseProblem(fname, f"line {n}", "<case>", "a case is a JSON object")]
        cid_s = str(cid) if cid is not None else f"#{n}"
        return [CaseProblem(fname, cid_s, error_location(e["loc"]), extra_key_message(Case, e)) for e in errors]


def _surrogate(fname: str, n: int, found: Surrogate, owner: Any) -> CaseProblem:
    """The problem of a case holding a lone surrogate: its id (or its line), the field, the code point."""
    cid = str(owner) if isinstance(owner, str | int) and not isinstance(owner, bool) else f"#{n}"
    message = str(found).removeprefix(f"{found.field} ").replace("(JSON text), ", "its JSON text, ", 1) \
        if found.field else str(found)
    return CaseProblem(fname, without_surrogates(cid), found.field or "<case>", message)


def label_hash(label: Label | None, catalog: str | None = None, confirmed: bool = False) -> str:
    """SHA-256 (16 hex digits) of the label's canonical JSON (reasons and labellers excluded).

    Args:
        label: the case's label (``None``: ``"unlabelled"``).
        catalog: an MCP family's :attr:`~pytest_tooleffect.collect.family.LoadedFamily.catalog_digest`,
            hashed with the label together with the case's ``confirmed`` (both decide which tools the
            annotation policy forbids); ``None`` for any other family (the label alone).
        confirmed: the case's ``confirmed``, read only with ``catalog``.
    """
    if label is None:
        return "unlabelled"
    data = label.model_dump(mode="json", exclude={"labelled_by", "notes"})
    for group in ("valid_actions", "forbidden_actions"):
        for a in data[group]:
            a.pop("reason", None)
            for m in a.get("parallel") or []:
                m.pop("reason", None)
    if catalog is not None:
        data = {"label": data, "catalog": catalog, "confirmed": confirmed}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def case_label_hash(case: Case, family: LoadedFamily | None) -> str:
    """The hash a record of ``case`` carries: :func:`label_hash` with its family's catalog digest."""
    catalog = family.catalog_digest if family is not None else None
    return label_hash(case.label, catalog, case.confirmed)


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
    cases: list[Case] = []
    problems = _load(path, family, seen, lambda case, span, line: cases.append(case))
    return cases, problems


#: counts one entry of a case file by its bucket (``None``: an entry whose bucket cannot be told)
BucketCount = Callable[[str | None], object]


def case_refs(path: Path, family: LoadedFamily, seen: set[str] | None = None, count: BucketCount | None = None
              ) -> tuple[list[CaseRef], list[CaseProblem]]:
    """Validate every case of one file and keep a :class:`CaseRef` of each usable one.

    A JSONL file is read one line at a time and each case is let go once validated (its ref
    reads it again from its line); a YAML file's cases are kept whole in their refs.

    Args:
        path: the case file.
        family: its loaded family.
        seen: case ids already loaded from this family (updated; a repeat is a problem).
        count: called once per entry of the file with its position bucket, for the invalid cases
            too (``None`` for an entry, or a file, whose bucket cannot be read); a repeated id is
            not counted again.

    Returns:
        ``(refs, problems)``: one ref per usable case, and one problem per unusable case or file.
    """
    refs: list[CaseRef] = []
    problems = _load(path, family, seen, lambda case, span, line: refs.append(CaseRef.of(case, span, line, family)),
                     count)
    return refs, problems


def _load(path: Path, family: LoadedFamily, seen: set[str] | None,
          keep: Callable[[Case, CaseSpan | None, int | None], object],
          count: BucketCount | None = None) -> list[CaseProblem]:
    """Validate the file's cases one at a time, hand each usable one to ``keep``; the problems."""
    seen = seen if seen is not None else set()
    problems: list[CaseProblem] = []
    fname = str(path)
    tally = count or (lambda bucket: None)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # thousands of long-lived objects: generational GC passes would rescan them all
    try:
        read = 0
        for n, raw, error, span, line, node in _raw_cases(path):
            read += 1
            if error:
                problems.append(CaseProblem(fname, None, "<file>", error, line))
                tally(None)
                continue
            before = len(problems)
            case = _checked(n, raw, fname, family, seen, problems, tally)
            if case is not None:
                keep(case, span, line)
            elif line is not None:
                problems[before:] = [replace(p, line=line, message=_as_written(p.message, node, p.field))
                                     for p in problems[before:]]
        if not read:  # a file of the family that holds nothing would leave no trace in the report
            problems.append(CaseProblem(fname, None, "<file>", "holds no case (an empty case file)"))
    except (OSError, UnicodeDecodeError) as exc:
        tally(None)
        return [CaseProblem(fname, None, "<file>", f"cannot read: {exc}")]
    finally:
        if gc_was_enabled:
            gc.enable()
    # what the run keeps of them lives for the whole run: keep later collections from rescanning it
    gc.freeze()
    return problems


def _as_written(message: str, node: yaml.Node | None, field: str) -> str:
    """A problem's message, told what YAML made of the value when a string was wanted and the author
    wrote it unquoted (``01042``, read as the number 546).
    """
    written = yaml_written(node, field) if "string" in message else None
    return f"{message} ({written})" if written else message


def _raw_bucket(raw: Any) -> str | None:
    """The position bucket a case that did not parse says it is in, when it says one."""
    try:
        doc = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        return None
    placement = doc.get("placement") if isinstance(doc, Mapping) else None
    bucket = placement.get("bucket") if isinstance(placement, Mapping) else None
    return bucket if isinstance(bucket, str) and bucket else None


def _checked(n: int, raw: Any, fname: str, family: LoadedFamily, seen: set[str],
             problems: list[CaseProblem], tally: BucketCount) -> Case | None:
    """The case parsed and validated against its family, or ``None`` with its problems added;
    ``tally`` is told its bucket (``None`` when it cannot be read), unless its id is a repeat.
    """
    try:
        case = _parse_case(n, raw, fname)
    except (RecursionError, ValueError, TypeError) as exc:
        problems.append(CaseProblem(fname, f"line {n}", "<case>", f"cannot read: {type(exc).__name__}: {exc}"))
        tally(None)
        return None
    if isinstance(case, list):
        problems += case
        tally(_raw_bucket(raw))
        return None
    if case.id in seen:
        problems.append(CaseProblem(fname, case.id, "id", f"duplicate case id in family {family.name}"))
        return None
    seen.add(case.id)
    tally(case.placement.bucket)
    try:
        bad = validate_case(case, family)
    except Exception as exc:  # a case shape the checks did not foresee: report it, go on
        bad = [("<case>", f"cannot validate: {type(exc).__name__}: {exc}")]
    if bad:
        problems += [CaseProblem(fname, case.id, f, m) for f, m in bad]
        return None
    return case
