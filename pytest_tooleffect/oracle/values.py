"""JSON values as the oracle reads them: normalisers, dates and instants, JSON equality.

Everything here is a pure function of its arguments (the string normalisers and JSON keys of
the comparator, the compiled path and the predicates; the ISO 8601 parsing that rules,
effects and users share) and imports nothing else of the oracle.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

__all__ = [
    "ANY_OF",
    "JSON_TYPES",
    "MISSING",
    "OMITTED",
    "SCALAR_TYPES",
    "close_pair",
    "fresh",
    "is_mapping",
    "is_number",
    "json_key",
    "near",
    "normalise_string",
    "normaliser",
    "parse_date",
    "parse_datetime",
    "same_instant",
    "same_json",
    "tokens",
]

#: Label value holding alternatives: ``{"$any_of": [v1, v2, {"$omitted": true}]}``.
ANY_OF = "$any_of"
#: Alternative meaning "the field may be left out".
OMITTED = "$omitted"
#: A value that is absent (a key left out), as opposed to ``None`` (JSON ``null``).
MISSING: Any = object()

#: The Python types of JSON scalars as decoded by :mod:`json` (``null`` is ``NoneType``).
SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
#: The Python types of decoded JSON values: the scalars, arrays and objects.
JSON_TYPES = SCALAR_TYPES | {list, dict}

_KEY_DEPTH = 64  # far past any tool's arguments, far below Python's recursion limit


# ---------------------------------------------------------------- JSON values


def is_mapping(v: Any) -> bool:
    """``isinstance(v, Mapping)``, answered without the ABC check for dicts and scalars (the common cases).

    Args:
        v: any value.

    Returns:
        Whether ``v`` is a mapping (a JSON object).

    """
    return type(v) is dict or (type(v) not in SCALAR_TYPES and isinstance(v, Mapping))


def is_number(v: Any) -> bool:
    """Whether ``v`` is a JSON number: an ``int`` or ``float``, never a ``bool``.

    Args:
        v: any value.

    Returns:
        ``True`` for ``12`` and ``12.0``, ``False`` for ``True`` and ``"12"``.

    """
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fresh(value: Any) -> Any:
    """A copy of a JSON-like value that shares no dict or list with the original.

    Args:
        value: a JSON-like value (dicts, lists, scalars; other values are returned as they are).

    Returns:
        The copy: new dicts and lists at every depth, the same scalars.

    """
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fresh(v) for v in value]
    return value


def json_key(value: Any, text: Callable[[str], str] | None = None, depth: int = 0) -> Any:
    """A hashable form of a JSON value under JSON equality (JSON Schema's ``enum`` and ``const``).

    Equal forms mean equal JSON values: numbers by value (``1`` is ``1.0``), a boolean never a
    number (``true`` is not ``1``), strings as written (or through ``text``), arrays in order,
    objects by key (as text).  Other values stand for themselves (by ``repr`` when unhashable).
    An array or object nested deeper than 64 levels is equal only to itself.

    Args:
        value: the JSON value.
        text: applied to every string at every depth (a normaliser); ``None`` keeps them as written.
        depth: the nesting depth of ``value`` (callers leave it at 0).

    Returns:
        A hashable tagged tuple (``("s", text)``, ``("n", number)``, ``("o", frozenset)``, …).

    """
    if type(value) is str or isinstance(value, str):
        value = str.__str__(value)  # a subclass by its text
        return ("s", text(value) if text is not None else value)
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if depth >= _KEY_DEPTH and isinstance(value, (Mapping, list, tuple)):
        return ("deep", id(value))  # equal only to itself: no recursion into a value nested this deep
    if isinstance(value, Mapping):
        return ("o", frozenset((str(k), json_key(v, text, depth + 1)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("l", tuple(json_key(v, text, depth + 1) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("r", repr(value))
    return ("x", value)


def same_json(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value (:func:`json_key`); ``True == 1`` is not.

    Args:
        a: a JSON value.
        b: a JSON value.

    Returns:
        Whether they are equal under JSON equality.

    """
    if a is b:
        return True
    if type(a) is type(b) and type(a) in SCALAR_TYPES:
        return bool(a == b)
    return bool(json_key(a) == json_key(b))


def near(a: float, b: float) -> bool | None:
    """Numbers ``a`` and ``b`` are equal within the comparator's tolerance.

    The tolerance is relative, ``|a - b| <= 1e-9 * max(|a|, |b|)`` with no absolute term
    (:func:`math.isclose`, PEP 485, ``rel_tol=1e-9, abs_tol=0``).

    Args:
        a: a number.
        b: a number.

    Returns:
        Whether they are equal within tolerance; ``None`` when they are too large to tell
        (``OverflowError``).

    """
    try:
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    except OverflowError:
        return None


def close_pair(values: Iterable[Any]) -> bool:
    """Two different numbers among ``values`` within the comparator's tolerance (:func:`near`).

    Args:
        values: any values; only numbers are read.

    Returns:
        Whether two different numbers are equal within tolerance (or too large to tell).

    """
    numbers = [v for v in values if is_number(v)]
    return any(a != b and near(a, b) is not False for a in numbers for b in numbers)


# ---------------------------------------------------------------- strings

_PUNCT = re.compile(r"[\s,./\-_*^]+")

_NORMALISERS: dict[str, Callable[[str], str]] = {
    "nfkc": functools.partial(unicodedata.normalize, "NFKC"),
    "casefold": str.casefold,
    "strip": str.strip,
    "collapse_whitespace": lambda value: " ".join(value.split()),
    "strip_punctuation": lambda value: _PUNCT.sub("", value),
}


@functools.cache
def normaliser(steps: tuple[str, ...]) -> Callable[[str], str]:
    """The string normalisers ``steps`` as one function, applied in order (made once per ``steps``).

    Args:
        steps: normaliser names: ``nfkc`` (Unicode NFKC), ``casefold``, ``strip``,
            ``collapse_whitespace``, ``strip_punctuation``; unknown names are skipped.

    Returns:
        A function from a string to its normalised form.

    """
    fns = tuple(_NORMALISERS[step] for step in steps if step in _NORMALISERS)

    def apply(value: str) -> str:
        for fn in fns:
            value = fn(value)
        return value

    return apply


def normalise_string(value: str, steps: Sequence[str]) -> str:
    """Apply string normalisers in order (see :func:`normaliser`).

    Args:
        value: the string.
        steps: normaliser names (``nfkc``, ``casefold``, ``strip``, …).

    Returns:
        The normalised string.

    """
    return normaliser(tuple(steps))(value)


def tokens(s: str) -> set[str]:
    r"""The words of ``s`` (``\w+`` runs after NFKC and casefolding), for the free-text fallback.

    Args:
        s: the text.

    Returns:
        Its set of word tokens.

    """
    return set(re.findall(r"\w+", unicodedata.normalize("NFKC", s).casefold()))


# ---------------------------------------------------------------- dates and instants


def _zone(name: str | None) -> Any:
    if not name:
        return None
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def parse_datetime(value: Any, zone: str | None) -> datetime:
    """Parse an ISO 8601 date-time; a naive value is read in ``zone`` when one is given.

    Only ISO 8601 is accepted (``dateutil.parser.isoparse``; a space may separate date and
    time): free-form text such as ``"Monday 10am"`` or ``"10:00 EST"`` would be completed from
    today's date or lose its zone, so it is rejected rather than guessed.

    Args:
        value: an ISO 8601 string, or a :class:`~datetime.datetime`.
        zone: the IANA zone a naive value is read in (``"Europe/Madrid"``); ``None`` keeps it naive.

    Returns:
        The date-time, aware unless both ``value`` and ``zone`` give no zone.

    Raises:
        ValueError: not an ISO 8601 date-time, or ``zone`` is unknown.

    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        from dateutil import parser

        try:
            dt = parser.isoparse(value.strip())
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"{value!r} is not an ISO 8601 date-time") from exc
    else:
        raise ValueError(f"{value!r} is not a date-time string")
    if dt.tzinfo is None and zone:
        try:
            dt = dt.replace(tzinfo=_zone(zone))
        except Exception as exc:  # zoneinfo raises several types
            raise ValueError(f"unknown time zone {zone!r}") from exc
    return dt


def parse_date(value: Any) -> date:
    """Parse an ISO 8601 date (``2025-03-19``); a date-time gives its date, as written.

    Args:
        value: an ISO 8601 date or date-time string, or a :class:`~datetime.date`.

    Returns:
        The calendar date (a date-time's own date, not converted to any zone).

    Raises:
        ValueError: neither an ISO 8601 date nor an ISO 8601 date-time.

    """
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return parse_datetime(value, None).date()
    raise ValueError(f"{value!r} is not a date")


def same_instant(a: datetime, b: datetime) -> tuple[bool, str]:
    """Whether two date-times name the same instant.

    Aware times compare as POSIX timestamps: :class:`~datetime.datetime`'s ``==`` across zones
    is ``False`` for a time in a DST fold or gap (PEP 495), although both name the same instant.

    Args:
        a: a date-time.
        b: a date-time.

    Returns:
        ``(same, reason)``; ``reason`` is empty when they are the same instant.  A naive time
        against an aware one is never the same.

    """
    if (a.tzinfo is None) != (b.tzinfo is None):
        return False, "one time is naive and the user's time zone is unknown"
    same = a.timestamp() == b.timestamp() if a.tzinfo is not None else a == b
    if same:
        return True, ""
    return False, f"{a.isoformat()} and {b.isoformat()} are different instants"

