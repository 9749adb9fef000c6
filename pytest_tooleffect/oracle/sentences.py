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
Latin letters they look like, an English word of a claim written with precomposed accents without them,
HTML comments, inline HTML and Markdown emphasis, strong and code marks removed, Markdown links and images
read as their text), so a zero-width space, a soft hyphen, ``**boo**ked``, ``b&#111;oked``, ``boo\u0301ked``,
``bóoked``, ``boo<!-- x -->ked``, ``[booked](http://x)`` or a Cyrillic ``о`` inside ``booked`` cannot hide the
word from the checks that read the sentences.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from confusable_homoglyphs import confusables

__all__ = ["Folded", "dropped_markup", "is_question", "normal_text", "sentences"]

#: the characters a reply may hold that show nothing: every format character (Unicode category Cf:
#: zero-width space, joiners, bidirectional marks and controls, word joiner, soft hyphen, BOM, the
#: tag characters…) and the other default-ignorable ones (variation selectors, the combining grapheme
#: joiner, Hangul fillers, Mongolian free variation selectors)
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\u0600-\u0605\u06dd\u070f"
    "\u0890\u0891\u08e2\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


#: what makes an ASCII text worth normalising: an entity, an HTML tag, a Markdown emphasis, code or link mark
_MARKED = re.compile(r"[&<*_`\[]")
#: inline HTML that only dresses its text (strikethrough, ``<s>``, ``<del>`` and ``<strike>``, is left: it unsays its
#: text; ``<wbr>`` is a place a line may break, nothing shown)
_INLINE_TAG = re.compile(r"</?(?:b|strong|i|em|u|ins|mark|code|kbd|samp|tt|var|span|font|small|big|sub|sup|a|abbr|"
                         r"acronym|bdi|bdo|cite|data|dfn|label|nobr|q|time|wbr|blink|ruby|rb|output)"
                         r"(?:\s[^<>]{0,200})?/?>", re.I)
#: an HTML line break: a line break
_BREAK = re.compile(r"<br\s{0,20}/?>", re.I)
#: an HTML image: its alt text (what is shown in its place), the rest dropped
_IMAGE_TAG = re.compile(r"<img\s[^<>]{0,1000}>", re.I)
_ALT = re.compile(r"\balt\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.I)
#: an autolink (``<https://x.example/a>``, ``<tom@x.example>``): its text, without the angle brackets
_AUTOLINK = re.compile(r"<([a-z][a-z0-9+.-]{1,31}:[^\s<>]*+|[\w.+-]++@[\w-]++(?:\.[\w-]++)*+)>", re.I)
#: a Markdown inline link or image (``[text](url "title")``, ``![alt](url)``) or a reference link (``[text][1]``,
#: ``[text][]``): its text (every quantifier possessive and no text, URL or title holding its own opener: one scan)
_LINK = re.compile(r"!?\[([^\[\]]*+)\](?:\((?:<[^<>\n]*+>|[^()\s]*+)\s*+"
                   r"(?:(?:\"[^\"\n]*+\"|'[^'\n]*+'|\([^()\n]*+\))\s*+)?\)|\[[^\[\]]*+\])")
#: a Markdown link reference definition (``[1]: https://x.example "title"`` on a line of its own): shows nothing
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\[\]\n]++\]:[ \t]*+(?:<[^<>\n]*+>|\S++)[ \t]*+"
                              r"(?:\"[^\"\n]*+\"|'[^'\n]*+'|\([^()\n]*+\))?[ \t]*+$\n?", re.M)
#: Markdown emphasis, strong and code marks (CommonMark's flanking rule, simplified): every run of backticks; a
#: run of ``*`` unless it stands between blanks (a list bullet, ``5 * 3``) or between digits (``3*4``); a run of
#: ``_`` beside a letter or digit on one side only and no blank on the other (``_booked_``, never ``mia_li_3668``);
#: the leading lookahead lets the scan skip to the next mark
_MARKDOWN = re.compile(r"(?=[`*_])(?:`++|(?<![\s\d*])\*++|(?<!\*)\*++(?![\s\d])|(?<=\s)\*++(?=\d)|(?<=\d)\*++(?=\s)|"
                       r"(?<!\w)_++(?=\S)|(?<=[^\s_])_++(?!\w))")
#: a word (letters only)
_WORD = re.compile(r"[^\W\d_]++")
#: the English words the claim and reply checks read in a claim's frame (besides every word ending in ``ed``, the
#: regular past and participle): read without accents when written with them (``Í hávé``, ``sént``)
_ENGLISH_FRAME = frozenset(
    "i we ve d have has had been is are was were now already just also successfully all the your it its this that "
    "them their sent paid frozen made done set up put through complete open on way you re taken care of gone out "
    "went everything according to our records system not never no nothing none can cannot unable sorry".split())
