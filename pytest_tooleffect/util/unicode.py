r"""Text that is not valid Unicode: lone surrogates.

A JSON string may spell a UTF-16 surrogate on its own (``"\ud800"``); Python decodes it to a
``str`` holding that code point, which no UTF-8 writer accepts (RFC 8259 section 8.2 leaves such
text's meaning unpredictable).  :func:`surrogate_problem` finds one in JSON data and says where, so
a turn holding one is refused where it enters; :func:`without_surrogates` makes a message that is
only read by people (an error's text) writable.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["REPLACEMENT", "lone_surrogate", "surrogate_problem", "without_surrogates"]

#: U+FFFD REPLACEMENT CHARACTER, what an unwritable code point becomes in a message
REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> tuple[int, str] | None:
    """The first lone surrogate of ``text``: ``(index, "U+D800")``, or ``None`` when it has none.

    An ASCII text is answered without a scan (CPython keeps that flag on the string).
    """
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else (found.start(), f"U+{ord(found.group()):04X}")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (for messages people read, not for decisions)."""
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)


def _step(path: str, key: str) -> str:
    shown = key if key.isidentifier() else json.dumps(without_surrogates(key[:40]))
    if not path:
        return shown
    return f"{path}.{shown}" if key.isidentifier() else f"{path}[{shown}]"


def surrogate_problem(value: Any, path: str = "") -> str | None:
    """Where JSON data (dicts, lists, strings, numbers) holds a lone surrogate, in one line, or ``None``.

    Args:
        value: plain JSON data.
        path: where ``value`` sits, as the message names it (``choices[0].message``).

    Returns:
        ``content holds U+D800, a lone surrogate, at character 3: not valid Unicode text`` (keys
        are checked too), or ``None``.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, str):
            found = lone_surrogate(v)
            if found is not None:
                at = where or "the text"
                return f"{at} holds {found[1]}, a lone surrogate, at character {found[0]}: not valid Unicode text"
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                if isinstance(k, str) and (found := lone_surrogate(k)) is not None:
                    at = f" of {where}" if where else ""
                    return (f"a key{at} holds {found[1]}, a lone surrogate, at character {found[0]}: not valid "
                            "Unicode text")
                stack.append((x, _step(where, str(k))))
        elif isinstance(v, (list, tuple)):
            stack.extend((x, f"{where}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None
