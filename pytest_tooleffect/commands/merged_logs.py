"""The one way the commands that read record logs check them as one run: ``report``, ``html``,
``baseline save`` and ``plan`` go through :func:`merge_or_refuse`, so a log that ``report`` refuses
(two runs joined, two policies under one name, a record twice) is refused by each of them in the
same words and with the same exit status, and a log that lacks part of its run (a shard missing,
a run cut short) is called ``incomplete`` by each of them.

The checks themselves are :func:`pytest_tooleffect.report.merging.merge_logs`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_tooleffect.util.display import shown

if TYPE_CHECKING:
    from pytest_tooleffect.report.assembly import ShardSection
    from pytest_tooleffect.report.merging import Duplicates, Merged
    from pytest_tooleffect.scoring.record import Record

__all__ = ["against_cases", "log_run", "merge_or_refuse", "run_lacks", "say_merged", "shard_section"]


def merge_or_refuse(command: str, paths: Sequence[Path], duplicates: Duplicates | None = "refuse",
                    read: Callable[[Path], list[Record]] | None = None) -> Merged | None:
    """The record logs ``paths`` merged as one run (:func:`~pytest_tooleffect.report.merging.merge_logs`),
    or ``None`` when they are not one run: then the reason is said on stderr in one line,
    ``tooleffect COMMAND: …`` (the file, the record and what differs), and the command exits 2.

    Args:
        command: the command's name as the user typed it (``report``, ``html``, ``baseline save``).
        paths: the record logs (or folders of them).
        duplicates: a record (id and trial) read twice: ``refuse``, keep the ``first`` or the ``last``;
            ``None``: refused, by a command that has no ``--duplicates`` (its refusal does not name it).
        read: how a log's records are read, when the caller read them already (a pipe cannot be
            read twice); default the log's file.

    Returns:
        The merge, or ``None`` when it was refused.
    """
    from pytest_tooleffect.report.merging import DUPLICATES_HINT, MergeError, merge_logs

    how = duplicates or "refuse"
    try:
        return merge_logs(paths, how) if read is None else merge_logs(paths, how, read=read)
    except MergeError as exc:
        said = str(exc)
        if duplicates is None and said.endswith(DUPLICATES_HINT):  # one run's records hold each decision once
            said = said.removesuffix(DUPLICATES_HINT) + "; one run's records hold each decision once"
        print(shown(f"tooleffect {command}: {said}", limit=None), file=sys.stderr)
        return None


def shard_section(merged: Merged, settled: int = 0) -> ShardSection | None:
    """The report's ``shards`` and ``selection`` sections of a merge (``None`` when the records say
    neither): the shards merged and missing, what the run selected and how much of it has a record.

    Args:
        merged: the merge.
        settled: items a gate or adaptive repeats skipped as settled (no gap).
    """
    from pytest_tooleffect.report.assembly import ShardSection
    from pytest_tooleffect.report.run_model import MergedSelection, MergedShards, ShortPart

    records = merged.records
    shards = None if merged.shard_count is None else MergedShards(
        count=merged.shard_count, merged=merged.shards_merged, missing=merged.shards_missing,
        empty=merged.shards_empty,
        logs=[str(p) for p in merged.logs], duplicates_dropped=merged.duplicates_dropped)
    sel = merged.selection
    selection = None if sel is None else MergedSelection(
        collected=sel.collected, selected=sel.run_count, digest=sel.run_digest, recorded=len(records),
        not_recorded=max(sel.run_count - len(records), 0), settled=settled,
        short=[ShortPart(shard=p.shard, selected=p.selected, recorded=p.recorded) for p in merged.short])
    if shards is None and selection is None:
        return None
    return ShardSection(merged=shards, selection=selection)


def say_merged(command: str, merged: Merged, duplicates: str) -> int:
    """Say on stderr what the merge left out (repeated records, ``--duplicates``) and what the logs
    lack of their run, one line each (``tooleffect COMMAND: incomplete: shard 2 of 2 missing …``).

    Returns:
        1 when the merge is ``incomplete`` (a report of part of a run never passes for the whole), else 0.
    """
    if merged.duplicates_dropped:
        print(f"tooleffect {command}: {merged.duplicates_dropped} repeated records left out (--duplicates "
              f"{duplicates})", file=sys.stderr)
    for problem in merged.problems():  # the report says it too (shards.missing, selection.short)
        print(shown(f"tooleffect {command}: incomplete: {problem}", limit=None), file=sys.stderr)
    return 1 if merged.status == "incomplete" else 0


def run_lacks(command: str, path: Path, records: list[Any], unstamped: bool = True) -> list[str] | int:
    """What the run of the record log ``path`` (its ``records``, read already) lacks to be complete, as
    ``tooleffect report`` says it (shards missing, items without a record), one line each; an exit
    status (2) when its records are not parts of one run (said on stderr by :func:`merge_or_refuse`).
    Records that do not say what their run selected (written by hand, or by an earlier tooleffect)
    cannot be checked: said on stderr, not refused.

    Args:
        command: the command's name (``baseline save``, ``plan``).
        path: the record log.
        records: its records (JSON objects, or :class:`~pytest_tooleffect.scoring.record.Record`).
        unstamped: say on stderr that records without a selection stamp cannot be checked.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.report.merging import UNSTAMPED
    from pytest_tooleffect.scoring.record import Record

    try:
        checked = [r if isinstance(r, Record) else Record.model_validate(r) for r in records]
    except ValidationError:  # read as a baseline's records only (BaselineDecision): not checkable as a run
        checked = []
    if not checked or any(r.selection is None for r in checked):
        if unstamped:
            print(shown(f"tooleffect {command}: {path}: {UNSTAMPED}", limit=None), file=sys.stderr)
        return []
    merged = merge_or_refuse(command, [path], None, read=lambda _: checked)
    return 2 if merged is None else merged.problems()


