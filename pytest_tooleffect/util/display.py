r"""Text as an output may show it: what a model, a provider or a data file wrote is hostile input.

A tool name the model made up, its reply, its arguments and a provider's error message reach the
terminal, the Markdown job summary, JUnit XML and the HTML page.  :func:`shown` is the one
function every such place passes text through: control characters and escapes (ANSI CSI, OSC
window titles and OSC 52 clipboard writes, every C0 and C1 control, DEL, NUL), bidirectional
overrides and isolates (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), line and paragraph
separators and lone surrogates become visible escapes (``\x1b``, ``\u202e``, ``\n``), and text
longer than a bound is cut, the cut said with the original length (``… (1,048,576 characters,
cut)``).  Ordinary text, ASCII or not (tabs, emoji and joiners included), is returned as it is.
:func:`shown_obj` does the same to every string and key of a JSON value.

The JSON files (report, record log, baseline) are data, not display: they keep model text whole,
and :func:`json_safe` writes the characters above as ``\uXXXX`` escapes in the JSON text, so the
file holds none of them raw and reads back to the same values.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["LIMIT", "PAGE_LIMIT", "json_safe", "json_shown_as_is", "shown", "shown_obj"]

#: The longest text shown on one line (a terminal line, a Markdown cell or heading, a JUnit
#: message), in characters, the cut's note included.
LIMIT = 2_000
#: The longest text the HTML page shows in one place (a conversation's message, a reply), in
#: characters: far above any case the shipped families hold, far below a megabyte.
PAGE_LIMIT = 100_000

#: every character shown as an escape: C0 controls but tab, DEL, C1 controls, the bidirectional
#: marks, embeddings, overrides and isolates, the line and paragraph separators, lone surrogates
_UNSAFE_CLASS = "\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
#: the same with line breaks kept (``\n``, and ``\r`` before ``\n``): text shown over lines
_UNSAFE_LINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
                           "\u2066-\u2069\ud800-\udfff]|\r(?!\n)")
#: what JSON text written with ``ensure_ascii=False`` may hold raw of those (JSON escapes C0 itself)
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r"}
#: the same characters in JSON text written with ``ensure_ascii=False``: the rest raw (above), C0 as
#: JSON escapes (each pattern starts with its one character, which the search looks for at C speed)
_JSON_ESCAPED = re.compile(r"\\(?:u00[01][0-9a-fA-F]|[bfnr])")
_JSON_ESCAPED_LINES = re.compile(r"\\(?:u00[01][0-9a-fA-F]|[bf]|r(?!\\n))")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def shown(text: object, *, limit: int | None = LIMIT, lines: bool = False) -> str:
    r"""``text`` as an output may show it: every control, bidirectional and separator character as
    a visible escape, and at most ``limit`` characters.

    Args:
        text: the text (anything else is shown as its ``str``).
        limit: the most characters returned, the cut's note included; ``None``: no bound.  A cut
            text ends with ``… (N characters, cut)``, N the length of ``text``.
        lines: keep line breaks (``\n`` and ``\r\n``), for text shown over several lines where
            a line break cannot forge anything (the HTML page); else a line break is ``\n`` too.

    Returns:
        The text to show; ``text`` itself when it holds none of those characters and is short
        enough.  ``shown(shown(t)) == shown(t)``.
    """
    text = text if isinstance(text, str) else str(text)
    unsafe = _UNSAFE_LINES if lines else _UNSAFE
    if (limit is None or len(text) <= limit) and unsafe.search(text) is None:
        return text
    out = text if limit is None else text[:limit]  # an escape only lengthens: the rest is never shown
    out = unsafe.sub(_escape, out)
    if limit is not None and (len(out) > limit or len(text) > limit):
        note = f"… ({len(text):,} characters, cut)"
        keep = max(limit - len(note), 0)
        out = out[:keep]
        if out.endswith("\\") or re.search(r"\\(x[0-9a-f]?|u[0-9a-f]{0,3})$", out):  # no half escape
            out = out[:out.rindex("\\")]
        out += note
    return out


def shown_obj(value: Any, *, limit: int | None = LIMIT, lines: bool = False) -> Any:
    """A copy of a JSON-like value with :func:`shown` applied to every string, dict keys included
    (a tool name the model made up is a key of the report's counts); other values as they are.
    """
    if isinstance(value, str):
        return shown(value, limit=limit, lines=lines)
    if isinstance(value, Mapping):
        return {shown(k, limit=limit, lines=lines) if isinstance(k, str) else k: shown_obj(v, limit=limit, lines=lines)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown_obj(v, limit=limit, lines=lines) for v in value]
    return value


def json_shown_as_is(text: str, *, limit: int | None = LIMIT, lines: bool = False) -> bool:
    """Whether every string of the JSON value ``text`` encodes (``json.dumps(..., ensure_ascii=False)``)
    is shown as it is: :func:`shown_obj` would change nothing.  A test over the text at C speed,
    for many values (a page's records) where a walk over each would cost seconds; it may say
    ``False`` of a value :func:`shown_obj` leaves as it is (a literal backslash before ``b``),
    never ``True`` of one it changes.
    """
    if _JSON_RAW.search(text) is not None or (_JSON_ESCAPED_LINES if lines else _JSON_ESCAPED).search(text):
        return False
    if limit is None or len(text) <= limit:
        return True
    # no string is longer than the run of text between two quotes that are not escaped (an escaped
    # quote taken for a closing one only joins two strings: the bound holds); runs are scanned from
    # a quote (or the start) only, so the search is linear
    runs = text.replace('\\"', "..")
    longer = f'[^"]{{{limit + 1}}}'
    return re.match(longer, runs) is None and re.search('"' + longer, runs) is None


def json_safe(text: str) -> str:
    r"""JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with every DEL, C1 control,
    bidirectional mark, line or paragraph separator and lone surrogate written as a ``\uXXXX``
    escape: the same JSON values, no such character raw in the file.
    """
    if _JSON_RAW.search(text) is None:
        return text
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
