"""The sequential gates judged again on record logs merged into one report (``tooleffect report LOGS
--baseline FILE --gates FILE``): the shards of a run, or one run's log.

Each block (family × policy) whose gate sets ``sequential`` is judged as a run judges it
(:mod:`.sequential_gate`): its records are paired with the baseline by record id, counted one by one
in a tally, and :func:`~.sequential.settle` is asked on the totals after each; the first verdict is
kept (``regression``; ``no_regression`` beyond the margin; a budget spent first: ``not_settled``).
The records are taken in the order their logs wrote them, which is the order their decisions
completed in (one log of a run at ``-n 0``: exactly the run's order, so the verdict and its counts are
the run's); the shards' logs are interleaved in proportion (the ``k``-th of a shard's ``n`` records at
``k / n``), since the order across shards is not in the records.  Each verdict is one of the test's
stopping times, so its error bounds hold (Ville's inequality, docs/sequential.md).

No verdict on records that lack part of their run (a shard missing) is ``not_yet``: the rest could
settle it; no verdict on a whole run is ``not_settled`` (its items ran out).  Both fail a gate, as a
spent budget does: never a pass.

What the stop saved: the baseline's decisions of a settled block that no log holds a record of were
skipped as settled (their turns never sent), when they are exactly the items the run selected and
did not record (the records' selection stamps say how many); their tokens and dollars are the
baseline's measured spend of the same decisions, as in a run.  The merge is then no shorter than its
run: those items are no gap, and the report stays ``complete``.  A shard whose items were all skipped
wrote no record and cannot be told from a shard that never ran: its items are explained so only when
every settled verdict is a regression (the gates fail anyway), never to make a pass.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pytest_tooleffect.ci.baseline import Baseline
from pytest_tooleffect.ci.gate_rules import GatesConfig, SequentialSpec
from pytest_tooleffect.ci.sequential_gate import TEST_NAME, baseline_spend, block_of, pair_of, settle_tally
from pytest_tooleffect.ci.sequential_state import Tally
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.sequential_model import RunOrder, SequentialBlock, SequentialSection
from pytest_tooleffect.scoring.record import Record

__all__ = ["MergedSequential", "judge_merged", "replay_order"]


@dataclass
class MergedSequential:
    """The ``sequential`` section of a report made from record logs (a report section).

    Attributes:
        data: the section.
        settled_skips: items the run selected and the logs hold no record of, each one a baseline
            decision of a settled block: skipped as settled, no gap.
    """

    data: SequentialSection
    settled_skips: int = 0
    section: Literal["sequential"] = "sequential"

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.sequential``."""
        report.sequential = self.data


def replay_order(records: Sequence[Record]) -> list[Record]:
    """The records in the order the test takes them: each shard's (or the unsharded run's) in the order
    read, the shards interleaved in proportion (the ``k``-th of ``n`` records at ``k / n``; ties by shard).

    Args:
        records: the merged records, in the order their logs were read.

    Returns:
        The same records, reordered.
    """
    parts: dict[int, list[Record]] = {}
    for r in records:
        parts.setdefault(r.shard.index if r.shard else 0, []).append(r)
    keyed = [((k + 1) / len(rs), shard, k, r) for shard, rs in parts.items() for k, r in enumerate(rs)]
    return [r for *_, r in sorted(keyed, key=lambda t: t[:3])]


def _replay(spec: SequentialSpec, records: Sequence[Record]) -> Tally:
    """The block's tally over ``records`` in order, its first verdict kept with the counts it came at."""
    tally = Tally()
    for r in records:
        cost = r.cost
        tally.decisions += 1
        tally.cost_usd += float(cost.cost_usd or 0.0)
        tally.tokens += sum(int(t) for t in (cost.input_tokens, cost.output_tokens) if t is not None)
        pair = pair_of(r)
        if pair is not None:
            tally.pairs += 1
            tally.regressions += pair == "regression"
            tally.improvements += pair == "improvement"
        if tally.verdict is None:
            verdict = settle_tally(spec, tally)
            if verdict is not None:
                tally.verdict, tally.at = verdict, tally.counts()
    return tally


def judge_merged(records: Sequence[Record], gates: GatesConfig, baseline: Baseline, baseline_path: Path, *,
                 unrecorded: int | None, whole: bool, skipped_elsewhere: Set[str] = frozenset()
                 ) -> MergedSequential | None:
    """Judge every sequential gate on merged records (marked against ``baseline`` already).

    Args:
        records: the merged records, in the order read, each with its ``baseline`` mark.
        gates: the gates (``--gates``).
        baseline: the baseline (``--baseline``).
        baseline_path: its file (the record log it was saved from is looked for beside it).
        unrecorded: items the run selected that no log holds a record of (``None``: the records do
            not say what their run selected).
        whole: the logs hold every part of the run (no shard missing).
        skipped_elsewhere: record ids of items skipped for another reason (trials adaptive repeats did not
            need, :mod:`.adaptive_merged`): not this gate's skips, and not in ``unrecorded``.

    Returns:
        The section, or ``None`` when no block of the records has a sequential gate.
    """
    by_block: dict[tuple[str, str], list[Record]] = {}
    for r in replay_order(records):
        by_block.setdefault((r.family, r.policy), []).append(r)
    specs = {k: g.sequential for k in by_block if (g := gates.for_block(*k)).sequential_on and g.sequential}
    if not specs:
        return None
    held: dict[tuple[str, str], set[str]] = {}
    for rid, d in baseline.decisions.items():
        held.setdefault((d.family, d.policy), set()).add(rid)
    tallies = {k: _replay(spec, by_block[k]) for k, spec in specs.items()}
    unmade = {k: sorted(held.get(k, set()) - {r.id for r in by_block[k]} - skipped_elsewhere) for k in specs}
    settled = [k for k, t in tallies.items() if t.verdict in ("regression", "no_regression")]
    skipped = sum(len(unmade[k]) for k in settled)
    # a shard that skipped every item it had wrote no record: missing, it is explained only when the
    # verdicts fail anyway (it cannot be told from a shard that never ran, whose records could hold regressions)
    failing = all(tallies[k].verdict == "regression" for k in settled)
    explained = bool(unrecorded and skipped == unrecorded and (whole or failing))
    spend = baseline_spend(baseline, baseline_path) if explained else {}
    blocks: list[SequentialBlock] = []
    for (family, policy), spec in sorted(specs.items()):
        tally, mine = tallies[(family, policy)], by_block[(family, policy)]
        ids = unmade[(family, policy)] if explained and (family, policy) in settled else []
        block = block_of(family, policy, spec, tally, mine, ids, 0, spend)
        if tally.verdict is None and not whole:
            block.verdict = "not_yet"
            block.why = (f"NOT YET: no verdict after {tally.pairs} paired decisions of logs that lack part of their "
                         "run (a shard missing): the rest could settle it; never a pass")
        blocks.append(block)
    order = RunOrder(order="logs", tiers={}, moved=0)
    data = SequentialSection(test=TEST_NAME, shared="logs", order=order, blocks=blocks)
    return MergedSequential(data=data, settled_skips=skipped if explained else 0)
