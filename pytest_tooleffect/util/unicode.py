r"""Text that is not valid Unicode: lone surrogates.

A JSON string may spell a UTF-16 surrogate on its own (``"\ud800"``), and so may a YAML double-quoted
scalar; Python decodes it to a ``str`` holding that code point, which no UTF-8 writer accepts
(RFC 8259 section 8.2 leaves such text's meaning unpredictable).  This module is the one check
every reader of text input uses (case files, traces, imports, tools files, label files, model
answers, agent returns, cache entries): :func:`find_surrogate` finds one in JSON data and says
where (a tool call's ``arguments``, JSON text inside a string, is read too), :func:`surrogate_problem`
says it in one line, :class:`LoneSurrogate` is the error a reader raises, and
:func:`without_surrogates` makes a message that is only read by people (an error's text) writable.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["JSON_TEXT_KEYS", "REPLACEMENT", "LoneSurrogate", "Surrogate", "find_surrogate", "lone_surrogate",
           "may_hold_surrogate", "surrogate_problem", "without_surrogates"]

#: U+FFFD REPLACEMENT CHARACTER, what an unwritable code point becomes in a message
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
#: a JSON (or YAML) escape of a surrogate: text without one (nor a surrogate itself) decodes to none
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
#: keys whose string value is JSON text (a tool call's arguments), read as JSON by :func:`find_surrogate`
JSON_TEXT_KEYS = frozenset({"arguments"})


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """The first lone surrogate of ``text``: ``(index, "U+D800")``, or ``None`` when it has none.

    An ASCII text is answered without a scan (CPython keeps that flag on the string).
    """
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else (found.start(), f"U+{ord(found.group()):04X}")


def may_hold_surrogate(text: str) -> bool:
    r"""Whether JSON or YAML text may decode to a lone surrogate: it holds a ``\uD800``-``\uDFFF``
    escape or such a code point (a cheap test before :func:`find_surrogate` walks the decoded data).
    """
    if ("\\ud" in text or "\\uD" in text) and _ESCAPE.search(text) is not None:  # substring tests: fast
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")  # in C, faster than a search for the code points
    except UnicodeEncodeError:
        return True
    return False


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (for messages people read, not for decisions)."""
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)


def _step(path: str, key: str) -> str:
    shown = key if key.isidentifier() else json.dumps(without_surrogates(key[:40]))
    if not path:
        return shown
    return f"{path}.{shown}" if key.isidentifier() else f"{path}[{shown}]"


@dataclass(frozen=True)
class Surrogate:
    """Where a lone surrogate is.

    Attributes:
        field: the path of the string (or of the object whose key holds it), as
            ``messages[0].content``; ``""`` for the value itself.
        code: the code point, ``U+D800``.
        at: its index in the string (characters from 0).
        key: it is in a key of the object at ``field``, not in a value.
        in_json: ``field`` is JSON text (a tool call's ``arguments``) and ``inner`` the path within it.
        inner: the path inside that JSON text (``""``: its top).
    """

    field: str
    code: str
    at: int
    key: bool = False
    in_json: bool = False
    inner: str = ""

    def __str__(self) -> str:
        where = self.field or "the text"
        if self.in_json:
            inside = f"a key of {self.inner}" if self.key and self.inner else "a key" if self.key else \
                self.inner or "its top"
            where = f"{where} (JSON text), at {inside},"
        elif self.key:
            where = f"a key of {self.field}" if self.field else "a key"
        return f"{where} holds {self.code}, a lone surrogate, at character {self.at}: not valid Unicode text"


def _json_text(text: str, path: str) -> Surrogate | None:
    """A lone surrogate the JSON text ``text`` decodes to (``None``: none, or not JSON: its reader says)."""
    if not may_hold_surrogate(text):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    found = find_surrogate(value, json_text=frozenset())
    if found is None:
        return None
    return Surrogate(path, found.code, found.at, found.key, True, found.field)


def _holds_surrogate(value: Any, json_text: frozenset[str]) -> bool:
    """Whether :func:`find_surrogate` may find one: a string or key holding a surrogate, or JSON text
    that may decode to one (:func:`may_hold_surrogate`); no path is built.
    """
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        v, as_json = stack.pop()
        if isinstance(v, str):
            if (not v.isascii() and _SURROGATE.search(v) is not None) or (as_json and may_hold_surrogate(v)):
                return True
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and not k.isascii() and _SURROGATE.search(k) is not None:
                    return True
                stack.append((x, k in json_text))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, False) for x in v)
    return False


def find_surrogate(value: Any, path: str = "", json_text: frozenset[str] = JSON_TEXT_KEYS) -> Surrogate | None:
    r"""The first lone surrogate in JSON data (dicts, lists, strings, numbers), keys included, or ``None``.

    Args:
        value: plain JSON data.
        path: where ``value`` sits, as a message names it (``choices[0].message``).
        json_text: keys whose string value is JSON text to read too (by default a tool call's
            ``arguments``: the text ``{"city": "\ud800"}`` is ASCII, yet its reading holds U+D800).

    Returns:
        The first :class:`Surrogate`, in document order, or ``None``.
    """
    if not _holds_surrogate(value, json_text):  # the common case, answered without building any path
        return None
    stack: list[tuple[Any, str, bool]] = [(value, path, False)]
    while stack:
        v, where, as_json = stack.pop()
        if isinstance(v, str):
            found = lone_surrogate(v)
            if found is not None:
                return Surrogate(where, found[1], found[0])
            if as_json and (inner := _json_text(v, where)) is not None:
                return inner
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                if isinstance(k, str) and (found := lone_surrogate(k)) is not None:
                    return Surrogate(where, found[1], found[0], key=True)
                stack.append((x, _step(where, str(k)), k in json_text))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{where}[{i}]", False) for i, x in reversed(list(enumerate(v))))
    return None


def surrogate_problem(value: Any, path: str = "", json_text: frozenset[str] = JSON_TEXT_KEYS) -> str | None:
    """Where JSON data (dicts, lists, strings, numbers) holds a lone surrogate, in one line, or ``None``.

    Args:
        value: plain JSON data.
        path: where ``value`` sits, as the message names it (``choices[0].message``).
        json_text: keys whose string value is JSON text read too (:func:`find_surrogate`).

    Returns:
        ``content holds U+D800, a lone surrogate, at character 3: not valid Unicode text`` (keys
        are checked too), or ``None``.
    """
    found = find_surrogate(value, path, json_text)
    return None if found is None else str(found)


class LoneSurrogate(ValueError):
    """Input text that decodes to a lone surrogate: not valid Unicode, refused where it is read.

    Attributes:
        found: where it is (:class:`Surrogate`).
        owner: the ``id`` of the document's top-level object (a case's, an entry's), or ``None``.
        plain: the message without the owner (for a caller that names the entry itself).
    """

    def __init__(self, found: Surrogate, owner: Any = None) -> None:
        self.found, self.owner = found, owner
        self.plain = str(found)
        where = f" (in the entry of id {without_surrogates(str(owner))!r})" if isinstance(owner, str | int) else ""
        super().__init__(self.plain + where)

    @classmethod
    def check(cls, value: Any, path: str = "") -> None:
        """Raise for the first lone surrogate in ``value`` (the owner: its ``id``, when it is an object).

        Raises:
            LoneSurrogate: ``value`` holds one.
        """
        found = find_surrogate(value, path)
        if found is not None:
            owner = value.get("id") if isinstance(value, dict) else None
            raise cls(found, owner if isinstance(owner, str | int) and not isinstance(owner, bool) else None)