def log_run(command: str, path: Path, unstamped: bool = True) -> tuple[list[Any], list[str]] | int:
    """A file given where a record log or a baseline is read (``plan``, ``compare``): when it is a
    record log, its records and what its run lacks (:func:`run_lacks`, ``unstamped`` as there), checked
    before it is read as a run; ``([], [])`` when it is not a record log (a baseline file, read and
    checked by its own reader); the exit status 2 when its records are not one run (said on stderr as
    ``report`` says it).
    """
    from pytest_tooleffect.report.record_log import looks_like_record, read_records

    try:
        records = read_records(path)
    except (OSError, ValueError):  # not a record log (a baseline file): its reader reads it, or names why not
        return [], []
    if not records or not looks_like_record(records[0]):  # a baseline or a report on one line: not a log
        return [], []
    lacks = run_lacks(command, path, records, unstamped)
    return lacks if isinstance(lacks, int) else (records, lacks)


def against_cases(command: str, root: Path, records: Sequence[Any], what: str = "record") -> int | None:
    """Check what records say of their labels against the cases under ``root`` (``--cases``;
    :mod:`pytest_tooleffect.report.case_labels`): a class its label's digest contradicts is refused
    (each such record named on stderr), records whose label changed since the run are said in one line.

    Args:
        command: the command's name (``report``, ``html``, ``baseline save``).
        root: the folder of the families.
        records: :class:`~pytest_tooleffect.scoring.record.Record` objects or records' JSON objects.
        what: what the lines call an entry (``record``, ``the baseline's decision``).

    Returns:
        2 when a record is refused, else ``None``.
    """
    from pytest_tooleffect.report.case_labels import RecordLabel, case_labels, label_mismatches

    rows = []
    for r in records:
        if isinstance(r, dict):
            rows.append(RecordLabel(str(r["id"]), str(r["family"]), str(r["case_id"]), str(r["class"]),
                                    str(r["label_hash"]), r.get("perturbation") is not None))
        else:
            rows.append(RecordLabel(r.id, r.family, r.case_id, r.label_class, r.label_hash, r.perturbation is not None))
    refused, changed = label_mismatches(rows, case_labels(root, {(r.family, r.case_id) for r in rows}), root, what)
    for line in refused[:5]:
        print(shown(f"tooleffect {command}: {line}"), file=sys.stderr)
    if refused:
        if len(refused) > 5:
            print(f"tooleffect {command}: and {len(refused) - 5} more whose class is not their label's",
                  file=sys.stderr)
        return 2
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        print(shown(f"tooleffect {command}: the label hash of {len(changed)} ({what}s) is not their case's under "
                    f"{root} ({', '.join(changed[:3])}{more}): the labels changed since the run, or they were "
                    "edited; their class is taken as written"), file=sys.stderr)
    return None
