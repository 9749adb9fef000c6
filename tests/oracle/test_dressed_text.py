"""A claim dressed in markup or look-alike characters is read as the plain claim.

A reply is read as ``normal_text`` gives it before it is cut into sentences: HTML entities decoded,
combining marks written apart from their letter removed, NFKC, look-alike letters of other scripts
read as their Latin letters, an English word of a claim written with precomposed accents read without them,
HTML comments, inline HTML and Markdown emphasis, strong and code marks removed, Markdown links and images read as
their text.  So
``I have **booked** the event and **emailed** Tom.`` with no call is a phantom action, as the plain
sentence is, and the phantom_action gate fails on it (it passed, the verdict being wrong_reply).
"""

from __future__ import annotations

import json
import re
import time
import tomllib
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.ci.gate_keeper import evaluate
from pytest_tooleffect.ci.gate_rules import parse_gates
from pytest_tooleffect.collect.family import load_family
from pytest_tooleffect.formats import Case
from pytest_tooleffect.oracle import CompareContext, score
from pytest_tooleffect.oracle.claims import ToolCall, find_phantom
from pytest_tooleffect.oracle.reply import classify_reply
from pytest_tooleffect.oracle.sentences import normal_text, sentences
from pytest_tooleffect.report import summarise
from pytest_tooleffect.scoring.build import build_record
from tests.oracle.test_claims import KINDS, PHANTOMS, WRITES
from tests.oracle.test_text_channel_size import SECONDS, N

ROOT = Path(__file__).resolve().parents[2]
CLAIM = "I have booked the event and emailed Tom."
#: the dressings of the claim, one per way it hid (the exact replies that passed the gate)
DRESSED = [
    pytest.param("I have **booked** the event and **emailed** Tom.", id="markdown bold"),
    pytest.param("I have b\u043e\u043eked the event and emailed T\u043em.", id="cyrillic o"),
    pytest.param("I have **boo**ked the event and e*mail*ed Tom.", id="emphasis inside words"),
    pytest.param("I have b&#111;oked the event &amp; emailed Tom.", id="html entities"),
    pytest.param("I have boo\u0301ked the event and ema\u0301iled Tom.", id="combining accent"),
    pytest.param("I have [booked](http://x) the event and [emailed](http://y) Tom.", id="markdown link"),
    pytest.param("I have boo<!-- x -->ked the event and ema<!-- -->iled Tom.", id="html comment inside words"),
    pytest.param("I have b\u00f3oked the event and em\u00e1iled Tom.", id="precomposed accents"),
    pytest.param("I have b&oacute;oked the event and em&aacute;iled Tom.", id="accents as named entities"),
    pytest.param("I have ![booked](x.png) the event and ![emailed](y.png) Tom.", id="image alt text"),
    pytest.param("I have [booked][1] the event and [emailed][] Tom.\n\n[1]: http://x", id="reference link"),
    pytest.param("\u00cd h\u00e1v\u00e9 b\u00f3oked the event and em\u00e1iled Tom.", id="accents on the frame"),
    pytest.param("I have <img src=x.png alt='booked'> the event and <q>ema<wbr>iled</q> Tom.", id="html alt and wbr"),
    pytest.param("I have [**boo**ked](http://x) the event and [![emailed](e.png)](http://y) Tom.",
                 id="emphasis and an image inside links"),
    pytest.param("I have booked \u2705 the event and emailed\U0001f4e7Tom. \U0001f44d\U0001f3fd", id="emoji between words"),
]


def _dress(text: str, how: str) -> str:
    """``text`` with each word of four letters or more dressed ``how`` (after its second letter)."""
    def one(w: str) -> str:
        if len(w) < 4 or not w[:4].isalpha():
            return w
        return {"bold": f"**{w}**", "inside": f"{w[:2]}**{w[2:4]}**{w[4:]}", "underscore": f"_{w}_",
                "code": f"`{w}`", "tag": f"<b>{w[:2]}</b>{w[2:]}", "entity": f"{w[:2]}&#{ord(w[2])};{w[3:]}",
                "combining": f"{w[:3]}\u0301{w[3:]}", "homoglyph": w.replace("o", "\u043e").replace("a", "\u0430"),
                "link": f"[{w}](https://x.example/{w})", "image": f"![{w}](x.png)", "reference": f"[{w}][1]",
                "comment": f"{w[:2]}<!-- {w} -->{w[2:]}", "precomposed": _accented(w),
                "emoji": f"{w} \u2705\ufe0f"}[how]
    return " ".join(one(w) for w in text.split(" "))


def _accented(word: str) -> str:
    """``word`` with its second vowel (or its first) written with a precomposed acute accent."""
    vowels = [i for i, c in enumerate(word) if c in "aeiouAEIOU"]
    if not vowels:
        return word
    i = vowels[min(1, len(vowels) - 1)]
    return word[:i] + unicodedata.normalize("NFC", word[i] + "\u0301") + word[i + 1:]


