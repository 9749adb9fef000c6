"""The JSON reader that refuses an object giving one key twice: RFC 8259 §4 leaves its meaning open
("the names within an object SHOULD be unique") and Python's ``json`` keeps the last in silence.

Every reader of JSON text the plugin scores or takes in goes through it: :mod:`.jsonl` (input files:
cases, record logs, baselines, label files, the model cache) and the oracle (a tool call's
``arguments`` JSON text, a call written in the text channel, where a key given twice is a
malformed call).  This module imports nothing of the plugin: every stage may use it.
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ["UNIQUE_KEYS", "RepeatedKey", "loads_unique", "long_integer", "unique"]


class RepeatedKey(ValueError):
    """A JSON object gives one key twice.

    Attributes:
        key: the key.
        owner: the ``id`` of the document's top-level object (a case's, a record's), or ``None``.
        plain: the message without the owner (for a caller that names the entry itself).
    """

    def __init__(self, key: str, owner: Any = None) -> None:
        self.key, self.owner = key, owner
        self.plain = (f"the key {key!r} is given twice in one object: JSON keeps only one of them without a word; "
                      "give each key once")
        where = f" (in the entry of id {owner!r})" if isinstance(owner, str | int) else ""
        super().__init__(self.plain.replace(" in one object", f" in one object{where}", 1))


def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict (``json``'s ``object_pairs_hook``).

    Raises:
        RepeatedKey: a key is given twice (the first such key).
    """
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find the key only then
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return out


#: the reader of what a model or an agent wrote (a tool call's ``arguments`` JSON text, a call in the
#: text channel): ``json``'s own, but refusing an object that gives a key twice (:class:`RepeatedKey`)
UNIQUE_KEYS = json.JSONDecoder(object_pairs_hook=unique)


def loads_unique(text: str) -> Any:
    """``json.loads`` refusing an object that gives a key twice, and nothing else ``json`` reads
    (the reader of a tool call's ``arguments`` JSON text, whose other faults the oracle scores).

    Raises:
        RepeatedKey: an object gives a key twice (its ``key`` names it).
        ValueError: not JSON (``json.JSONDecodeError``), or an integer past Python's digit limit.
        RecursionError: nested deeper than the interpreter's recursion limit.
    """
    return UNIQUE_KEYS.decode(text)




def long_integer(text: str) -> str | None:
    """Why ``json.loads`` refused ``text`` with a ``ValueError`` naming no field ("Exceeds the limit (4300 digits)
    for integer string conversion"): ``an integer of N digits (over Python's L-digit limit)`` for the longest run
    of digits past Python's limit on integer text (``sys.get_int_max_str_digits()``, 4300 by default; 0 is none);
    ``None`` when there is none.  One scan of ``text``.
    """
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    longest = max((len(m.group()) for m in re.finditer(r"\d{" + str(limit + 1) + ",}", text)), default=0)
    return f"an integer of {longest} digits (over Python's {limit}-digit limit)" if longest else None
