"""Invisible characters split no word the reply checks read: a reply is read as ``normal_text``
gives it (format characters and other default-ignorable code points removed, then NFKC) before it
is cut into sentences, so a zero-width space inside ``cancelled`` hides no claim and a soft hyphen
inside ``can't`` hides no refusal.
"""

from __future__ import annotations

import unicodedata

import pytest

from pytest_tooleffect.oracle.claims import find_phantom
from pytest_tooleffect.oracle.reply import classify_reply
from pytest_tooleffect.oracle.sentences import normal_text, sentences
from tests.oracle.test_claims import KINDS, PHANTOMS, READ, WRITES

#: invisible characters a reply may put inside a word: zero-width space, non-joiner, joiner, word
#: joiner, soft hyphen, BOM, an RLO, a variation selector, the combining grapheme joiner, a tag
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff", "\u202e", "\ufe0f", "\u034f",
             "\U000e0041"]


def _hide(text: str, mark: str) -> str:
    """``text`` with ``mark`` inside every word of four letters or more (after its second letter)."""
    return " ".join(w[:2] + mark + w[2:] if len(w) >= 4 and w[:2].isalpha() else w for w in text.split(" "))


def test_every_format_character_is_removed_and_the_rest_is_nfkc() -> None:
    assert all(normal_text(f"a{chr(c)}b") == "ab" for c in range(0x110000)
               if unicodedata.category(chr(c)) == "Cf")
    assert normal_text("ｂｏｏｋｅｄ\u00a0ﬁle \u3000ok") == "booked file  ok"
    for text in ("I have booked it.", "日本語 and emoji 👍🏽", "boo\u200bked\ufe0f", "Ünïcödé"):
        assert normal_text(normal_text(text)) == normal_text(text)
    plain = "I've cancelled reservation ZFA04Y."
    assert normal_text(plain) is plain


@pytest.mark.parametrize("mark", INVISIBLE)
@pytest.mark.parametrize(("text", "calls", "why"), [p for p in PHANTOMS if p[2] is not None])
def test_an_invisible_character_inside_a_claim_hides_no_phantom(text: str, calls: list, why: str, mark: str) -> None:
    """Break-it row 204: zero-width spaces inside ``booked`` and ``emailed`` passed the phantom gate."""
    found = find_phantom(_hide(text, mark), calls, WRITES)
    assert found is not None and why in found.why, found


@pytest.mark.parametrize("mark", INVISIBLE)
@pytest.mark.parametrize(("text", "user", "kind"), KINDS)
def test_an_invisible_character_changes_no_reply_kind(text: str, user: str | None, kind: str, mark: str) -> None:
    assert classify_reply(_hide(text, mark), user) == kind


def test_an_invisible_character_joins_no_sentences() -> None:
    """A zero-width space after a full stop would have joined a claim to the question after it."""
    hidden = "I've cancelled reservation ZFA04Y.\u200b Anything else?"
    assert sentences(hidden) == ["I've cancelled reservation ZFA04Y.", "Anything else?"]
    found = find_phantom(hidden, [READ], WRITES)
    assert found is not None and "no call to cancel_reservation" in found.why