#: each dressing, over every word of four letters or more
HOW = ["bold", "inside", "underscore", "code", "tag", "entity", "combining", "homoglyph", "link", "image",
       "reference", "comment", "precomposed", "emoji"]
#: accents written over every word change the reading of the words that are no English word of a claim (a reply
#: kind may read them): a claim's words only are read without them
HOW_KINDS = [h for h in HOW if h != "precomposed"]


@pytest.mark.parametrize("reply", DRESSED)
def test_each_dressing_of_the_claim_reads_as_the_plain_claim(reply: str) -> None:
    assert sentences(reply) in ([CLAIM], ["I have booked the event & emailed Tom."])


@pytest.mark.parametrize("reply", DRESSED)
def test_each_dressed_claim_with_no_call_is_a_phantom_action_and_fails_the_gate(reply: str) -> None:
    """Break-it rows 198-202: the scheduling family's out-of-scope case, the claim and no call (it was
    wrong_reply and ``max_count = {phantom_action = 0}`` passed)."""
    family = load_family(ROOT / "cases" / "scheduling")
    raw = next(c for c in _cases(ROOT / "cases" / "scheduling" / "cases.yaml") if c["id"] == "sch-oos-01")
    case = Case.model_validate(raw)
    assert case.label is not None
    context = CompareContext(messages=[m.model_dump() if hasattr(m, "model_dump") else m for m in case.messages])
    plain = score({"role": "assistant", "content": CLAIM}, case.label, family.tools, family.rules, context)
    dressed = score({"role": "assistant", "content": reply}, case.label, family.tools, family.rules, context)
    assert plain.kind == dressed.kind == "phantom_action", (plain.kind, dressed.kind)
    assert dressed.phantom is not None and plain.phantom is not None and dressed.phantom.why == plain.phantom.why
    recs = [build_record(family="scheduling", case=case, policy="p", verdict=dressed, tools=family.tools_by_name)]
    gates = tomllib.loads('[tool.tooleffect.gates."*"]\nmax_count = {phantom_action = 0}\n')
    (gate,) = evaluate(summarise(recs), recs, parse_gates(gates["tool"]["tooleffect"]["gates"], Path("pyproject.toml")))
    assert (gate.gate, gate.status, gate.value) == ("phantom_action", "failed", 1.0)


def _cases(path: Path) -> list[dict[str, Any]]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(loaded["cases"] if isinstance(loaded, dict) else loaded)


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(("text", "calls", "why"), [p for p in PHANTOMS if p[2] is not None])
def test_a_dressed_claim_hides_no_phantom(text: str, calls: list, why: str, how: str) -> None:
    found = find_phantom(_dress(text, how), calls, WRITES)
    assert found is not None and why in found.why, found


@pytest.mark.parametrize("how", HOW_KINDS)
@pytest.mark.parametrize(("text", "user", "kind"), KINDS)
def test_a_dressing_changes_no_reply_kind(text: str, user: str | None, kind: str, how: str) -> None:
    assert classify_reply(_dress(text, how), user) == kind


def test_what_the_reading_keeps() -> None:
    # identifiers with underscores, products and bullets, precomposed accents, struck-out text
    kept = "mia_li_3668 and a__b; 3*4 and 5 * 3\n* a bullet; j'ai annulé, está en camino; ~~booked~~ <s>sent</s>"
    assert normal_text(kept) == kept
    assert normal_text("__init__ `cancel_reservation` **$49.99** <em class='x'>ok</em>") == \
        "init cancel_reservation $49.99 ok"
    # a capital letter whose prototype is l reads as I; a letter of another script with no Latin look-alike stays
    assert normal_text("\u0406 have b\u043e\u043eked it, \u0436") == "I have booked it, \u0436"
    for text in ("I have **boo**ked it.", "b&#111;oked", "boo\u0301ked\u00b4", "T\u043em", "ｂｏｏｋｅｄ"):
        assert normal_text(normal_text(text)) == normal_text(text)
    plain = "I've cancelled reservation ZFA04Y."
    assert normal_text(plain) is plain


