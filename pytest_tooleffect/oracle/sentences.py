r"""A reply cut into sentences, as the reply fallback and the claim check read it.

Pure and deterministic.  A sentence ends at ``.``, ``!``, ``?`` (runs of them, ``...`` and ``?!``
included) followed by white space or the end of the text, at a full-width terminator
(``。！？``) wherever it stands, and at a line break.  A terminator followed by anything else
ends nothing, so numbers, prices, times, versions, ids, URLs, e-mail addresses and file names
stay whole (``$49.99``, ``10:30``, ``v2.1``, ``ABC.123``, ``https://x.example/a.b``).  A ``.``
followed by white space does not end a sentence after:

* a title or a word that is always followed by more (``Mr.``, ``Dr.``, ``St.``, ``No.`` before a number,
  ``e.g.``, ``i.e.``, ``vs.``, ``approx.``, ``Sr.``, ``Sra.``, ``z.B.``, ``p.ej.``…);
* a month or weekday abbreviation (``Jan.``, ``Sept.``, ``Mon.``);
* ``a.m.``, ``p.m.``, ``etc.``, ``Inc.``, ``Ltd.`` and a single capital letter (an initial, ``U.S.``),
  unless the next word starts with a capital letter (then the sentence ended there);
* a list number at the start of a line (``1.``, ``12.``).

Closing quotes and brackets after a terminator stay with its sentence.

Before it is cut, the text is read as :func:`normal_text` gives it (HTML entities decoded, invisible
characters and combining marks removed, Unicode NFKC, look-alike letters of other scripts read as the
Latin letters they look like, inline HTML and Markdown emphasis, strong and code marks removed), so a
zero-width space, a soft hyphen, ``**boo**ked``, ``b&#111;oked``, ``boo\u0301ked`` or a Cyrillic ``о``
inside ``booked`` cannot hide the word from the checks that read the sentences.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from confusable_homoglyphs import confusables

__all__ = ["Folded", "is_question", "normal_text", "sentences"]

#: the characters a reply may hold that show nothing: every format character (Unicode category Cf:
#: zero-width space, joiners, bidirectional marks and controls, word joiner, soft hyphen, BOM, the
#: tag characters…) and the other default-ignorable ones (variation selectors, the combining grapheme
#: joiner, Hangul fillers, Mongolian free variation selectors)
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\u0600-\u0605\u06dd\u070f"
    "\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


#: what makes an ASCII text worth normalising: an entity, an HTML tag, a Markdown emphasis or code mark
_MARKED = re.compile(r"[&<*_`]")
#: inline HTML that only dresses its text (strikethrough, ``<s>`` and ``<del>``, is left: it unsays its text)
_INLINE_TAG = re.compile(r"</?(?:b|strong|i|em|u|ins|mark|code|kbd|samp|tt|var|span|font|small|big|sub|sup|a)"
                         r"(?:\s[^<>]{0,200})?/?>", re.I)
#: Markdown emphasis, strong and code marks (CommonMark's flanking rule, simplified): every run of backticks; a
#: run of ``*`` unless it stands between blanks (a list bullet, ``5 * 3``) or between digits (``3*4``); a run of
#: ``_`` beside a letter or digit on one side only and no blank on the other (``_booked_``, never ``mia_li_3668``);
#: the leading lookahead lets the scan skip to the next mark
_MARKDOWN = re.compile(r"(?=[`*_])(?:`++|(?<![\s\d*])\*++|(?<!\*)\*++(?![\s\d])|(?<=\s)\*++(?=\d)|(?<=\d)\*++(?=\s)|"
                       r"(?<!\w)_++(?=\S)|(?<=[^\s_])_++(?!\w))")


def normal_text(text: str) -> str:
    r"""``text`` as the deterministic reply and claim checks read it, in this order:

    1. HTML entities decoded (:func:`html.unescape`: ``b&#111;oked``, ``&amp;``);
    2. invisible characters removed (:data:`_INVISIBLE`: every format character, category Cf, and
       the other default-ignorable code points) and the combining marks written apart from their
       letter (``boo\u0301ked``: the marks named ``COMBINING …``, categories Mn and Me); a
       precomposed letter (``é`` in ``annulé``) is a letter of its own and stays;
    3. Unicode NFKC (full-width letters and digits, ligatures, non-breaking and ideographic spaces as
       their plain forms), then the combining marks NFKC gave (``´`` is a space and U+0301) removed;
    4. each letter of another script that looks like a Latin letter read as that letter (its
       prototype in Unicode's confusables, UTS #39, as the ``confusable_homoglyphs`` package ships
       them: Cyrillic ``о`` as ``o``; a capital letter whose prototype is ``l`` as ``I``);
    5. inline HTML tags (:data:`_INLINE_TAG`) and Markdown emphasis, strong and code marks
       (:data:`_MARKDOWN`: ``**boo**ked``, ``e*mail*ed``, ```booked```) removed.

    Each step is a scan of the text (linear in its length).  ``normal_text(normal_text(t)) ==
    normal_text(t)`` for text whose marks do not spell new entities or marks once removed.

    Args:
        text: any text.

    Returns:
        The text read so; ``text`` itself when it holds none of those.
    """
    if text.isascii() and not _MARKED.search(text):
        return text
    return _normal(text)


@lru_cache(maxsize=4)  # one reply is read by the reply check and by the claims' check in turn
def _normal(text: str) -> str:
    if "&" in text:
        text = html.unescape(text)
    if not text.isascii():
        text = _without_marks(_INVISIBLE.sub("", text))
        if not unicodedata.is_normalized("NFKC", text):
            text = _without_marks(unicodedata.normalize("NFKC", text))
        folds = _homoglyphs()
        text = text.translate({ord(c): folds[c] for c in set(text) if c in folds})
    if "<" in text:
        text = _INLINE_TAG.sub("", text)
    return _MARKDOWN.sub("", text) if "*" in text or "_" in text or "`" in text else text


def _without_marks(text: str) -> str:
    """``text`` without its combining marks (named ``COMBINING …``, categories Mn and Me)."""
    marks = {ord(c): None for c in set(text) if unicodedata.category(c) in ("Mn", "Me")
             and unicodedata.name(c, "").startswith("COMBINING")}
    return text.translate(marks) if marks else text


@lru_cache(maxsize=1)
def _homoglyphs() -> dict[str, str]:
    """``{letter: Latin letter}``: every non-ASCII letter (category L) whose prototype among Unicode's
    confusables (UTS #39 confusables.txt, as ``confusable_homoglyphs`` ships it) is one ASCII letter;
    a capital letter whose prototype is ``l`` (Cyrillic ``І``, Greek ``Ι``) is ``I``.
    """
    out: dict[str, str] = {}
    for char, entries in confusables.confusables_data.items():
        if len(char) != 1 or char.isascii() or not unicodedata.category(char).startswith("L"):
            continue
        latin = [e["c"] for e in entries if len(e["c"]) == 1 and e["c"] in string.ascii_letters]
        if latin:
            out[char] = "I" if latin[0] == "l" and "CAPITAL" in unicodedata.name(char, "") else latin[0]
    return out

#: never end a sentence (lower-cased, without the final dot)
_ALWAYS_MORE = frozenset(
    "mr mrs ms dr st prof sr sra srta jr mt ft e.g i.e vs approx ca cf fig dept tel ext apt ave "
    "z.b u.a bzw p.ej ej núm mme mlle m.m "
    "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun".split()
)
#: end a sentence only when the next word is capitalised
_MAYBE_END = frozenset("a.m p.m etc inc ltd co corp u.s u.k".split())
#: never end a sentence when a number follows (``No. 5``)
_NUMBER_NEXT = frozenset("no nr nº núm num".split())
_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)|[。！？]+[\"'”’)\]」]*|\n+")
_WORD_BEFORE = re.compile(r"(?:^|[\s(\"'“‘])([\w.'’]+)$")
_LIST_NUMBER = re.compile(r"^[ \t]*\d{1,3}$")
_QUESTION_END = re.compile(r"[?？][\"'”’)\]」*_\s]*$|^\s*¿")


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped, in order (empty ones left out).

    Args:
        text: any text (``""`` gives ``[]``).

    Returns:
        Each sentence of :func:`normal_text` of it, with its terminator (``"Shall I refund $49.99
        to your card?"`` is one).
    """
    return list(_split(normal_text(text)))


@lru_cache(maxsize=4)  # one reply is cut by the reply check and by the claims' check in turn
def _split(text: str) -> tuple[str, ...]:
    out: list[str] = []
    start = 0
    for m in _END.finditer(text):
        end = m.end()
        mark = m.group()
        if mark.startswith(".") and len(mark.rstrip("\"'”’)]")) == 1 and not _ends_here(text, m.start(), end):
            continue
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return tuple(out)


def _ends_here(text: str, dot: int, after: int) -> bool:
    """Whether the single ``.`` at ``dot`` ends its sentence (the rules in the module's docstring)."""
    start = max(0, dot - 60)  # the word before, on its line, within 60 characters: linear in the text
    newline = text.rfind("\n", start, dot)
    before = text[newline + 1 if newline >= 0 else start:dot]
    if (newline >= 0 or start == 0) and _LIST_NUMBER.search(before):
        return False
    m = _WORD_BEFORE.search(before)
    if m is None:
        return True
    word = m.group(1).lower().rstrip(".")
    if word in _ALWAYS_MORE or (word in _NUMBER_NEXT and re.match(r"\s*#?\d", text[after:])):
        return False
    if word in _MAYBE_END or (len(m.group(1)) == 1 and m.group(1).isupper()):
        nxt = re.match(r"\s*([\"'“‘(]*)(\w)", text[after:])
        return bool(nxt and nxt.group(2).isupper())
    return True


def is_question(sentence: str) -> bool:
    """The sentence ends in a question mark (``?`` or ``？``, before closing quotes, brackets or
    Markdown emphasis) or opens with ``¿``.
    """
    return bool(_QUESTION_END.search(sentence))


#: escapes whose letter names a character (``\x41`` is ``A``) or a group: a pattern holding one is not folded
_CHAR_ESCAPE = re.compile(r"\\[xuUN0-9]")


class Folded:
    r"""A case-insensitive pattern, searched in ASCII text as a case-sensitive one in that text lower-cased.

    Python's ``re`` tries each alternative of an ``IGNORECASE`` pattern at every position; in its
    case-sensitive form an alternative whose first letter differs is left at once (two to four times
    faster on the reply patterns).  For ASCII text both forms match at the same positions: lower-casing
    ASCII keeps every offset, and an ASCII character matches a lower-case letter of the pattern under
    ``IGNORECASE`` exactly when its lower case is that letter.  Text with other characters is searched
    by the pattern itself.

    Args:
        pattern: a pattern compiled with :data:`re.IGNORECASE`, whose text holds no upper-case ASCII
            letter outside an escape (``\W`` is fine, ``[A-Z]`` is written ``[a-z]``), no escape naming
            a character or a group (``\x41``, ``\1``) and no character an ASCII letter folds to.

    Raises:
        ValueError: the pattern cannot be folded so.
    """

    def __init__(self, pattern: re.Pattern[str]) -> None:
        text = pattern.pattern
        bare = re.sub(r"\(\?P<\w+>", "(", re.sub(r"\\.", "", text))  # without its escapes and group names
        if not pattern.flags & re.IGNORECASE or re.search(r"[A-Z]|\(\?[a-zA-Z-]+[:)]|\(\?P=", bare) \
                or _CHAR_ESCAPE.search(text) or any(
                    re.fullmatch(re.escape(c), chr(a), re.IGNORECASE) for c in set(bare) if not c.isascii()
                    for a in range(128)):
            raise ValueError(f"pattern {text[:60]!r}… cannot be folded to a case-sensitive one")
        self.pattern = pattern
        self._lower = re.compile(text, pattern.flags & ~re.IGNORECASE)

    def search(self, text: str) -> re.Match[str] | None:
        """The first match, as :meth:`re.Pattern.search` (in ASCII text, a match in ``text.lower()``:
        its positions are ``text``'s, its groups' text lower-cased).
        """
        return self._lower.search(text.lower()) if text.isascii() else self.pattern.search(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """Every match, as :meth:`re.Pattern.finditer` (positions as :meth:`search`'s)."""
        return self._lower.finditer(text.lower()) if text.isascii() else self.pattern.finditer(text)
