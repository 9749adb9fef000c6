"""Reading JSON Lines files: one reader for every JSONL input of the plugin and its commands.

Lines are decoded by the ``jsonlines`` library, each line on its own so a bad byte names its line;
a UTF-8 byte-order mark is skipped on the first line only, and blank lines (JSON whitespace
only) are skipped.  What JSON does not allow is refused: ``NaN``/``Infinity``, a line that starts
with a record separator (0x1e, RFC 7464's JSON text sequences, not JSON Lines), a byte-order mark
past the first line.  So is an object that gives one key twice (:class:`RepeatedKey`): JSON leaves
its meaning open (RFC 8259 §4, "the names within an object SHOULD be unique") and Python's ``json``
keeps the last in silence, so a repeated ``label`` would drop the first one's forbidden actions.
:func:`loads` is the one JSON reader of every input file (cases, families' JSON files, record
logs, reports, baselines, label files, traces).  Callers add what a line must hold (an object,
an ``id``, ``messages``) and their own error type.
"""
from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import jsonlines

from pytest_tooleffect.util.input_files import open_input
from pytest_tooleffect.util.json_keys import UNIQUE_KEYS, RepeatedKey, loads_unique, unique
from pytest_tooleffect.util.unicode import LoneSurrogate, may_hold_surrogate

__all__ = ["UNIQUE_KEYS", "LoneSurrogate", "RepeatedKey", "bare_cr_hint", "json_lines", "loads", "loads_unique",
           "read_objects"]

_RS = b"\x1e"


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


# built once: json.loads with any keyword builds a decoder per call (slower than this one)
_DECODER = json.JSONDecoder(parse_constant=_no_constant, object_pairs_hook=unique)


def loads(text: str | bytes | bytearray) -> Any:
    r"""``json.loads`` refusing ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, RFC 8259 §6), an
    object that gives a key twice, and text that decodes to a lone surrogate (``"\ud800"``: not
    valid Unicode, RFC 8259 §8.2; a tool call's ``arguments`` JSON text is read for one too).

    Raises:
        LoneSurrogate: a string, a key or an ``arguments`` JSON text holds a lone surrogate (a
            ``ValueError``; its message names the field and the ``id`` of the top-level object).
        RepeatedKey: an object gives a key twice (a ``ValueError``; its message names the key and the
            ``id`` of the top-level object, when it has one).
        ValueError: not JSON (``json.JSONDecodeError``), or one of those constants.
        RecursionError: nested deeper than the interpreter's recursion limit.
    """
    if not isinstance(text, str):
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # as json.loads does
    try:
        value = _DECODER.decode(text)
    except RepeatedKey as exc:
        try:
            whole = json.loads(text)  # read again keeping the last, only to name the entry
        except (ValueError, RecursionError):
            whole = None
        owner = whole.get("id") if isinstance(whole, dict) else None
        raise RepeatedKey(exc.key, owner) from None
    if may_hold_surrogate(text):  # rare: walk the value only then
        LoneSurrogate.check(value)
    return value


def json_lines(path: Path | str) -> Iterator[tuple[int, Any, str | None]]:
    """Each non-blank line of a JSON Lines file.

    Yields:
        ``(line number, value, None)`` for a line that is JSON (``null`` included), and
        ``(line number, None, why)`` for one that is not UTF-8, not JSON, nested too deeply or
        prefixed as above; reading goes on after it, so a caller can list every bad line.

    Raises:
        OSError: the file cannot be opened or read; :class:`~pytest_tooleffect.util.input_files.InputFileError`
            (an ``OSError``) for a file that is no file to read or longer than the input limit.
    """
    with open_input(path) as fh:
        at = [0]  # the line the reader last took (it counts lines as this does, from 1)
        prefixed: set[int] = set()

        def lines() -> Iterator[bytes]:
            for at[0], line in enumerate(fh, 1):
                if line.startswith(_RS) or (at[0] > 1 and line.startswith(codecs.BOM_UTF8)):
                    prefixed.add(at[0])  # jsonlines drops either prefix on any line
                yield line.rstrip(b"\r\n")  # an error's column counts within the line

        reader = jsonlines.Reader(lines(), loads=loads)
        while True:
            try:
                value = reader.read(allow_none=True, skip_empty=True)
            except EOFError:
                return
            except jsonlines.InvalidLineError as exc:
                yield exc.lineno, None, _why(exc)
                continue
            except RecursionError:
                yield at[0], None, "not read: nested too deeply"
                continue
            if at[0] in prefixed:
                yield at[0], None, "not valid JSON: starts with a record separator (0x1e) or a byte-order mark"
                continue
            yield at[0], value, None


def bare_cr_hint(line: str | bytes) -> str:
    """What to add to a line's JSON error when the line holds a bare carriage return (CR not
    followed by LF): a file whose lines end in CR alone (old Mac line endings) reads as one line,
    since JSON Lines ends a line at LF (https://jsonlines.org: the line separator is LF, 0x0A).

    Args:
        line: the line as read, its final LF or CRLF taken off.

    Returns:
        ``"; ..."`` naming the cause, or ``""`` when the line has no bare CR.
    """
    text = line if isinstance(line, str) else line.decode("latin-1")
    if "\r" not in text.replace("\r\n", "\n"):
        return ""
    return ("; the line holds a bare carriage return (CR): are the file's lines ended by CR alone? "
            "JSON Lines ends each line with LF (or CRLF)")


def _why(exc: jsonlines.InvalidLineError) -> str:
    cause = exc.__cause__
    if isinstance(cause, RepeatedKey | LoneSurrogate):
        return str(cause)
    if isinstance(cause, UnicodeDecodeError):
        return f"not UTF-8 text ({cause.reason} at byte {cause.start})"
    if isinstance(cause, json.JSONDecodeError):
        return f"not valid JSON: {cause.msg} (column {cause.colno})" + bare_cr_hint(cause.doc)
    if isinstance(cause, ValueError):
        return f"not valid JSON: {cause}"
    return str(exc).removesuffix(f" (line {exc.lineno})")


def read_objects(path: Path | str, what: str = "an entry") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each line of a JSON Lines file whose lines are all objects.

    Args:
        path: the file.
        what: what a line is, for the error (``"a case"``, ``"a record"``).

    Raises:
        ValueError: a line that is not UTF-8, not JSON or not a JSON object, as
            ``"<path>: line <n>: ..."``.
        OSError: the file cannot be opened or read.
    """
    for n, value, why in json_lines(path):
        if why is not None:
            raise ValueError(f"{path}: line {n}: {why}")
        if not isinstance(value, dict):
            raise ValueError(f"{path}: line {n}: {what} is a JSON object, got {type(value).__name__}")
        yield n, value
