"""The run's records as the controller keeps them between their arrival and the report.

A record reaches the controller as JSON text on the item's test report (made by
:meth:`~pytest_tooleffect.scoring.record.Record.to_json_text` in the process that ran the item,
this one or an xdist worker); pytest's terminal reporter keeps that report, and the text with it,
to the end of the run.  :class:`RecordStore` keeps a reference to the same text and makes a
:class:`~pytest_tooleffect.scoring.record.Record` of it each time one is read: every reader (the
report's counting, the plugin's sections, the Markdown and the HTML page) gets typed records, one
at a time, and the run never holds a typed record per item.  Measured at 2,000 decisions of the
τ-airline replay: a typed record weighs 7.9 KiB and a few dozen objects the garbage collector
walks at each full collection, its JSON object 2.7 KiB, its text 1.6 KiB and none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from pytest_tooleffect.scoring.record import Record

__all__ = ["RecordStore"]


class RecordStore(Sequence[Record]):
    """The records of a run, in the order they arrived: a sequence of
    :class:`~pytest_tooleffect.scoring.record.Record`, each made from its JSON text when read.

    Args:
        records: the records' JSON texts to start with (:meth:`Record.to_json_text`, or a record
            log's lines).

    Raises:
        pydantic.ValidationError: on reading, a text that is not a record (a ``ValueError``).
    """

    __slots__ = ("_texts",)

    def __init__(self, records: Iterable[str] = ()) -> None:
        self._texts: list[str] = list(records)

    def append(self, record: str) -> None:
        """Keep one more record: its JSON text (one object)."""
        self._texts.append(record)

    def __len__(self) -> int:
        return len(self._texts)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            return [Record.model_validate_json(t) for t in self._texts[index]]
        return Record.model_validate_json(self._texts[index])

    def __iter__(self) -> Iterator[Record]:
        for text in self._texts:
            yield Record.model_validate_json(text)

    def may_hold(self, key: str) -> bool:
        r"""Whether some record's text holds the key ``key`` (``"key"``, then a colon after any JSON
        whitespace: an object's key; a key inside a string is escaped, ``\"key\":``, and never
        matches).  ``False`` means no record has that field set, without typing one; ``True`` means
        reading them to know.
        """
        needle = f'"{key}"'
        pattern = re.compile(re.escape(needle) + r"[ \t\r\n]*:")
        return any(needle in text and pattern.search(text) is not None for text in self._texts)

    def to_json(self) -> list[dict[str, Any]]:
        """Every record's JSON object (:meth:`Record.to_json`, a fresh one each call), in arrival order."""
        return [r.to_json() for r in self]
