"""The values a reply's claim states (amounts, clock times, versions, counts) and whether a conversation holds them.

Pure and deterministic; read by :mod:`.claims` (the rules are in its docstring).
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence, Set
from functools import lru_cache
from typing import Any

__all__ = ["MONEY", "HeldValues", "amount", "minutes", "stated_counts", "stated_values", "supported"]

MONEY = re.compile(r"[$€£]\s?(?P<n>\d[\d,]*(?:\.\d+)?)")
_CLOCK = re.compile(r"(?<![\d:.])(?P<h>[01]?\d|2[0-3])(?::(?P<m>[0-5]\d)(?::\d\d)?)?\s?(?P<ap>[ap]\.?m\.?)?"
                    r"(?![\w:])", re.I)
_DIGIT = re.compile(r"\d")
_VERSION = re.compile(r"\bv\d+(?:\.\d+)+\b", re.I)
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
#: a number standing on its own (a quantity, a price): not a part of a date, an id or a time (``2025-02-03``,
#: ``tx_8812``)
_OPERAND = re.compile(r"(?<![\w.])(?<!\w-)\d[\d,]*(?:\.\d+)?(?![\w-]|[.:]\d)")
#: number words a count may be written with (English, Spanish)
_NUMBER_WORDS = {w: i for words in ("_ _ two three four five six seven eight nine ten eleven twelve",
                                    "_ _ dos tres cuatro cinco seis siete ocho nueve diez")
                 for i, w in enumerate(words.split()) if w != "_"}
#: each number word as a whole word (searched only where the word's letters are in the text at all)
_WHOLE_WORD = {w: re.compile(rf"\b{w}\b") for w in _NUMBER_WORDS}
_SPANS = r"(?:second|minute|hour|day|night|week|month|year|segundo|minuto|hora|d[ií]a|noche|semana|mes|año)(?:e?s)?\b"
#: a count of things a sentence states: a number (not one of a range) before a plural noun, up to two words
#: between; not a span of time (``48 hours``, ``three business days``: a rule's terms)
_COUNT = re.compile(r"(?<![\d.,–-])(?<!\bto )(?<!\ba )(?<!\by )\b(?P<n>\d{1,3}|" + "|".join(_NUMBER_WORDS) +
                    r")\s+(?![\d–-]|to\b|a\b|y\b)(?:[^\W\d_]+\s+){0,2}?(?!" + _SPANS + r")[^\W\d_]{2,}s\b"
                    r"(?!\s+" + _SPANS + ")", re.I)


def amount(text: str) -> float:
    """An amount as written (``1,204.50``) as a number."""
    return float(text.replace(",", ""))


#: a value followed by this is a rate (``$50 per passenger``, ``2 bags per person``): a rule's term, not a result
_RATE = re.compile(r"\s*(?:per|por|cada|pro)\b", re.I)


def stated_values(sentence: str, counts: bool = False) -> list[tuple[str, str, float | str]]:
    """Values a sentence states: ``(kind, as written, normalised)`` for amounts of money, clock times and
    versions, and with ``counts`` a count of things (``three refills``, ``5 unidades``: kind ``count``).
    An amount or a count followed by ``per`` (a rate: ``$50 per passenger``) is a rule's term, not stated.
    The counts come first (:func:`stated_counts`), then the rest in the sentence's order of kinds.
    """
    out = stated_counts(sentence) if counts else []
    if _DIGIT.search(sentence) is None:  # an amount, a clock time and a version each hold a digit
        return out
    for m in MONEY.finditer(sentence):
        if not _RATE.match(sentence, m.end()):
            out.append(("amount", m.group(), amount(m.group("n"))))
    for m in _CLOCK.finditer(sentence):
        if m.group("m") is None and m.group("ap") is None:
            continue  # a bare number is no time
        out.append(("time", m.group(), minutes(m)))
    for m in _VERSION.finditer(sentence):
        out.append(("version", m.group(), m.group().lower().lstrip("v")))
    return out


def stated_counts(sentence: str) -> list[tuple[str, str, float | str]]:
    """The counts of things a sentence states (:func:`stated_values`' ``count`` values, alone)."""
    out: list[tuple[str, str, float | str]] = []
    bare = MONEY.sub(" ", sentence)
    for m in _COUNT.finditer(bare):
        n = m.group("n").lower()
        if not _RATE.match(bare, m.end()):
            out.append(("count", m.group(), float(_NUMBER_WORDS.get(n) or int(n))))
    return out


def minutes(m: re.Match[str]) -> float:
    """A clock time matched by ``_CLOCK`` in minutes after midnight (``7 p.m.`` is 1140)."""
    hour, minute = int(m.group("h")), int(m.group("m") or 0)
    half = (m.group("ap") or "").lower().replace(".", "")
    if half == "pm" and hour < 12:
        hour += 12
    elif half == "am" and hour == 12:
        hour = 0
    return float(hour * 60 + minute)


def supported(kind: str, value: float | str, numbers: Sequence[float], operands: Sequence[float],
              counts: Set[float], longest: float, stated: Sequence[float] = ()) -> bool:
    """An amount or a count some result (or the conversation) holds.

    An amount: one of ``numbers``, a multiple (2-9) of one of the ``operands`` (numbers standing on
    their own, not parts of dates or ids), a sum of two or three of them or a difference of two; or
    such a sum or difference of other amounts the reply states (``stated``).  A count: one of
    ``counts``, or at most ``longest`` (the longest list a result holds: the count of those that match).
    """
    assert isinstance(value, float)
    if kind == "count":
        return value in counts or value <= longest
    if any(abs(value - n) < 0.005 for n in numbers):
        return True
    others = [n for n in stated if abs(n - value) >= 0.005]
    if any(abs(value - (a + b)) < 0.005 or abs(value - abs(a - b)) < 0.005
           or any(abs(value - (a + b + c)) < 0.005 for c in others[j + 1:])
           for i, a in enumerate(others) for j, b in enumerate(others) if j > i):
        return True
    if not math.isfinite(value):  # an infinity is near no multiple and no sum
        return False
    few = [n for n in operands if n > 0][:40]
    order = sorted(range(len(few)), key=few.__getitem__)
    keys = [few[k] for k in order]
    # the window around the amount sought: 0.005 and far more than the rounding of two additions
    margin = 0.006 + 1e-9 * (abs(value) + 3 * max(keys, default=0.0))
    for i, a in enumerate(few):
        if any(abs(value - a * k) < 0.005 for k in range(2, 10)):
            return True
        # b after a with value = a + b, or value = |a - b|
        if (_completes(keys, order, few, value - a, margin, i, lambda b: abs(value - (a + b)) < 0.005)  # noqa: B023
                or _completes(keys, order, few, a - value, margin, i, lambda b: abs(value - abs(a - b)) < 0.005)  # noqa: B023
                or _completes(keys, order, few, a + value, margin, i, lambda b: abs(value - abs(a - b)) < 0.005)):  # noqa: B023
            return True
        for j in range(i + 1, len(few)):  # c after b with value = a + b + c
            part = a + few[j]
            sought = value - part
            lo = bisect.bisect_left(keys, sought - margin)
            if lo < len(keys) and keys[lo] <= sought + margin and _completes(
                    keys, order, few, sought, margin, j, lambda c: abs(value - (part + c)) < 0.005):  # noqa: B023
                return True
    return False


def _completes(keys: Sequence[float], order: Sequence[int], amounts: Sequence[float], sought: float, margin: float,
               after: int, ok: Callable[[float], bool]) -> bool:
    """Some amount at a position after ``after``, within ``margin`` of ``sought`` (``keys``: the amounts
    sorted, ``order``: their positions), for which ``ok`` holds: the sum or difference sought is looked
    up in the sorted amounts instead of each amount being tried (linear in the amounts for a pair,
    quadratic for three, not cubic); each candidate is compared exactly as ``abs(value - x) < 0.005``.
    """
    lo = bisect.bisect_left(keys, sought - margin)
    hi = bisect.bisect_right(keys, sought + margin)
    return any(k > after and ok(amounts[k]) for k in order[lo:hi])


@lru_cache(maxsize=4096)
def _result_lengths(result: str) -> frozenset[float]:
    """The lengths of the lists one call's result holds (JSON), none when it is not JSON."""
    out: set[float] = set()

    def walk(v: Any) -> None:
        if isinstance(v, list):
            out.add(float(len(v)))
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    try:
        walk(json.loads(result))
    except ValueError:
        pass
    return frozenset(out)


def _list_lengths(results: Iterable[str | None]) -> set[float]:
    """The lengths of the lists the calls' results hold (a count the reply states may be one: ``two meetings``)."""
    out: set[float] = set()
    for result in results:
        out |= _result_lengths(result or "")
    return out


@lru_cache(maxsize=4096)  # a trajectory's states share their earlier messages: each is read once
def _piece_numbers(piece: str) -> tuple[tuple[float, ...], tuple[float, ...], frozenset[float]]:
    """``(every number, the numbers standing on their own, the number words' values)`` of one piece of
    the conversation (a message, a call's arguments and result), in the piece's order.
    """
    numbers = tuple(amount(n) for n in _NUMBER.findall(piece))
    operands = tuple(abs(amount(n)) for n in _OPERAND.findall(piece))
    words = frozenset(float(i) for w, i in _NUMBER_WORDS.items() if w in piece and _WHOLE_WORD[w].search(piece))
    return numbers, operands, words


@lru_cache(maxsize=4096)
def _piece_times(piece: str) -> frozenset[float]:
    """The clock times one piece of the conversation holds, in minutes (``2025-04-02T08:10Z`` holds 08:10)."""
    iso = re.sub(r"(?<=\d)t(?=\d\d:\d\d)|(?<=:\d\d)z\b", " ", piece)
    return frozenset(minutes(m) for m in _CLOCK.finditer(iso) if m.group("m") is not None or m.group("ap"))


class HeldValues:
    """The values a conversation holds, read once from its text and only when a claim states a value.

    The conversation is read piece by piece (each message, each call's arguments and result): the
    states of one trajectory share their earlier messages, and each piece's values are read once
    (bounded caches of 4,096 pieces).  No number, time or word spans two pieces.

    Args:
        pieces: the conversation's messages and every call's arguments and result, each normalised
            and case-folded, in order.
        results: the calls' results (JSON lists are counted: ``two meetings`` may be two of a list).
        reply: the reply's text (an amount may be a total of the reply's own amounts).
    """

    def __init__(self, pieces: Sequence[str], results: Sequence[str | None], reply: str) -> None:
        self.pieces = pieces
        self.haystack = " ".join(pieces)
        self.results = results
        self.stated = [amount(m.group("n")) for m in MONEY.finditer(reply)]
        self._numbers: tuple[list[float], list[float], set[float], float] | None = None
        self._times: set[float] | None = None

    def numbers(self) -> tuple[list[float], list[float], set[float], float]:
        """``(every number, the numbers standing on their own, the counts, the longest list's length)``."""
        if self._numbers is None:
            numbers: list[float] = []
            operands: list[float] = []
            words: set[float] = set()
            for piece in self.pieces:
                n, o, w = _piece_numbers(piece)
                numbers += n
                operands += o
                words |= w
            lengths = _list_lengths(self.results)
            counts = {n for n in operands if n == int(n)} | lengths | words
            self._numbers = numbers, operands, counts, max(lengths, default=0.0)
        return self._numbers

    def times(self) -> set[float]:
        """The clock times the conversation holds, in minutes (``2025-04-02T08:10Z`` holds 08:10)."""
        if self._times is None:
            self._times = set().union(*map(_piece_times, self.pieces))
        return self._times

    def holds(self, kind: str, value: float | str) -> bool:
        """Whether the conversation backs one stated value (:func:`supported`)."""
        if kind == "version":
            return str(value) in self.haystack
        if kind == "time":
            return value in self.times()
        numbers, operands, counts, longest = self.numbers()
        return supported(kind, value, numbers, operands, counts, longest, self.stated)