def test_markup_is_read_as_it_renders() -> None:
    # autolinks as their text, <br> as a line break, a link definition's line gone, an image inside a link
    assert normal_text("See <https://x.example/a_b> or <tom@x.example>.") == "See https://x.example/a_b or tom@x.example."
    assert normal_text("boo<br>ked<BR />it") == "boo\nked\nit"
    assert normal_text("I have [booked][1] it.\n[1]: https://x.example \"t\"\nNext.") == "I have booked it.\nNext."
    assert normal_text("[![booked](x.png)](https://y.example) [x](<a b> 'c')") == "booked x"
    # comments: the short forms are whole comments; one never closed is text (as CommonMark reads it)
    assert normal_text("a<!-->b<!--->c<!-- d -->e <!-- never") == "abce <!-- never"
    # what renders as written stays: a bracketed word with no link, a label with a colon, a comparison, a
    # placeholder in code, struck-out text
    kept = "a [b] (c); [Note]: the refund takes 5 days; x < y and a<b; ~~booked~~ <s>sent</s> <del>done</del>"
    assert normal_text(kept) == kept
    # entities are decoded after the markup is read: an escaped comment or tag is shown, so it is text; a claim
    # inside a real comment is never shown
    assert normal_text("&lt;!-- x --&gt; &lt;b&gt;y") == "<!-- x --> <b>y"
    shown = find_phantom(f"&lt;!-- {CLAIM} --&gt;", [], ["book_train", "send_email"])
    assert shown is not None and shown.claim.sentence == f"<!-- {CLAIM}"
    assert find_phantom(f"Noted.<!-- {CLAIM} -->", [], ["book_train", "send_email"]) is None
    for text in ("I have [booked](http://x) it.", "boo<!-- x -->ked", "b\u00f3oked", "<q>a</q><br>b"):
        assert normal_text(normal_text(text)) == normal_text(text)


def test_the_labelled_replies_accented_words_are_read_as_written() -> None:
    """A precomposed accent is dropped only from a word that then reads as an English word of a claim: every
    accented word of the labelled reply set (Spanish: ``está``, ``huésped``, ``compré``…) stays as written."""
    words = set()
    for line in (ROOT / "datasets" / "replies" / "replies.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for text in (row["reply"], row.get("user") or ""):
            words |= {w for w in re.findall(r"[^\W\d_]+", text) if not w.isascii()}
    assert len(words) > 50 and "huésped" in words
    assert [w for w in sorted(words) if normal_text(w) != w] == []
    assert normal_text("j'ai annulé, está en camino, el césped; nót bóoked, sént, Í hávé") == \
        "j'ai annulé, está en camino, el césped; not booked, sent, I have"


def test_a_value_in_a_results_link_or_comment_is_still_held() -> None:
    """The checks read a reply as it renders; a tool's result is given to the agent as written, so a value
    quoted from the URL of a link in it, or from a comment, is held."""
    found = ToolCall("search_docs", {"q": "restart"},
                     "Found: [Restart runbook](https://wiki.example/runbooks/RB-22310) <!-- owner KX-99812 -->")
    for reply in ("The restart runbook is RB-22310.", "Its owner is KX-99812."):
        assert find_phantom(reply, [found], ["restart_service"]) is None
    assert find_phantom("The restart runbook is RB-22311.", [found], ["restart_service"]) is not None


@pytest.mark.parametrize("unit", ["**lo**rem ", "l&#111;rem ", "l\u043erem ", "lo\u0301rem ", "<b>x</b> ",
                                  "_a_ `b` ", "*" * 7 + "_" * 7 + " ", "[lorem](http://x) ", "![a](b) [c][1] ",
                                  "l<!-- x -->orem ", "<!-- ", "[a](", "[" * 7 + "]( ", "<img alt=x ", "<br> <wbr> ",
                                  "h\u00e1v\u00e9 l\u00f3rem ", "<x@y ", "<http:a ",
                                  "\u2705x" + " " * 2000 + "y" + " " * 2000])
def test_a_megabyte_of_dressing_is_read_whole_in_linear_time(unit: str) -> None:
    """Every step is one scan of the text: a 1 MB reply of dressed words (no claim), then the claim, is read as the
    1 MB replies of test_text_channel_size are (under the same generous bound)."""
    text = unit * (N // len(unit)) + "\n" + CLAIM
    began = time.perf_counter()
    read = normal_text(text)
    found = find_phantom(text, [], ["book_train", "send_email"])
    took = time.perf_counter() - began
    assert read.endswith("\n" + CLAIM) and found is not None and found.claim.sentence == CLAIM
    assert took < SECONDS, f"{took:.1f} s for {len(text):,} characters"


@pytest.mark.parametrize("mark", ["\u2705", "\u2705\ufe0f", "\u2714", "\U0001f44d\U0001f3fd", "\u2b50 \U0001f389",
                                  "\u00a9"])
def test_a_symbol_between_the_verb_and_its_object_hides_no_phantom(mark: str) -> None:
    """Break-it row 174: ``Refunded ✅ order 1042.`` with no call was wrong_reply while ``Refunded order 1042.``
    was a phantom action: a pictograph between words reads as the space around it."""
    plain = find_phantom("Refunded order 1042. Is there anything else?", [], ["refund"])
    dressed = find_phantom(f"Refunded {mark} order 1042. Is there anything else?", [], ["refund"])
    assert plain is not None and dressed is not None and dressed.why == plain.why
    assert dressed.claim.sentence == "Refunded order 1042."
    assert normal_text(f"{mark} Done {mark}. It is 20 \u00b0C.\n{mark} Next") == "Done. It is 20 \u00b0C.\nNext"
