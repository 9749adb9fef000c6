"""Unknown keys in a file's objects, told with the known key they most likely misspell.

A key a format does not know is refused where the file is read (a label's ``forbiden_actions``
dropped unsaid would lose the labeller's forbidden action); the message says which known key was
probably meant, found with :func:`difflib.get_close_matches` (Ratcliff/Obershelp similarity,
cut-off 0.6, the standard library's default).
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

__all__ = ["UNKNOWN_KEY", "extra_key_message", "known_keys_at", "unknown_key_message", "unknown_keys"]

#: pydantic's error type for a key its model does not know (``extra="forbid"``)
UNKNOWN_KEY = "extra_forbidden"


def unknown_key_message(key: str, known: Iterable[str]) -> str:
    """``unknown key (did you mean 'forbidden_actions'?)``, or ``unknown key (known: a, b, …)``
    when no known key is close to ``key``.

    Args:
        key: the key as the file gives it.
        known: the keys the object may hold.
    """
    names = sorted(set(known))
    close = difflib.get_close_matches(str(key), names, n=1)
    if close:
        return f"unknown key (did you mean {close[0]!r}?)"
    return f"unknown key (known: {', '.join(names)})"


def unknown_keys(obj: Mapping[Any, Any], known: Iterable[str]) -> list[tuple[str, str]]:
    """``(key, message)`` for each key of ``obj`` not in ``known``, in the object's order
    (:func:`unknown_key_message`).
    """
    names = set(known)
    return [(str(k), unknown_key_message(str(k), names)) for k in obj if k not in names]


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through lists, unions, ``Annotated``, optionals)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def known_keys_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The keys the object at ``loc`` (a pydantic error's location, less its last part: the key)
    may hold, ``model`` being the root's: the fields (and aliases) of every model a field there may
    hold (both members of a union).  Empty when the location leads through no model (a mapping of
    free keys).
    """
    models = [model]
    for part in loc:
        if isinstance(part, int) or any(part == m.__name__ for m in models):  # a list index, a union's tag
            continue
        models = [sub for m in models if part in m.model_fields for sub in _models(m.model_fields[part].annotation)]
        if not models:
            return []
    return sorted({name for m in models for f_name, f in m.model_fields.items()
                   for name in (f_name, f.alias) if name})


def extra_key_message(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """The message of a pydantic error of ``model``: for an unknown key, :func:`unknown_key_message`
    with the keys known where it stands; else pydantic's message (``Value error, `` left out).
    """
    if error.get("type") == UNKNOWN_KEY and error.get("loc"):
        loc = tuple(error["loc"])
        known = known_keys_at(model, loc[:-1])
        if known:
            return unknown_key_message(str(loc[-1]), known)
    return str(error["msg"]).removeprefix("Value error, ")