#: real words ending in ``ed`` that carry an accent their language's spelling requires (Spanish ``césped``,
#: ``huésped``): kept as written
_ACCENTED_ED = frozenset(("césped", "huésped"))
#: Latin letters with a stroke (no decomposition in Unicode) read as their letter when an English word is folded
_STROKES = {"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H", "ı": "i", "ŧ": "t",
            "Ŧ": "T", "ƀ": "b", "ɨ": "i", "ʉ": "u", "ȼ": "c", "ɇ": "e", "ɍ": "r", "ɏ": "y", "ƶ": "z", "ǥ": "g"}


def normal_text(text: str) -> str:
    r"""``text`` as the deterministic reply and claim checks read it, in this order:

    1. markup read as it renders, as written (an entity spells a character shown as itself: ``&lt;!-- x --&gt;``
       is shown): HTML comments removed (``boo<!-- x -->ked``); an autolink as its text (:data:`_AUTOLINK`);
       ``<br>`` as a line break; an ``<img>`` as its alt text; inline HTML tags (:data:`_INLINE_TAG`)
       removed; a Markdown inline link, image or reference link as its text or alt text, the URL dropped
       (``[booked](http://x)``, ``![booked](x.png)``, ``[booked][1]``: :data:`_LINK`), a link reference
       definition's line removed;
    2. HTML entities decoded (:func:`html.unescape`: ``b&#111;oked``, ``&amp;``, ``b&oacute;oked``);
    3. invisible characters removed (:data:`_INVISIBLE`: every format character, category Cf, and
       the other default-ignorable code points) and the combining marks written apart from their
       letter (``boo\u0301ked``: the marks named ``COMBINING …``, categories Mn and Me);
    4. Unicode NFKC (full-width letters and digits, ligatures, non-breaking and ideographic spaces as
       their plain forms), then the combining marks NFKC gave (``´`` is a space and U+0301) removed;
       then pictographs and other symbols (categories So and Sk but ``°``: emoji, dingbats, check marks)
       with the spaces around them read as one space between words (``Refunded ✅ order``) and as nothing
       at a line's start or before a closing mark (``Done ✅.``: :func:`_without_symbols`);
    5. each letter of another script that looks like a Latin letter read as that letter (its
       prototype in Unicode's confusables, UTS #39, as the ``confusable_homoglyphs`` package ships
       them: Cyrillic ``о`` as ``o``; a capital letter whose prototype is ``l`` as ``I``);
    6. a word holding precomposed accented letters (``bóoked``) read without its accents when, so read, it is
       an English word the checks read in a claim: one ending in ``ed`` (the regular past and participle) or a
       word of :data:`_ENGLISH_FRAME` (``Í``, ``hávé``, ``sént``); any other accented word is a word of its
       own language and stays as written (``annulé``, ``está``, and ``césped``, ``huésped``:
       :data:`_ACCENTED_ED`).  On the labelled reply set (``datasets/replies``) no accented word changes;
    7. Markdown emphasis, strong and code marks (:data:`_MARKDOWN`: ``**boo**ked``, ``e*mail*ed``,
       ```booked```) removed.

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
    # markup first, as written: an entity spells a character shown as itself (``&lt;!-- x --&gt;`` is shown)
    if "<" in text:
        text = _html_read(text)
    if "[" in text:
        text = _LINK.sub(_link_text, _LINK.sub(_link_text, text))  # twice: an image inside a link
        if "]:" in text:
            text = _LINK_DEFINITION.sub("", text)
    if "&" in text:
        text = html.unescape(text)
    if not text.isascii():
        text = _without_marks(_INVISIBLE.sub("", text))
        if not unicodedata.is_normalized("NFKC", text):
            text = _without_marks(unicodedata.normalize("NFKC", text))
        text = _without_symbols(text)
        folds = _homoglyphs()
        text = text.translate({ord(c): folds[c] for c in set(text) if c in folds})
        if not text.isascii():
            text = _english_unaccented(text)
    return _MARKDOWN.sub("", text) if "*" in text or "_" in text or "`" in text else text


_DROPPED = re.compile("|".join(f"(?:{p.pattern})" for p in (_IMAGE_TAG, _LINK)) + r"|<[a-z][\w:-]{0,60}\s[^<>]{0,400}>",
                      re.I)


def dropped_markup(text: str) -> str:
    """What :func:`normal_text` drops from ``text`` that a reader of its source sees: each HTML comment, link or
    image (with its URL and title), link reference definition and tag with attributes (an ``href``), one a line.

    The checks read a reply as it renders; a tool's result is read by the agent as written, so what a value
    claim may quote from it is its reading and this (:func:`~.claims.find_phantom`'s held values).

    Args:
        text: any text.

    Returns:
        The dropped pieces, one a line; ``""`` when there is none.
    """
    if "<" not in text and "[" not in text:
        return ""
    pieces = [m.group() for m in _DROPPED.finditer(text)]
    if "]:" in text:
        pieces += [m.group().strip() for m in _LINK_DEFINITION.finditer(text)]
    if "<!--" in text:
        pieces += [text[start:end] for start, end in _comments(text)]
    return html.unescape("\n".join(pieces))


def _without_marks(text: str) -> str:
    """``text`` without its combining marks (named ``COMBINING …``, categories Mn and Me)."""
    marks = {ord(c): None for c in set(text) if unicodedata.category(c) in ("Mn", "Me")
             and unicodedata.name(c, "").startswith("COMBINING")}
    return text.translate(marks) if marks else text


#: a symbol read as written (a degree sign is part of a temperature or an angle: ``20 °C``)
_KEPT_SYMBOLS = frozenset("\u00b0")
#: what closes a phrase: a symbol before it goes without a space (``Done ✅.``)
_CLOSING = frozenset(".,;:!?)]}\"'\u00bb\u201d\u2019")


def _without_symbols(text: str) -> str:
    """``text`` with each run of pictographs and other symbols (categories So and Sk, but ``°``: emoji, dingbats,
    check marks, stars, skin-tone modifiers), with the spaces or tabs around it, read as one space between two
    words (``Refunded ✅ order`` is ``Refunded order``) and as nothing at a line's start or before a closing mark.
    """
    symbols = [c for c in set(text) if unicodedata.category(c) in ("So", "Sk") and not c.isascii()
               and c not in _KEPT_SYMBOLS]
    if not symbols:
        return text
    # the lookbehind starts a match only at a run's first space: a long run of spaces is scanned once
    run = re.compile("(?<![ \t])[ \t]*+(?:[" + "".join(re.escape(c) for c in sorted(symbols)) + "][ \t]*+)++")

    def one(m: re.Match[str]) -> str:
        start, end = m.start(), m.end()
        if start == 0 or end == len(text) or text[start - 1] in "\n([{" or text[end] in _CLOSING or text[end] == "\n":
            return ""
        return " "
    return run.sub(one, text)


def _english_unaccented(text: str) -> str:
    """``text`` with each word that reads as an English word of a claim once its accents are dropped so read
    (step 5 of :func:`normal_text`); the other words as written.
    """
    folds = _unaccented(frozenset(text))
    if not folds:
        return text

    def one(m: re.Match[str]) -> str:
        word = m.group()
        if word.isascii() or word.lower() in _ACCENTED_ED:
            return word
        plain = word.translate(folds)
        low = plain.lower()
        return plain if plain.isascii() and (low.endswith("ed") and len(low) > 3 or low in _ENGLISH_FRAME) else word

    return _WORD.sub(one, text)


def _unaccented(chars: frozenset[str]) -> dict[int, str]:
    """``{code point: ASCII letter}`` for each of ``chars`` that is a Latin letter with diacritics (its
    decomposition an ASCII letter and combining marks, or a letter of another script that looks like
    one: Greek ``ό``) or with a stroke (:data:`_STROKES`).
    """
    folds = _homoglyphs()
    out: dict[int, str] = {}
    for c in chars:
        if c.isascii() or not c.isalpha():
            continue
        base = _STROKES.get(c) or _without_marks(unicodedata.normalize("NFD", c))
        base = folds.get(base, base)
        if len(base) == 1 and base.isascii() and base.isalpha():
            out[ord(c)] = base
    return out


def _html_read(text: str) -> str:
    """``text``'s HTML read as it renders (step 6 of :func:`normal_text`): comments removed, autolinks as their
    text, ``<br>`` as a line break, an image as its alt text, inline tags removed.
    """
    if "<!--" in text:
        text = _without_comments(text)
    text = _AUTOLINK.sub(r"\1", text)
    text = _BREAK.sub("\n", text)
    text = _IMAGE_TAG.sub(_alt_text, text)
    return _INLINE_TAG.sub("", text)


def _without_comments(text: str) -> str:
    """``text`` without its HTML comments (:func:`_comments`)."""
    out: list[str] = []
    at = 0
    for start, end in _comments(text):
        out.append(text[at:start])
        at = end
    out.append(text[at:])
    return "".join(out)


def _comments(text: str) -> list[tuple[int, int]]:
    """Where ``text``'s HTML comments are, ``(start, end)`` each: a ``<!--`` to the first ``-->`` after it
    (``<!-->`` and ``<!--->`` are whole comments, as CommonMark reads them); a ``<!--`` never closed is no
    comment, nor is any after it.  One scan: each search starts where the last one ended.
    """
    out: list[tuple[int, int]] = []
    at = 0
    while (start := text.find("<!--", at)) >= 0:
        if text.startswith("<!-->", start) or text.startswith("<!--->", start):
            end = text.index(">", start) + 1
        else:
            end = text.find("-->", start + 4)
            if end < 0:
                break
            end += 3
        out.append((start, end))
        at = end
    return out


def _alt_text(m: re.Match[str]) -> str:
    alt = _ALT.search(m.group())
    return "" if alt is None else alt.group(1) or alt.group(2) or alt.group(3) or ""


def _link_text(m: re.Match[str]) -> str:
    return m.group(1)


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
