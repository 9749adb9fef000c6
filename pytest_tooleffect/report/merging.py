"""Record logs merged into one report's input: shards, re-runs, a folder of logs.

The step between the record logs and :func:`~pytest_tooleffect.report.summarise` when
``tooleffect report`` is given several logs (or a folder of them).  Nothing is counted twice
and nothing is pooled across label sets:

* a record whose id and trial were already read (a shard re-run, the same log given twice) is
  refused, or, by explicit choice, the first or the last one read is kept and the others are
  counted in ``duplicates_dropped``;
* a case whose label hash differs between logs, or a family whose shards collected different
  label sets (the ``family_fingerprint`` each shard stamps on its records), is refused: the
  shards did not measure one quantity;
* records of different shard counts are refused; when the count is known, the shards with no
  record are listed and the report's status is ``incomplete``;
* logs with no record at all (every shard's run wrote nothing) are refused: a report of nothing
  is not a complete one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_tooleffect.report.record_log import load_records
from pytest_tooleffect.scoring.record import Record

__all__ = ["DUPLICATE_CHOICES", "MergeError", "Merged", "merge_logs", "record_logs"]

DUPLICATE_CHOICES = ("refuse", "first", "last")
Duplicates = Literal["refuse", "first", "last"]


class MergeError(ValueError):
    """The logs cannot be merged into one report (the message names the files, record or family)."""


@dataclass
class Merged:
    """Records of several logs, each once.

    Attributes:
        records: the records kept, in the order read.
        logs: the logs read, in order.
        shard_count: the number of shards the records say the run had, or ``None`` (unsharded).
        shards_merged: the shards with records, sorted.
        shards_missing: the shards with no record, sorted (empty when the count is unknown).
        duplicates_dropped: records left out as repeats (``first`` or ``last``).
    """

    records: list[Record]
    logs: list[Path]
    shard_count: int | None = None
    shards_merged: list[int] = field(default_factory=list)
    shards_missing: list[int] = field(default_factory=list)
    duplicates_dropped: int = 0

    @property
    def status(self) -> Literal["complete", "incomplete"]:
        """``incomplete`` when a shard is missing, else ``complete``."""
        return "incomplete" if self.shards_missing else "complete"


def record_logs(paths: Sequence[Path]) -> list[Path]:
    """The record logs named: files as given, a folder as its ``*.jsonl`` files (sorted, not recursive).

    Raises:
        MergeError: a path that does not exist, or a folder with no ``*.jsonl`` file.
    """
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.glob("*.jsonl") if q.is_file())
            if not found:
                raise MergeError(f"{p}: a folder with no *.jsonl record log")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise MergeError(f"{p}: no such record log or folder")
    return out


def merge_logs(paths: Sequence[Path], duplicates: Duplicates = "refuse") -> Merged:
    """Read record logs and merge them: each record once, one label set per family.

    Args:
        paths: record logs (JSONL), or folders of them.
        duplicates: what to do with a record whose id and trial were already read: ``refuse``
            (an error), keep the ``first`` read, or keep the ``last`` (a shard re-run given after
            the first run).

    Returns:
        The merged records and what was merged.

    Raises:
        MergeError: a log that cannot be read or holds a line that is not a record (names the
            file and line); a repeated record under ``refuse`` (names the record and both files);
            a case with two label hashes, a family with two label-set fingerprints, or two shard
            counts (names the family or case and the files); logs that hold no record at all
            (names them).
    """
    if duplicates not in DUPLICATE_CHOICES:
        raise MergeError(f"duplicates {duplicates!r}: one of {', '.join(DUPLICATE_CHOICES)}")
    logs = record_logs(paths)
    kept: dict[tuple[str, int], tuple[Record, Path]] = {}
    dropped = 0
    labels: dict[tuple[str, str], tuple[str, Path]] = {}
    fingerprints: dict[str, tuple[str, Path]] = {}
    counts: dict[int, Path] = {}
    shards: set[int] = set()
    for log in logs:
        try:
            records = load_records(log)
        except (OSError, ValueError) as exc:
            raise MergeError(f"{log}: {exc}") from exc
        for r in records:
            _check_shard(r, log, fingerprints, counts, shards)  # one run first: then a repeat is a repeat
            key = (r.id, r.trial or 1)
            seen = kept.get(key)
            if seen is not None:
                if duplicates == "refuse":
                    where = f"twice in {log}" if seen[1] == log else f"in {seen[1]} and {log}"
                    raise MergeError(f"record {key[0]} (trial {key[1]}) is {where}: a repeated record would be "
                                     "counted twice; pass --duplicates first or last to keep one")
                dropped += 1
                if duplicates == "first":
                    continue
            _check_label(r, log, labels)
            kept[key] = (r, log)
    if not kept:  # nothing read: a report of no item would say "complete" about a run that left no trace
        named = ", ".join(map(str, logs[:3])) + (f" and {len(logs) - 3} more" if len(logs) > 3 else "")
        raise MergeError(f"no record in {named}: nothing to report (every log is empty; did the runs "
                         "that wrote them collect or finish any item?)")
    merged = Merged(records=[r for r, _ in kept.values()], logs=logs, duplicates_dropped=dropped)
    n = next(iter(counts), 0)
    if n:
        merged.shard_count = n
        merged.shards_merged = sorted(shards)
        merged.shards_missing = [i for i in range(1, n + 1) if i not in shards]
    return merged


def _check_label(r: Record, log: Path, labels: dict[tuple[str, str], tuple[str, Path]]) -> None:
    key = (r.family, r.case_id)
    first = labels.setdefault(key, (r.label_hash, log))
    if first[0] != r.label_hash:
        raise MergeError(f"family {key[0]}, case {key[1]}: label hash {first[0]} in {first[1]} but {r.label_hash} "
                         f"in {log}: the logs scored different labels and are not one run")


def _check_shard(r: Record, log: Path, fingerprints: dict[str, tuple[str, Path]],
                 counts: dict[int, Path], shards: set[int]) -> None:
    shard = r.shard
    n = shard.count if shard else 0  # 0: a run that was not sharded
    other = next(iter(counts), None)
    if other is not None and other != n:
        def run(k: int) -> str:
            return f"a run of {k} shards" if k else "an unsharded run"
        raise MergeError(f"{log}: record {r.id} is from {run(n)}, {counts[other]} from {run(other)}: merge the "
                         "shards of one run only")
    counts.setdefault(n, log)
    if not shard:
        return
    shards.add(shard.index)
    fp = shard.family_fingerprint
    if fp is not None:
        first = fingerprints.setdefault(r.family, (fp, log))
        if first[0] != fp:
            raise MergeError(f"family {r.family}: label-set fingerprint {first[0]} in {first[1]} but {fp} in "
                             f"{log}: the shards collected different cases or labels")
