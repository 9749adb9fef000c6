"""The run's records as the controller keeps them between their arrival and the report.

A record reaches the controller as its JSON object on the item's test report (made by
:meth:`~pytest_tooleffect.scoring.record.Record.to_json` in the process that ran the item, this
one or an xdist worker); pytest's terminal reporter keeps that report, and the object with it,
to the end of the run.  :class:`RecordStore` keeps a reference to the same object, and makes a
:class:`~pytest_tooleffect.scoring.record.Record` of it each time one is read: every reader
(the report's counting, the plugin's sections, the Markdown and the HTML page) gets typed
records, one at a time, and the run never holds a typed record per item.  A typed record weighs
about three times its JSON object (measured at 10,000 decisions: 7.9 KiB against 2.7 KiB) and
holds several times as many objects for the garbage collector to walk, so a store of typed records made a
run of 50,000 decisions half again as slow as one that kept the JSON objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from pytest_tooleffect.scoring.record import Record

__all__ = ["RecordStore"]


class RecordStore(Sequence[Record]):
    """The records of a run, in the order they arrived: a sequence of
    :class:`~pytest_tooleffect.scoring.record.Record`, each made from its JSON object when read.

    The JSON objects are the records' own (``Record.to_json()``, or a record log's lines), kept as
    given and never changed here: do not change them after handing them over.

    Args:
        records: the records' JSON objects to start with.

    Raises:
        pydantic.ValidationError: on reading, an object that is not a record (a value error).
    """

    __slots__ = ("_json",)

    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self._json: list[Mapping[str, Any]] = list(records)

    def append(self, record: Mapping[str, Any]) -> None:
        """Keep one more record: its JSON object (a record's keys in field order, extra keys after)."""
        self._json.append(record)

    def __len__(self) -> int:
        return len(self._json)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> list[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | list[Record]:
        if isinstance(index, slice):
            return [Record.model_validate(r) for r in self._json[index]]
        return Record.model_validate(self._json[index])

    def __iter__(self) -> Iterator[Record]:
        for r in self._json:
            yield Record.model_validate(r)

    def to_json(self) -> list[dict[str, Any]]:
        """Every record's JSON object, each a fresh copy (what a hook may change), in arrival order."""
        return [r.to_json() for r in self]

