"""Reading JSON Lines files: one reader for every JSONL input of the plugin and its commands.

Lines are decoded by the ``jsonlines`` library (a UTF-8 byte-order mark on the first line is
skipped, each line is decoded on its own so a bad byte names its line); blank lines are skipped.
Callers add what a line must hold (an object, an ``id``, ``messages``) and their own error type.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonlines

__all__ = ["json_lines", "read_objects"]


def json_lines(path: Path | str) -> Iterator[tuple[int, Any, str | None]]:
    """Each non-blank line of a JSON Lines file.

    Yields:
        ``(line number, value, None)`` for a line that is JSON (``null`` included), and
        ``(line number, None, why)`` for one that is not UTF-8 or not JSON; reading goes on after
        it, so a caller can list every bad line.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as fh:
        at = [0]  # the line the reader last took (it counts lines as this does, from 1)

        def lines() -> Iterator[bytes]:
            for at[0], line in enumerate(fh, 1):
                yield line

        reader = jsonlines.Reader(lines(), loads=json.loads)
        while True:
            try:
                value = reader.read(allow_none=True, skip_empty=True)
            except EOFError:
                return
            except jsonlines.InvalidLineError as exc:
                yield exc.lineno, None, _why(exc)
                continue
            yield at[0], value, None


def _why(exc: jsonlines.InvalidLineError) -> str:
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return f"not UTF-8 text ({cause.reason} at byte {cause.start})"
    if isinstance(cause, json.JSONDecodeError):
        return f"not valid JSON: {cause.msg}, column {cause.colno}"
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
