"""``util/display.py``: text as an output shows it.

Ordinary text (ASCII or not, emoji and joiners, right-to-left scripts, tabs) is shown as it is;
every control character and escape, bidirectional override and isolate, line separator and lone
surrogate becomes a visible escape; a long text is cut and the cut said; the JSON files keep the
text whole with none of those characters raw; the test on JSON text never passes what
:func:`~pytest_tooleffect.util.display.shown_obj` would change.  ``HOSTILE`` is the catalogue
``tests/test_hostile_text.py`` feeds every output of a run.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pytest_tooleffect.util.display import LIMIT, PAGE_LIMIT, json_safe, json_shown_as_is, shown, shown_obj

MB = 1_048_576
FORGED = "### ✅ tooleffect gates: all passed"
#: the catalogue: each string is written by the model in every place it can write one
HOSTILE = {
    "csi": "\x1b[2K\x1b[1A\x1b[31mall green\x1b[0m",
    "osc-title": "\x1b]0;pwned window title\x07after",
    "osc52": "\x1b]52;c;ZWNobyBwd25lZA==\x07after",
    "c1": "\x9b2J\x9d0;title\x9c\x85next",
    "heading": f"x`\n\n{FORGED}\n\nall 412 decisions passed",
    "link": "[open the dashboard](https://evil.example/phish) <https://evil.example/auto>",
    "image": "![pixel](https://evil.example/p.png) <img src=https://evil.example/i.png>",
    "html": "<script>alert(1)</script><b onmouseover=alert(2)>bold</b>&lt;tag&gt; &#8238;",
    "table": "a | b |\n| --- | --- |\n| forged | row |",
    "rtl": "invoice\u202eexe.pdf\u202c \u2066isolated\u2069 \u2067r\u2069 \u2068f\u2069 \u202a\u202b\u202d",
    "nul": "before\x00after\x7f\x08\rcarriage",
    "separators": "line\u2028separator\u2029paragraph",
    "mb": "A" * MB,
}
#: characters no output may show raw (line breaks and tabs aside): C0, DEL, C1, bidirectional, separators
RAW = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
CUT = f"({MB:,} characters, cut)"
#: the cut's note, of a text of at least a megabyte (the megabyte alone, or a line holding it)
CUT_MB = re.compile(r"… \((1,0[4-9]\d|[2-9],\d{3}),\d{3} characters, cut\)")


def raw(text: str) -> list[str]:
    """The characters no output may show raw, each with a little of its context."""
    return [repr(text[max(m.start() - 20, 0):m.end() + 20]) for m in RAW.finditer(text)][:5]


ORDINARY = ["demo/a-read[replay]", "calendar.create_event", "Q3 review at 14:00 (Europe/Madrid) – ok? 100 %",
            "Ünïcödé · ∑ ≥ 80 % — “quotes” 日本語 العربية עברית", "emoji 👍🏽 and joiners 👩‍💻 🏳️‍🌈",
            "tab\tseparated", "[policy] `code` *stars* _under_ <b> | pipe", "A" * LIMIT]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_shown_as_it_is(text: str) -> None:
    assert shown(text) is text and shown(text, lines=True) is text
    assert shown_obj({text: [text, 1, None]}) == {text: [text, 1, None]}


@pytest.mark.parametrize(("text", "expected"), [
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
    ("a\x00b\x7f\x9bc", "a\\x00b\\x7f\\x9bc"),
    ("x\n### heading", "x\\n### heading"),
    ("cr\roverwrite", "cr\\roverwrite"),
    ("\u202egnp.exe\u202c", "\\u202egnp.exe\\u202c"),
    ("\u2066i\u2069 \u200e\u200f\u061c", "\\u2066i\\u2069 \\u200e\\u200f\\u061c"),
    ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),
    ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
])
def test_controls_and_overrides_are_visible_escapes(text: str, expected: str) -> None:
    assert shown(text) == expected
    assert shown(expected) == expected  # the escapes are text: shown again, unchanged


def test_lines_keep_their_breaks_and_nothing_else() -> None:
    assert shown("a\nb\r\nc", lines=True) == "a\nb\r\nc"
    assert shown("a\rb\x1b[1A\n\u202e", lines=True) == "a\\rb\\x1b[1A\n\\u202e"


def test_a_long_text_is_cut_and_the_cut_said() -> None:
    big = "A" * MB
    out = shown(big)
    assert len(out) <= LIMIT and out.startswith("A" * 1000) and out.endswith(f"… {CUT}")
    assert shown(out) == out  # within its bound: cut once
    escaped = shown("\x1b" * 5000)  # escapes lengthen the text: still bounded, no half escape left
    assert len(escaped) <= LIMIT and re.fullmatch(r"(\\x1b)+… \(5,000 characters, cut\)", escaped)
    assert shown(big, limit=None) is big
    assert len(shown(big, limit=PAGE_LIMIT, lines=True)) <= PAGE_LIMIT


def test_json_files_keep_the_text_whole_and_none_of_itraw() -> None:
    data = {name: text for name, text in HOSTILE.items() if name != "mb"} | {"lone": "\udc80", "\u202ekey": 1}
    text = json_safe(json.dumps(data, ensure_ascii=False))
    assert raw(text) == [] and json.loads(text) == data
    assert json_safe('{"a": "ordinary ü 👍"}') == '{"a": "ordinary ü 👍"}'


FAST_TEST_CASES = [*([o] for o in ORDINARY), {"messages": [{"content": "a\nb\r\nc", "args": '{"city": "Oslo"}'}]},
                   *([h] for h in HOSTILE.values()), ['"' * 3000], ["\\" * 1500 + '"'], ['x"' * 800], {"k" * 1500: 1},
                   ["a\rb"], ["tab\tand \\b literal"], [[1, 2] * 1000]]


@pytest.mark.parametrize("lines", [False, True])
@pytest.mark.parametrize("value", FAST_TEST_CASES, ids=range(len(FAST_TEST_CASES)))
def test_the_test_on_json_text_passes_only_what_shown_leaves_as_it_is(value: Any, lines: bool) -> None:
    text = json.dumps(value, ensure_ascii=False)
    as_is = shown_obj(value, limit=1000, lines=lines) == value
    assert json_shown_as_is(text, limit=1000, lines=lines) in ((False, True) if as_is else (False,))
    if value in ([o] for o in ORDINARY if len(o) < 1000):
        assert json_shown_as_is(text, limit=1000, lines=lines)  # the fast path is taken for ordinary text


