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
  record are listed and the report's status is ``incomplete``, unless the run's selection says
  they selected no item (the run's count less the present shards' counts is 0): nothing of them
  is missing, and they are listed apart (``shards_empty``);
* every record says what its run selected (its ``selection``: the count and digest of the items
  its shard, or the unsharded run, selected, and of the whole run's selection) and what its
  family was scored under (``fingerprints``: labels and oracle rules).  Records of runs that
  selected different items (two partial ``-k`` runs) or of a family under other rules are
  refused: they are not parts of one run.  A shard (or an unsharded run) with fewer records than
  it selected (a run killed part way, items skipped) makes the report ``incomplete``, and
  :meth:`Merged.problems` says which part lacks how many;
* records that do not say what their run selected (a log of an earlier tooleffect, or one written
  by hand) make the report ``incomplete`` too: that every item has a record cannot be known, and
  :meth:`Merged.problems` says so;
* records of one policy name whose policies differ (``policy_identity``: another agent callable,
  model, api base or settings under the same name) are refused, naming both: the logs did not
  measure one policy;
* logs with no record at all (every shard's run wrote nothing) are refused: a report of nothing
  is not a complete one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_tooleffect.report.record_log import load_records, not_a_record_log
from pytest_tooleffect.scoring.record import PolicyIdentity, Record, SelectionRecord
from pytest_tooleffect.util.input_files import empty_pipe, not_an_input

__all__ = ["DUPLICATES_HINT", "DUPLICATE_CHOICES", "UNSTAMPED", "MergeError", "Merged", "ShortPart", "merge_logs",
           "policy_clash", "record_logs"]

DUPLICATE_CHOICES = ("refuse", "first", "last")
#: the problem line of logs whose records do not say what their run selected
UNSTAMPED = ("the records do not say what their run selected (no selection stamp: a log of an earlier tooleffect, "
             "or written by hand): whether every selected item has a record cannot be checked, so the report is "
             "not called complete")
Duplicates = Literal["refuse", "first", "last"]
#: how a repeated record's refusal ends: the option of ``tooleffect report`` (and ``html``) that keeps one
DUPLICATES_HINT = "; pass --duplicates first or last to keep one"


class MergeError(ValueError):
    """The logs cannot be merged into one report (the message names the files, record or family)."""


@dataclass(frozen=True)
class ShortPart:
    """A part of the run (a shard, or the unsharded run) whose logs hold fewer records than it selected.

    Attributes:
        shard: the shard, or ``None`` for an unsharded run.
        count: how many shards the run had (``None`` unsharded).
        selected: the case items the part selected.
        recorded: the records the logs hold of it (each item once).
    """

    shard: int | None
    count: int | None
    selected: int
    recorded: int

    @property
    def line(self) -> str:
        """``shard 3/4: 10 of 76 selected items have a record (66 missing)``."""
        part = f"shard {self.shard}/{self.count}: " if self.shard is not None else ""
        lost = self.selected - self.recorded
        return (f"{part}{self.recorded} of {self.selected} selected items have a record ({lost} missing: a run "
                "cut short, or items skipped, invalid or failed outside a record)")


@dataclass
class Merged:
    """Records of several logs, each once.

    Attributes:
        records: the records kept, in the order read.
        logs: the logs read, in order.
        shard_count: the number of shards the records say the run had, or ``None`` (unsharded).
        shards_merged: the shards with records, sorted.
        shards_missing: the shards with no record, sorted (empty when the count is unknown), less
            the shards that selected no item.
        shards_empty: the shards with no record that selected no item (the run's selection less the
            present shards' is 0), sorted: nothing of the run is missing with them.
        duplicates_dropped: records left out as repeats (``first`` or ``last``).
        selection: what the run selected, as its records say (``None`` when they do not: logs written
            before records said it; then whether every item has a record is not known).
        short: the parts of the run with fewer records than they selected, by shard.
        missing_selected: the items the missing shards selected (the run's selection less the
            present shards'), when the records say what the run selected.
    """

    records: list[Record]
    logs: list[Path]
    shard_count: int | None = None
    shards_merged: list[int] = field(default_factory=list)
    shards_missing: list[int] = field(default_factory=list)
    shards_empty: list[int] = field(default_factory=list)
    duplicates_dropped: int = 0
    selection: SelectionRecord | None = None
    short: list[ShortPart] = field(default_factory=list)
    missing_selected: int | None = None

    @property
    def status(self) -> Literal["complete", "incomplete"]:
        """``incomplete`` when a shard is missing, a part of the run has fewer records than it
        selected, or the records do not say what their run selected (logs of an earlier tooleffect,
        or written by hand: whether every item has a record cannot be known); else ``complete``.
        """
        return "incomplete" if self.shards_missing or self.short or self.selection is None else "complete"

    def problems(self) -> list[str]:
        """One line per thing the logs lack (empty when the merge is complete): the missing shards,
        in runs of shards, with the items they selected; each part short of records.
        """
        out = []
        missing = self.shards_missing
        if missing:
            from pytest_tooleffect.report.terminal import shard_ranges

            items = (f" ({self.missing_selected} of the run's {self.selection.run_count} selected items)"
                     if self.selection is not None and self.missing_selected is not None else "")
            out.append(f"shard{'s' if len(missing) > 1 else ''} {shard_ranges(missing)} of {self.shard_count} "
                       f"missing{items}")
        out += [p.line for p in self.short]
        if self.selection is None:
            out.append(UNSTAMPED)
        return out


def record_logs(paths: Sequence[Path]) -> list[Path]:
    """The record logs named: files as given, a folder as its ``*.jsonl`` files (sorted, not recursive).

    A pipe (``/dev/stdin`` fed by a pipe, a shell's ``<(…)``) is a record log as a file is.

    Raises:
        MergeError: a path that does not exist, a folder with no ``*.jsonl`` file, or something that
            is neither a file, a pipe nor a folder (a device, a socket).
    """
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.glob("*.jsonl") if q.is_file())
            if not found:
                raise MergeError(f"{p}: a folder with no *.jsonl record log")
            out += found
            continue
        why = not_an_input(p)
        if why == "no such file":
            raise MergeError(f"{p}: no such record log or folder")
        if why is not None:
            raise MergeError(f"{p}: {why}: a record log (JSONL), a pipe or a folder of logs")
        out.append(p)
    return out


def merge_logs(paths: Sequence[Path], duplicates: Duplicates = "refuse",
               read: Callable[[Path], list[Record]] = load_records) -> Merged:
    """Read record logs and merge them: each record once, one label set per family.

    Args:
        paths: record logs (JSONL), or folders of them.
        duplicates: what to do with a record whose id and trial were already read: ``refuse``
            (an error), keep the ``first`` read, or keep the ``last`` (a shard re-run given after
            the first run).
        read: how a log's records are read (default :func:`load_records`; a caller that read a pipe
            already gives what it read).

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
    run = _OneRun()
    policies: dict[str, tuple[PolicyIdentity, Path]] = {}
    for log in logs:
        try:
            records = read(log)
        except (OSError, ValueError) as exc:
            raise MergeError(f"{log}: {not_a_record_log(log) or exc}") from exc
        for r in records:
            _check_shard(r, log, fingerprints, counts, shards)  # one run first: then a repeat is a repeat
            run.check(r, log)
            check_policy(r, log, policies)
            key = (r.id, r.trial or 1)
            seen = kept.get(key)
            if seen is not None:
                if duplicates == "refuse":
                    where = f"twice in {log}" if seen[1] == log else f"in {seen[1]} and {log}"
                    raise MergeError(f"record {key[0]} (trial {key[1]}) is {where}: a repeated record would be "
                                     f"counted twice{DUPLICATES_HINT}")
                dropped += 1
                if duplicates == "first":
                    continue
            _check_label(r, log, labels)
            kept[key] = (r, log)
    if not kept:  # nothing read: a report of no item would say "complete" about a run that left no trace
        named = ", ".join(map(str, logs[:3])) + (f" and {len(logs) - 3} more" if len(logs) > 3 else "")
        pipes = [said for said in map(empty_pipe, logs) if said]
        why = pipes[0] if len(pipes) == len(logs) else (" (every log is empty; did the runs that wrote them "
                                                        "collect or finish any item?)")
        raise MergeError(f"no record in {named}: nothing to report{why}")
    merged = Merged(records=[r for r, _ in kept.values()], logs=logs, duplicates_dropped=dropped)
    n = next(iter(counts), 0)
    if n:
        merged.shard_count = n
        merged.shards_merged = sorted(shards)
        merged.shards_missing = [i for i in range(1, n + 1) if i not in shards]
    run.account(merged)
    return merged


class _OneRun:
    """Checks that every record read is of one run (one selection, one set of rules per family),
    then accounts for the run's selection in the records kept.
    """

    def __init__(self) -> None:
        self.first: tuple[Record, Path] | None = None
        self.parts: dict[int, SelectionRecord] = {}
        self.labels: dict[str, tuple[str, Path]] = {}
        self.rules: dict[str, tuple[str, Path]] = {}

    def check(self, r: Record, log: Path) -> None:
        """Refuse a record whose run selected other items than the first record's, or whose family
        was scored under other labels or rules (names both logs).
        """
        if self.first is None:
            self.first = (r, log)
        first, first_log = self.first
        if (r.selection is None) != (first.selection is None):
            said, silent = ((r.id, log), (first.id, first_log)) if r.selection else ((first.id, first_log), (r.id, log))
            raise MergeError(f"record {said[0]} in {said[1]} says what its run selected and record {silent[0]} in "
                             f"{silent[1]} does not (written by an earlier tooleffect): not one run")
        sel, fsel = r.selection, first.selection
        if sel is not None and fsel is not None and (sel.run_count, sel.run_digest, sel.collected) != (
                fsel.run_count, fsel.run_digest, fsel.collected):
            raise MergeError(f"{log}: record {r.id} is from a run that selected {_selected(sel)}, {first_log}: "
                             f"record {first.id} from one that selected {_selected(fsel)}: the logs are not parts of "
                             "one run (another -k, -m or --lf, other cases or policies); merge the logs of one run "
                             "only, or run the missing items as a shard of it")
        if sel is not None:
            self.parts.setdefault(r.shard.index if r.shard else 0, sel)
        fp = r.fingerprints
        if fp is None:
            return
        for what, seen, value in (("label-set", self.labels, fp.labels), ("oracle rules", self.rules, fp.rules)):
            was = seen.setdefault(r.family, (value, log))
            if was[0] != value:
                why = ("collected different cases or labels" if what == "label-set"
                       else "scored under different oracle rules or tool schemas")
                raise MergeError(f"family {r.family}: {what} fingerprint {was[0]} in {was[1]} but {value} in {log}: "
                                 f"the runs {why}; not one run")

    def account(self, merged: Merged) -> None:
        """Fill ``merged.selection``, ``short`` and ``missing_selected`` from the records kept."""
        if self.first is None or self.first[0].selection is None:
            return
        merged.selection = self.first[0].selection
        recorded: dict[int, int] = {}
        for r in merged.records:
            part = r.shard.index if r.shard else 0
            recorded[part] = recorded.get(part, 0) + 1
        merged.short = [ShortPart(part or None, merged.shard_count, sel.count, recorded.get(part, 0))
                        for part, sel in sorted(self.parts.items()) if recorded.get(part, 0) < sel.count]
        merged.missing_selected = merged.selection.run_count - sum(sel.count for sel in self.parts.values())
        if merged.missing_selected == 0:  # the shards with no record selected nothing: none is missing
            merged.shards_empty, merged.shards_missing = merged.shards_missing, []


def _selected(sel: SelectionRecord) -> str:
    return f"{sel.run_count} of {sel.collected} case items collected (selection {sel.run_digest})"


def check_policy(r: Record, log: Path, seen: dict[str, tuple[PolicyIdentity, Path]]) -> None:
    """Refuse a record whose policy differs from the one an earlier record of the same policy name
    was made by (names both policies and both logs).  Records that do not say (logs of an earlier
    tooleffect) are not checked.

    Args:
        r: the record.
        log: the log it was read from.
        seen: the first identity read per policy name, and its log (filled in).

    Raises:
        MergeError: the policy name was used by another policy.
    """
    ident = r.policy_identity
    if ident is None:
        return
    first, first_log = seen.setdefault(r.policy, (ident, log))
    if first.digest == ident.digest:
        return
    raise MergeError(policy_clash(r.policy, (first.spec, first.digest), first_log, (ident.spec, ident.digest), log)
                     + "; the logs are not one run (merge the logs of one policy, or give the other one its own name)")


def policy_clash(policy: str, first: tuple[str, str], first_log: Path | str, ident: tuple[str, str],
                 log: Path | str) -> str:
    """``policy NAME: SPEC (DIGEST) in LOG but SPEC [with other settings] (DIGEST) in LOG: one policy
    name, two policies``: how every command that reads runs of one policy says that two of them are
    runs of two policies under one name (each identity a ``(spec, digest)`` pair, as a record's
    ``policy_identity`` has it).
    """
    how = "" if first[0] != ident[0] else " with other settings"
    return (f"policy {policy}: {first[0]} ({first[1]}) in {first_log} but {ident[0]}{how} ({ident[1]}) in {log}: "
            "one policy name, two policies")


def _check_label(r: Record, log: Path, labels: dict[tuple[str, str], tuple[str, Path]]) -> None:
    # a perturbed-catalog variant scores its own label (and catalog): checked against the same variant's
    key = (r.family, r.case_id if r.perturbation is None else f"{r.case_id}[+{r.perturbation.name}]")
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
