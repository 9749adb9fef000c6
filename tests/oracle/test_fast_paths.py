"""The reply checks' fast paths give what the plain forms give: folded patterns, amounts looked up sorted."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_tooleffect.oracle import claim_values, claims, reply
from pytest_tooleffect.oracle.sentences import Folded, sentences

REPO = Path(__file__).resolve().parents[2]

#: every pattern the reply fallback and the claim check search through :class:`Folded`
FOLDED = {"ASKING": reply.ASKING_FOLDED, "_COURTESY": reply._COURTESY_FOLDED, "_REFUSING": reply._REFUSING_FOLDED,
          "_ACTION": claims._ACTION_FOLDED, "_DONE": claims._DONE_FOLDED, "_READ": claims._READ_FOLDED,
          "_EXAMPLE": claims._EXAMPLE_FOLDED, "_NEGATION": claims._NEGATION_FOLDED}


def _texts() -> list[str]:
    """The shipped τ-airline cases' texts (every message), each also upper-cased, swapped and title-cased,
    and a few with characters an ASCII letter folds to or from."""
    out: list[str] = []
    for line in (REPO / "cases" / "tau-airline" / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        for m in case.get("messages", []):
            if isinstance(m.get("content"), str) and m["content"].strip():
                out.append(m["content"])
    out = out[:400]
    out += [t.upper() for t in out[:100]] + [t.swapcase() for t in out[:100]] + [t.title() for t in out[:100]]
    out += ["I CANNOT DO THAT, I'M AFRAID.", "I ſent it.", "I've \u212aept it.", "No puedo hacerlo, lo siento.",
            "İ'VE CANCELLED IT.", "Ich habe es storniert.", "Refill Requested!", "We've Booked It. Anything else?",
            "YOU'RE ALL SET. I Checked The Flight.", "According To Our Records, it's all done.", "Está en camino."]
    return out


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_a_folded_pattern_matches_where_its_pattern_does(name: str) -> None:
    folded = FOLDED[name]
    seen = 0
    for text in _texts():
        for piece in (text, *sentences(text)):
            want = [(m.span(), [m.span(g) for g in range(1, (m.re.groups or 0) + 1)])
                    for m in folded.pattern.finditer(piece)]
            got = [(m.span(), [m.span(g) for g in range(1, (m.re.groups or 0) + 1)]) for m in folded.finditer(piece)]
            assert got == want, (name, piece)
            first = folded.search(piece)
            assert (first.span() if first else None) == (want[0][0] if want else None)
            seen += bool(want)
    assert seen, f"{name} matched nothing: the comparison says nothing"


@pytest.mark.parametrize("pattern", [
    re.compile("cannot"),  # not case-insensitive
    re.compile(r"\b[A-Z]\w+", re.I),  # an upper-case letter: a case-sensitive search would miss "a"
    re.compile(r"\x41b", re.I),  # an escape naming a letter
    re.compile(r"(a)\1", re.I),  # a group's text matched again
    re.compile(r"(?P<x>a)(?P=x)", re.I),
    re.compile(r"(?-i:a)b", re.I),  # an inline flag
    re.compile("\u017fent", re.I),  # long s: "s" folds to it
])
def test_a_pattern_that_cannot_be_folded_is_refused(pattern: re.Pattern[str]) -> None:
    with pytest.raises(ValueError, match="cannot be folded"):
        Folded(pattern)


def _supported_by_loops(value: float, numbers: Sequence[float], stated: Sequence[float]) -> bool:
    """The amount rule of ``claim_values.supported`` written as loops over every pair and triple (the
    numbers serve as the operands too)."""
    if any(abs(value - n) < 0.005 for n in numbers):
        return True
    others = [n for n in stated if abs(n - value) >= 0.005]
    for i, a in enumerate(others):
        for j in range(i + 1, len(others)):
            b = others[j]
            if abs(value - (a + b)) < 0.005 or abs(value - abs(a - b)) < 0.005:
                return True
            if any(abs(value - (a + b + c)) < 0.005 for c in others[j + 1:]):
                return True
    few = [n for n in numbers if n > 0][:40]
    for i, a in enumerate(few):
        if any(abs(value - a * k) < 0.005 for k in range(2, 10)):
            return True
        for j in range(i + 1, len(few)):
            b = few[j]
            if abs(value - (a + b)) < 0.005 or abs(value - abs(a - b)) < 0.005:
                return True
            if any(abs(value - (a + b + c)) < 0.005 for c in few[j + 1:]):
                return True
    return False


def test_amounts_looked_up_sorted_support_what_every_pair_and_triple_supports() -> None:
    rng = random.Random(40)
    supported = 0
    for _ in range(3000):
        scale = rng.choice([10, 1000, 1e6, 1e15])
        numbers = [round(rng.random() * scale * rng.choice([1, -1, 1, 1]), rng.choice([0, 2]))
                   for _ in range(rng.choice([0, 2, 5, 30, 50]))]
        if rng.random() < 0.05:
            numbers.append(math.inf)
        few = [n for n in numbers if n > 0][:40]
        picks = rng.sample(few, min(len(few), rng.choice([1, 2, 3])))
        value = rng.choice([sum(picks), abs(picks[0] - picks[-1]) if picks else 0.0,
                            (picks[0] if picks else 1.0) * rng.randrange(2, 10), rng.random() * scale])
        value += rng.choice([0.0, 0.0049, -0.0049, 0.005, -0.005, 0.02])
        stated = [round(rng.random() * scale, 2) for _ in range(rng.choice([0, 0, 3]))]
        want = _supported_by_loops(value, numbers, stated)
        assert claim_values.supported("amount", value, numbers, numbers, set(), 0.0, stated) is want, (value, numbers, stated)
        supported += want
    assert 300 < supported < 2700  # both answers well represented
    assert claim_values.supported("amount", math.inf, [1.0, math.inf], [1.0, math.inf], set(), 0.0) is False


def test_number_words_held_are_those_a_whole_word_search_finds() -> None:
    """A conversation's number words (its counts) are looked up by the word's letters first, then as a
    whole word: the same words as searching every word as a whole word."""
    texts = [t.lower() for t in _texts()] + [
        "often tentative todos attention", "ten, dos; tres.", "diez_ seven1 2two", "eleven\u00f1 nueve", "three-four",
        "(twelve)", "ocho\nseis", "sevenths eighty", "\u00e9five five\u00e9", "cinco", ""]
    seen: set[float] = set()
    for text in texts:
        held = claim_values.HeldValues([text], [], "").numbers()[2]
        want = {float(i) for w, i in claim_values._NUMBER_WORDS.items() if re.search(rf"\b{w}\b", text)}
        operands = {abs(claim_values.amount(n)) for n in claim_values._OPERAND.findall(text)}
        assert held == want | {n for n in operands if n == int(n)}, text
        seen |= want
    assert {3.0, 10.0, 2.0, 4.0, 12.0, 8.0, 6.0, 5.0} <= seen  # words found, and words inside others left


def _conversations() -> list[tuple[list[str], list[claims.ToolCall]]]:
    """Every shipped family's cases as the claim check reads them: the messages' texts and the calls."""
    out = []
    for path in sorted((REPO / "cases").glob("*/cases.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            messages = json.loads(line).get("messages", [])
            known = [m["content"] for m in messages if isinstance(m.get("content"), str) and m.get("role") != "tool"]
            out.append((known, claims.conversation_calls(messages)))
    return out


def test_a_conversation_read_piece_by_piece_holds_what_it_holds_read_whole() -> None:
    """The values held are read from each message and each call on its own (a trajectory's states share
    their earlier messages): the same numbers in the same order, counts, times and text as the whole
    conversation read as one text."""
    seen = 0
    for known, calls in _conversations():
        pieces = [claims._piece(t) for t in known] + [claims._piece(c.text()) for c in calls]
        whole = claims.normal_text(" ".join(known + [c.text() for c in calls])).casefold()
        results = [c.result for c in calls]
        by_piece, at_once = claim_values.HeldValues(pieces, results, ""), claim_values.HeldValues([whole], results, "")
        assert by_piece.haystack == whole
        assert by_piece.numbers() == at_once.numbers()
        assert by_piece.times() == at_once.times()
        seen += bool(by_piece.numbers()[0])
    assert seen > 200  # conversations that hold numbers were compared


def _stated_by_every_pattern(sentence: str, counts: bool) -> list[tuple[str, str, float | str]]:
    """:func:`claim_values.stated_values` as written before its fast paths: every pattern searched."""
    cv = claim_values
    out: list[tuple[str, str, float | str]] = []
    if counts:
        bare = cv.MONEY.sub(" ", sentence)
        for m in cv._COUNT.finditer(bare):
            n = m.group("n").lower()
            if not cv._RATE.match(bare, m.end()):
                out.append(("count", m.group(), float(cv._NUMBER_WORDS.get(n) or int(n))))
    for m in cv.MONEY.finditer(sentence):
        if not cv._RATE.match(sentence, m.end()):
            out.append(("amount", m.group(), cv.amount(m.group("n"))))
    for m in cv._CLOCK.finditer(sentence):
        if m.group("m") is not None or m.group("ap") is not None:
            out.append(("time", m.group(), cv.minutes(m)))
    for m in cv._VERSION.finditer(sentence):
        out.append(("version", m.group(), m.group().lower().lstrip("v")))
    return out


def test_stated_values_read_only_where_a_digit_is_give_what_every_pattern_gives() -> None:
    """A sentence without a digit states no amount, time or version (each pattern needs one); counts are
    read apart (:func:`claim_values.stated_counts`) and come first, as before."""
    texts = [s for t in _texts() for s in sentences(t)] + [
        "It costs $50 per passenger.", "Your flight leaves at 8:10 am.", "Upgraded to v2.3.1 today.",
        "I booked three flights and two bags for \u0661\u0662 people.", "Es \u0663 pm.", "No digits, five seats."]
    digitless = 0
    for sentence in texts:
        for counts in (False, True):
            assert claim_values.stated_values(sentence, counts) == _stated_by_every_pattern(sentence, counts), sentence
        assert claim_values.stated_counts(sentence) == _stated_by_every_pattern(sentence, True)[
            :len(claim_values.stated_counts(sentence))]
        digitless += not re.search(r"\d", sentence)
    assert digitless > 100
