"""The text channel read in time linear in its length: where its markers are, and every JSON value in it.

:func:`~pytest_tooleffect.oracle.emission.parse_emission` looks for calls a model wrote into its
text reply by trying to read a JSON value at every ``{`` and ``[``.  Done naively that is quadratic
(a reply of a million ``[`` took minutes): each attempt may read to the end of the text, and each
marker lookup scans the text before it.  This module holds the two pieces that keep it linear:

* :class:`Markers`: the positions of the wrapper tags (``<tool_call>`` …), their closers and the
  code fences, found once, so the wrapper around a position is a few binary searches;
* :class:`JsonScan`: the JSON value at a position, each read at most once, skipping without
  reading what cannot be a value (a ``{`` not followed by a key) and a run of ``[`` whose innermost
  value does not read (an array whose first element does not read does not read either), under a
  bound on the characters read in all (:data:`WORK_PER_CHAR` per character of the text plus
  :data:`WORK_BASE`): past it the reader stops and says where (:attr:`JsonScan.cut_at`).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

from pytest_tooleffect.util.json_keys import UNIQUE_KEYS, RepeatedKey

__all__ = ["WORK_BASE", "WORK_PER_CHAR", "JsonScan", "Markers"]

#: the characters a reply's JSON reads may cover in all: this many per character of the text …
WORK_PER_CHAR = 32
#: … plus this many (a real reply reads each character a few times: once per JSON value around it)
WORK_BASE = 1 << 20

_JSON = UNIQUE_KEYS  # json's reader, refusing an object that gives a key twice (never the last kept)
_WS = " \t\n\r"
# a position where a JSON value may start: a { followed by a key or }, a [ followed by a value or ]
# (an object among them followed by a key or }); anything else fails on its next character or the
# one after (so skipping it changes nothing)
_START = re.compile(r"\{(?=[ \t\n\r]*[\"}])|\[(?=[ \t\n\r]*(?:[\"\-0-9\[\]tfnNI]|\{[ \t\n\r]*[\"}]))")
_OPEN_RUN = re.compile(r"(?:\[[ \t\n\r]*)+")
_VALUE_AFTER_BRACKET = frozenset('"-0123456789]tfnNI')


def _limit(exc: BaseException) -> str:
    """What stopped the JSON reader short of the end of a value, in words (a number's digits, the depth)."""
    if isinstance(exc, RecursionError):
        import sys

        return f"nested deeper than it follows (Python's recursion limit, {sys.getrecursionlimit():,} frames)"
    digits = re.search(r"\((\d+) digits\).*has (\d+) digits", str(exc))
    if digits is not None:
        return f"a number of {int(digits.group(2)):,} digits ({int(digits.group(1)):,} at most)"
    return " ".join(str(exc).split())


class _Doc(str):
    """The text as the JSON reader sees it: the same characters, but a failed read does not count
    the lines before it (``json.JSONDecodeError`` counts the newlines up to where a read failed to
    say its line and column, a scan of the whole text before it, on every failure).
    """

    __slots__ = ()

    def count(self, *args: Any) -> int:  # only JSONDecodeError calls it (its line)
        return 0

    def rfind(self, *args: Any) -> int:  # only JSONDecodeError calls it (its column)
        return -1


class Markers:
    """Where each wrapper of a call opens and closes, and where the code fences are, read once.

    Args:
        text: the text channel.
        openers: ``(opening pattern, closing pattern or None, form)`` per wrapper; each pattern's
            matches must not overlap one another (true of tags and fixed markers).
        fence: the code fence pattern.
    """

    def __init__(self, text: str, openers: Sequence[tuple[re.Pattern[str], re.Pattern[str] | None, str]],
                 fence: re.Pattern[str]) -> None:
        self._kinds = []
        for opener, closer, form in openers:
            found = [(m.start(), m.end()) for m in opener.finditer(text)]
            if not found:
                continue
            closes = [(m.start(), m.end()) for m in closer.finditer(text)] if closer is not None else []
            self._kinds.append(([a for a, _ in found], [b for _, b in found], [a for a, _ in closes],
                                [b for _, b in closes], form))
        self._fence_ends = [m.end() for m in fence.finditer(text)]

    def form_at(self, pos: int) -> str:
        """The wrapper a JSON call at ``pos`` sits in: the last marker opened and not closed before
        it; else ``fenced JSON call`` after an odd number of fences, else ``JSON call``.
        """
        best: tuple[int, str] | None = None
        for starts, ends, close_starts, close_ends, form in self._kinds:
            # the last opener that ends before pos: if it is closed, so is every earlier one
            i = bisect_right(ends, pos) - 1
            if i < 0:
                continue
            j = bisect_left(close_starts, ends[i])
            if j < len(close_starts) and close_ends[j] <= pos:
                continue
            if best is None or starts[i] > best[0]:
                best = (starts[i], form)
        if best is not None:
            return best[1]
        return "fenced JSON call" if bisect_right(self._fence_ends, pos) % 2 == 1 else "JSON call"


class JsonScan:
    """The JSON values of a text, each read at most once and all of them under one bound.

    Args:
        text: the text channel.

    Attributes:
        work: the characters read so far (a value read whole counts its length; a value that fails
            counts up to where it failed, or to the end of the text when that is not known).
        budget: the most :attr:`work` may reach: :data:`WORK_PER_CHAR` × the text's length +
            :data:`WORK_BASE`.
        reads: how many times the JSON reader ran.
        cut_at: the position where reading stopped at the bound, else ``None``.
        limits: position → why the value there could not be read although it may be whole JSON:
            nested deeper than the reader follows, or a number longer than Python converts.
        repeated: position → the key an object in the value there gives twice (JSON keeps one of
            them without a word: not read as a call, but as a malformed one).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._doc = _Doc(text)
        self.work = 0
        self.reads = 0
        self.budget = WORK_PER_CHAR * len(text) + WORK_BASE
        self.cut_at: int | None = None
        self._memo: dict[int, tuple[Any, int] | None] = {}
        self.limits: dict[int, str] = {}
        self.repeated: dict[int, str] = {}

    def next_value(self, pos: int) -> tuple[int, Any, int] | None:
        """The next position from ``pos`` on where a JSON value reads.

        Returns:
            ``(start, value, end)``; ``None`` when no value reads after ``pos``, or when the bound
            was reached first (:attr:`cut_at` then says where).
        """
        text = self.text
        while self.cut_at is None:
            m = _START.search(text, pos)
            if m is None:
                return None
            start = m.start()
            if text[start] == "[":
                start = self._first_reading_in_run(start)
                if start < 0:  # no value of the run reads: past its innermost bracket
                    pos = -start
                    continue
            got = self._read(start)
            if got is None:
                pos = start + 1
                continue
            return start, got[0], got[1]
        return None

    def _first_reading_in_run(self, start: int) -> int:
        """In the run of ``[`` (and the ``{`` closing it) from ``start``, the outermost position whose
        value reads; ``-(position after the innermost)`` when none does.

        An array whose first element does not read does not read either, so the run is read from
        its innermost bracket outwards, and only until the first that fails.
        """
        text = self.text
        run_end = _OPEN_RUN.match(text, start).end()  # type: ignore[union-attr]  # _START saw a [ at start
        if run_end < len(text) and text[run_end] == "{":
            inner = run_end
            if not _START.match(text, inner):
                return -(inner + 1)  # a { not followed by a key fails on its next character
        else:
            inner = text.rfind("[", start, run_end)
            if inner == start:
                return start  # a single [: read as it is
            if run_end >= len(text) or text[run_end] not in _VALUE_AFTER_BRACKET:
                return -(inner + 1)  # the innermost fails on its next character
        if self._read(inner) is None:
            return -(inner + 1)
        outer = inner
        while outer > start:
            before = text.rfind("[", start, outer)
            if self._read(before) is None:
                return outer
            outer = before
        return start

    def _read(self, start: int) -> tuple[Any, int] | None:
        """The value at ``start`` and where it ends (``None``: not JSON, too deep, or past the bound)."""
        if start in self._memo:
            return self._memo[start]
        if self.cut_at is not None:
            return None
        if self.work > self.budget:
            self.cut_at = start
            return None
        self.reads += 1
        got: tuple[Any, int] | None
        try:
            got = _JSON.raw_decode(self._doc, start)
            self.work += got[1] - start
        except json.JSONDecodeError as exc:
            got = None
            self.work += exc.pos - start + 1
        except RepeatedKey as exc:
            got = None
            self.work += len(self.text) - start  # how far it read is not said
            self.repeated[start] = exc.key
        except (ValueError, RecursionError) as exc:  # too deep, or a number past Python's digit limit
            got = None
            self.work += len(self.text) - start  # how far it read is not said
            self.limits[start] = _limit(exc)
        self._memo[start] = got
        return got
