"""The record log: records appended to a JSONL file as they complete, and read back.

:class:`RecordLog` writes one record per line and flushes each, so a crash loses nothing;
:func:`read_records` reads a log back as JSON objects, :func:`load_records` checks each line
against :class:`~pytest_tooleffect.scoring.record.Record`; both read every verdict back through one check
(a kind the oracle knows, consistent with the verdict's other fields, the class and ``no_tool_failure``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from pytest_tooleffect.scoring.no_tool import record_problem
from pytest_tooleffect.scoring.record import RECORD_VERSION, Record, VerdictRecord
from pytest_tooleffect.util.display import json_safe
from pytest_tooleffect.util.exceptions import first_problem
from pytest_tooleffect.util.jsonl import json_lines
from pytest_tooleffect.util.versions import version_problem

__all__ = ["RecordLog", "load_records", "looks_like_record", "not_a_record_log", "read_records"]


class RecordLog:
    """Append-only JSONL log; each record is written and flushed as it completes.

    A write that fails (a full disk) does not raise: the log stops there, keeps what it had
    flushed, and :attr:`error` says why (the reporter turns it into a failed exit status).

    Args:
        path: the log file (created, with its folder; an existing file is replaced).  An existing
            file with other names (a hard link: another run may be writing it under one of them) is
            unlinked first, so the log is a new file and the other names keep what they hold.

    Attributes:
        written: records flushed to the file.
        lost: records that came after a failed write and are not in the file.
        error: the failed write's error, or ``None``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _unshare(path)
        self._fh: IO[str] | None = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self.written = 0
        self.lost = 0
        self.error: OSError | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        r"""Append one record (keys sorted; control, bidirectional and separator characters and lone
        surrogates as ``\uXXXX``: :func:`~pytest_tooleffect.util.display.json_safe`) and flush it to the
        operating system.
        """
        try:
            line = json_safe(json.dumps(record, ensure_ascii=False, sort_keys=True, default=str, allow_nan=False))
        except ValueError as exc:  # NaN or an infinity: no line of the log is anything but JSON
            with self._lock:
                self.lost += 1
                self.error = self.error or OSError(errno.EINVAL, f"record {record.get('id')!r} holds a number JSON "
                                                                 f"has no form for ({exc}): not written")
            return
        with self._lock:
            if self._fh is None:
                self.lost += 1
                return
            try:
                self._fh.write(line + "\n")
                self._fh.flush()
            except OSError as exc:
                self.error, self.lost = exc, self.lost + 1
                self._drop()
            else:
                self.written += 1

    def _drop(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:  # the unflushed tail of a failed write: already counted as lost
                pass

    def close(self) -> None:
        """Close the file (a failure to flush is kept in :attr:`error`, not raised)."""
        with self._lock:
            fh, self._fh = self._fh, None
            if fh is None:
                return
            try:
                fh.close()
            except OSError as exc:
                self.error = self.error or exc


def _unshare(path: Path) -> None:
    """Unlink ``path`` when it is a regular file with other names (``st_nlink > 1``): truncating it
    would empty the file under every name, another run's log among them (two runs hold the lock
    of their own name each).  Symbolic links are followed: the file they reach is the one unlinked.
    """
    try:
        st = os.stat(path)
    except OSError:  # not there yet: created by open()
        return
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        os.unlink(os.path.realpath(path))


def _lines(path: Path) -> list[tuple[int, Any]]:
    """``(line number, JSON value)`` of every non-blank line.

    Raises:
        ValueError: ``line N: why``; a first line that is not UTF-8 or does not open a JSON object is
            named as no record log (read no further); a bad last line of a file that does not end its
            last line, after lines that are records, is named as torn (a run cut mid-write).
    """
    out: list[tuple[int, Any]] = []
    bad: tuple[int, str] | None = None
    last = 0
    for n, value, why in json_lines(path):
        last = n
        if why is not None:
            if not out and bad is None and (why.startswith("not UTF-8") or not _opens_object(path)):
                raise ValueError(f"line {n}: {why}: not a tooleffect record log")
            bad = bad or (n, why)
        elif bad is None:
            out.append((n, value))
    if bad is not None:
        n, why = bad
        records = all(isinstance(v, dict) and "version" in v for _, v in out)
        cut = "; the last line is torn: the run that wrote it was cut" \
            if n == last and records and _unended(path) else ""
        raise ValueError(f"line {n}: {why}{cut}")
    return out


def _opens_object(path: Path) -> bool:
    """The file's first non-blank byte (after a byte-order mark) is ``{``, as a record log's is (a
    bounded read; ``True`` for a pipe, which cannot be read again).
    """
    if not path.is_file():
        return True
    with path.open("rb") as fh:
        head = fh.read(4096).removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    return not head or head.startswith(b"{")


def _unended(path: Path) -> bool:
    """The file ends with neither LF nor CR: the log writes whole lines, so a run cut mid-write left it
    (``False`` for a pipe: it cannot be read again).
    """
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        fh.seek(0, 2)
        if not fh.tell():
            return False
        fh.seek(-1, 2)
        return fh.read(1) not in (b"\n", b"\r")  # CR: a file of CR-ended lines, not a cut one


def read_records(path: Path) -> list[dict[str, Any]]:
    """Read a record log back as JSON objects, each line's verdict checked.

    The verdict of every record that has one is read back as :func:`load_records` reads it
    (:class:`~pytest_tooleffect.scoring.record.VerdictRecord`: a kind the oracle knows, consistent with
    the verdict's other fields, :func:`pytest_tooleffect.oracle.kinds.verdict_problem`), with the record's
    class and ``no_tool_failure`` (:func:`pytest_tooleffect.scoring.no_tool.record_problem`); the other
    fields are left to the caller (a baseline reads a few of them).

    Args:
        path: the JSONL log.

    Returns:
        One JSON value per non-blank line.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line that is not JSON, a record of a version this plugin does not read, or a
            verdict that is not one (names the line and the field).
    """
    return [value for _, value in _read_back(path, whole=False)]


def load_records(path: Path) -> list[Record]:
    """Read a record log back and check every line against :class:`Record` (its verdict as
    :func:`read_records` checks it).

    Args:
        path: the JSONL log.

    Returns:
        The records, in the log's order.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line that is not JSON or not a record (names the line and the field).
    """
    return [record for record, _ in _read_back(path, whole=True)]


def _read_back(path: Path, whole: bool) -> list[tuple[Any, Any]]:
    """``(Record, value)`` (``whole``) or ``(None, value)`` per line: the one read-back check of a record log.

    Raises:
        ValueError: ``line N: version: …`` or ``line N is not a tooleffect record (field: …)``.
    """
    out: list[tuple[Any, Any]] = []
    for n, value in _lines(path):
        why = version_problem(value["version"], RECORD_VERSION) if isinstance(value, dict) and "version" in value \
            else None
        if why is not None:  # before the fields: a newer record's are not this version's
            raise ValueError(f"line {n}: version: {why}")
        try:
            if whole:
                out.append((Record.model_validate(value), value))
                continue
            if isinstance(value, dict) and isinstance(value.get("verdict"), dict):
                verdict = VerdictRecord.model_validate(value["verdict"])
                why = _record_problem(value, verdict)
                if why is not None:
                    raise ValueError(f"line {n} is not a tooleffect record ({why})")
        except ValidationError as exc:
            where = first_problem(exc, "" if whole else "verdict")
            raise ValueError(f"line {n} is not a tooleffect record ({where})") from exc
        out.append((None, value))
    return out


def _record_problem(value: dict[str, Any], verdict: VerdictRecord) -> str | None:
    """The record-level half of the read-back rule on a line read as JSON (its class, ``no_tool_failure`` and
    effect as :class:`Record` checks them), when those fields have their types (else the caller names them).
    """
    cls, bucket, effect = value.get("class"), value.get("no_tool_failure"), value.get("effect")
    passed = effect.get("passed") if isinstance(effect, dict) else None
    if cls not in ("single", "several", "no_tool") or not isinstance(bucket, str | None) or \
            not isinstance(passed, bool | None):
        return None
    return record_problem(cls, bucket, verdict, passed)


#: the keys every record has (:class:`~pytest_tooleffect.scoring.record.Record`)
_RECORD_KEYS = frozenset({"id", "family", "case_id", "policy", "outcome", "label_hash"})


def looks_like_record(value: Any) -> bool:
    """A JSON value that has the keys every record has (read from a file that should be something else)."""
    return isinstance(value, dict) and _RECORD_KEYS <= value.keys()


def not_a_record_log(path: Path) -> str | None:
    """What a file given as a record log is, in words, when it is another of tooleffect's files.

    Args:
        path: the file (read whole only when its first line is not a record).

    Returns:
        One line naming the file's kind and what to give instead when it is a JSON report or a
        baseline file; ``None`` when it is neither (a record log, or something else).
    """
    try:
        with path.open(encoding="utf-8") as fh:
            first = fh.readline()
            try:
                head = json.loads(first)
            except ValueError:
                head = None
            if looks_like_record(head):
                return None
            data = json.loads(first + fh.read())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if isinstance(data, dict) and data.get("kind") == "tooleffect-baseline":
        return ("this is a baseline file, not a record log: a baseline is made from a record log "
                "(--tooleffect-records) and given to --tooleffect-baseline")
    if isinstance(data, dict) and "blocks" in data and "conventions" in data:
        return ("this is a tooleffect report, not a record log: it holds rates, not per-decision records; give the "
                "record log the run wrote (--tooleffect-records, default reports/tooleffect-records.jsonl)")
    return None
