"""The sequential gate at run time: decided as paired decisions complete, it stops the run's spending
once its verdict is settled.

A block (family × policy) whose gates set ``sequential`` (:class:`~.gate_rules.SequentialSpec`) is
judged by the anytime-valid paired test of :mod:`.sequential` on the decisions paired with the
baseline by record id: each decision a process scores is counted in the run's shared tally
(:mod:`.sequential_state`: this process's file, the file its xdist workers share, or Redis across
shards), and :func:`~.sequential.settle` is asked on the totals.  Its first verdict is kept
(``regression``, or ``no_regression`` beyond the margin); a budget (decisions or USD) spent first
ends the block as ``not_settled``.  From then on the block's items are skipped in their setup, before
their fixtures and before any model turn is sent (a turn queued ahead is withdrawn): reason
``settled`` (or :data:`~pytest_tooleffect.outcomes.SETTLE_BUDGET` after a budget), neither failed
nor passed, and a ``settled`` skip leaves the report ``complete``.

On the controller the report's ``sequential`` section (:mod:`pytest_tooleffect.report.sequential_model`)
says each gate's verdict, when it came, and what the stop saved against the full run: the items
skipped as settled, their tokens and dollars estimated from the baseline's measured spend of the
same decisions where it has one, else from this run's mean per decision of the block.  The gate
keeper (:mod:`.gate_keeper`) turns each verdict into a gate result (:func:`judge_sequential`):
regression fails, no regression passes, not settled fails (never a pass).

Items run in the order that settles sooner without biasing the test (:mod:`pytest_tooleffect.collect.order`)
when a baseline is given.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.ci.baseline import Baseline
from pytest_tooleffect.ci.gate_rules import GatesConfig, SequentialSpec, gates_of
from pytest_tooleffect.ci.sequential_state import (
    RedisSettleStore,
    SettleStore,
    SettleStoreError,
    SqliteSettleStore,
    Tally,
)
from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.collect.order import informative_first
from pytest_tooleffect.decide.ratelimit import private_state_dir
from pytest_tooleffect.decide.stopping import stop_key
from pytest_tooleffect.options import INI_RATE_BACKEND, OPT_SETTLE_KEY
from pytest_tooleffect.outcomes import SETTLE_BUDGET, SETTLED
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.sequential_model import (
    RunOrder,
    SavedSpend,
    SequentialBlock,
    SequentialSection,
    Verdict,
)
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.settings import Settings, settings_key

if TYPE_CHECKING:
    from pytest_tooleffect.ci.sequential import SequentialDesign

__all__ = ["PAIRED", "TEST_NAME", "SequentialGate", "baseline_spend", "block_of", "design_of", "judge_sequential",
           "pair_of", "sequential_on", "settle_tally"]

#: the test, as the report names it (the method and its source: the documentation's sequential page)
TEST_NAME = "anytime-valid paired test on the discordant pairs (pytest_tooleffect.ci.sequential.settle)"
#: measured spend by record id: (USD, input + output tokens), each ``None`` when not measured
Spend = dict[str, tuple[float | None, int | None]]
#: a record's ``baseline.status`` → what the pair counts as
PAIRED = {"regression": "regression", "fixed": "improvement", "known": "same", "changed": "same", "passing": "same"}


def sequential_on(gates: GatesConfig | None) -> bool:
    """Some table of ``[tool.tooleffect.gates]`` sets a sequential gate."""
    return gates is not None and any(t.sequential_on for t in gates.tables.values())


def design_of(spec: SequentialSpec) -> SequentialDesign:
    """The test's design from a gate's ``sequential`` table (unset keys: :class:`SequentialDesign`'s defaults;
    ``budget_decisions`` is the design's ``max_pairs``).
    """
    from pytest_tooleffect.ci.sequential import SequentialDesign  # numpy: only in runs with a sequential gate

    defaults = SequentialDesign()
    budget = spec.budget_decisions if isinstance(spec.budget_decisions, int) else None
    return SequentialDesign(alpha=defaults.alpha if spec.alpha is None else spec.alpha,
                            margin=defaults.margin if spec.margin is None else spec.margin,
                            beta=defaults.beta if spec.beta is None else spec.beta,
                            effect=defaults.effect if spec.effect is None else spec.effect,
                            max_pairs=budget, discordance=spec.discordance)


def pair_of(record: Record) -> str | None:
    """What a record counts as in the paired test: ``regression``, ``improvement``, ``same``, or ``None``
    (not paired: an error, a new case, a changed label).
    """
    if record.outcome != "scored" or record.baseline is None:
        return None
    return PAIRED.get(record.baseline.status)


def _spent(record: Record) -> tuple[float, int]:
    cost = record.cost
    tokens = sum(int(t) for t in (cost.input_tokens, cost.output_tokens) if t is not None)
    return float(cost.cost_usd or 0.0), tokens


class SequentialGate:
    """The plugin object of the sequential gates (built at configure time on the controller and on
    each xdist worker, when some gate table sets ``sequential``).

    Args:
        config: pytest's config.
        baseline: the run's baseline, or ``None`` (the gates are then NOT JUDGED: nothing is paired).

    Raises:
        pytest.UsageError: a sharded run with a Redis backend gives no ``--tooleffect-settle-key``.
    """

    section: Literal["sequential"] = "sequential"

    def __init__(self, config: pytest.Config, baseline: Baseline | None) -> None:
        self.config = config
        self.settings: Settings = config.stash[settings_key]
        gates = gates_of(self.settings)
        assert gates is not None
        self.gates = gates
        self.baseline = baseline
        self.specs: dict[tuple[str, str], SequentialSpec | None] = {}
        self.state_dir: Path | None = None
        self.order = RunOrder(order="collection", tiers={}, moved=0)
        self.section_data: SequentialSection | None = None
        self.shared: Literal["process", "file", "redis"] = "process"
        #: by family × policy, the ids of items skipped per reason (settled, budget)
        self.skipped: dict[tuple[str, str], dict[str, list[str]]] = {}
        #: by block, the first failure of the shared store this process met
        self.tally_errors: dict[str, str] = {}
        #: the blocks' verdicts this process has read (set once in the store, never changed)
        self.verdicts: dict[str, str] = {}
        #: ``-p no:tooleffect-gates``: the gates judge nothing, so no verdict stops the run
        self.gates_off = config.pluginmanager.is_blocked("tooleffect-gates")
        #: the baseline's measured spend per decision (read once, on the controller, when something was saved)
        self.spend: Spend | None = None
        settings = self.settings
        workerinput = getattr(config, "workerinput", None)
        if settings.rate_backend is not None and settings.settle_key is not None:
            self.store: SettleStore = RedisSettleStore(settings.rate_backend, settings.settle_key)
            self.shared = "redis"
        elif settings.shard is not None and settings.rate_backend is not None:
            raise pytest.UsageError(f"{OPT_SETTLE_KEY}: a sharded run with sequential gates and ini {INI_RATE_BACKEND} "
                                    "needs a key every shard of the run gives (e.g. the CI's run id and attempt), "
                                    "so that its shards stop together")
        elif workerinput is not None and wire.WORKER_SETTLE_STATE in workerinput:
            self.store = SqliteSettleStore(Path(workerinput[wire.WORKER_SETTLE_STATE]))
            self.shared = "file"
        else:
            self.state_dir = private_state_dir()
            self.store = SqliteSettleStore(self.state_dir / "settle.sqlite")
            self.shared = "file" if getattr(config.option, "numprocesses", None) else "process"
        config.stash[stop_key] = self.stop

    # ------------------------------------------------------------------ per block

    def spec(self, family: str, policy: str) -> SequentialSpec | None:
        """The block's sequential gate, or ``None``."""
        key = (family, policy)
        if key not in self.specs:
            gates = self.gates.for_block(family, policy)
            self.specs[key] = gates.sequential if gates.sequential_on else None
        return self.specs[key]

    def stop(self, item: CaseItem) -> str | None:
        """Why the item's decision need not be made: :data:`SETTLED`, :data:`SETTLE_BUDGET`, or ``None``."""
        if self.baseline is None or self.gates_off or self.spec(item.family.name, item.policy.name) is None:
            return None
        block = f"{item.family.name}/{item.policy.name}"
        verdict = self.verdicts.get(block)
        if verdict is None:
            try:
                verdict = self.store.read(block).verdict
            except SettleStoreError:  # the store's failure shows when the decision is counted
                return None
            if verdict is None:
                return None
            self.verdicts[block] = verdict  # a verdict is set once: never asked again
        return SETTLE_BUDGET if verdict == "not_settled" else SETTLED

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip a settled block's item before its fixtures and its model turn (a turn queued ahead is
        withdrawn; one whose answer is already back is scored, as it was paid for).
        """
        if not isinstance(item, CaseItem):
            return
        reason = self.stop(item)
        if reason is None:
            return
        turns = self.config.pluginmanager.get_plugin("tooleffect-model-turns")
        if turns is None or turns.withdraw(item):
            pytest.skip(reason)

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Count the record in its block's tally and settle the block when the test says so (a record
        section, after the baseline's: it reads ``record.baseline``).

        A store that fails keeps the record as it is; the block's gate is then NOT SETTLED on this
        process's report (the controller's), never a pass.
        """
        spec = self.spec(record.family, record.policy)
        if spec is None or self.baseline is None:
            return
        block = f"{record.family}/{record.policy}"
        cost_usd, tokens = _spent(record)
        try:
            tally = self.store.add(block, pair=pair_of(record), cost_usd=cost_usd, tokens=tokens)
            if tally.verdict is None:
                verdict = settle_tally(spec, tally)
                if verdict is not None:
                    self.store.settle(block, verdict, tally)
        except SettleStoreError as exc:  # the record stands; the gate cannot settle on a tally that lost it
            self.tally_errors.setdefault(block, f"{record.id}: {exc}")

    # ------------------------------------------------------------------ order

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Run the case items in the order that settles sooner without biasing the test
        (:func:`~pytest_tooleffect.collect.order.informative_first`: cases discordant among the baseline's
        trials first, every prefix stratified by class and baseline pass or fail), in the places case
        items held (other tests keep theirs); node ids unchanged.
        """
        if self.baseline is None:
            return
        where = [i for i, it in enumerate(items) if isinstance(it, CaseItem)]
        cases = [items[i] for i in where]
        baseline = self.baseline
        discordant = _discordant(baseline)
        seed = baseline.created + "|" + ",".join(g.label_set_fingerprint for g in baseline.groups)
        done = informative_first(cases, lambda it: "discordant" if _case_key(it) in discordant else "rest",
                                 lambda it: _stratum(it, baseline), seed)
        for pos, i in zip(where, done.order, strict=True):
            items[pos] = cases[i]
        self.order = RunOrder(order="informative-first", tiers=done.tiers, moved=done.moved)
        output: Any = getattr(config, "workeroutput", None)
        if output is not None:  # the xdist controller collects nothing: it learns the order from here
            output[wire.WORKER_ORDER] = self.order.model_dump(mode="json")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        sent = getattr(node, "workeroutput", {}).get(wire.WORKER_ORDER)
        if sent is not None and self.order.order == "collection":
            self.order = RunOrder.model_validate(sent)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """On the xdist controller: hand each worker the tally file."""
        if isinstance(self.store, SqliteSettleStore):
            node.workerinput[wire.WORKER_SETTLE_STATE] = str(self.store.path)

    # ------------------------------------------------------------------ report

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.sequential`` (a report section, on the controller)."""
        blocks = []
        keys = sorted({(b.family, b.policy) for b in report.blocks} | set(self.skipped))
        for family, policy in keys:
            spec = self.spec(family, policy)
            if spec is None or self.baseline is None:
                continue
            failed = self.tally_errors.get(f"{family}/{policy}")
            try:
                tally = self.store.read(f"{family}/{policy}")
            except SettleStoreError as exc:
                tally, failed = Tally(), failed or str(exc)
            mine = [r for r in records if (r.family, r.policy) == (family, policy)]
            skips = self.skipped.get((family, policy), {})
            settled_ids = sorted(skips.get(SETTLED, []))
            budget_n = len(skips.get(SETTLE_BUDGET, []))
            if self.spend is None and settled_ids:
                self.spend = baseline_spend(self.baseline, self.settings.baseline or Path("."))
            block = block_of(family, policy, spec, tally, mine, settled_ids, budget_n, self.spend or {})
            if failed is not None:  # a tally that lost decisions settles nothing
                block.verdict = "not_settled"
                block.why = f"NOT SETTLED: the shared tally failed ({failed}); never a pass"
            blocks.append(block)
        self.section_data = SequentialSection(test=TEST_NAME, shared=self.shared, order=self.order, blocks=blocks)
        report.sequential = self.section_data

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the ids of the items skipped as settled or by a budget (on the controller)."""
        entry = getattr(report, wire.REPORT_SKIPPED, None)
        if entry is not None and entry["reason"] in (SETTLED, SETTLE_BUDGET):
            block = self.skipped.setdefault((entry["family"], entry["policy"]), {})
            block.setdefault(entry["reason"], []).append(entry["id"])

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.section_data is None or not self.section_data.blocks:
            return
        terminalreporter.write_sep("-", "tooleffect sequential gates")
        for line in self.section_data.lines():
            terminalreporter.write_line(line)

    def close(self) -> None:
        """Let the store go; the controller removes its private tally file."""
        if stop_key in self.config.stash:
            del self.config.stash[stop_key]
        self.store.close()
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def settle_tally(spec: SequentialSpec, tally: Tally) -> str | None:
    """The block's verdict on its totals (``regression``, ``no_regression``, or ``not_settled`` when a
    budget is spent first), or ``None``: not yet.
    """
    if isinstance(spec.budget_usd, float) and tally.cost_usd >= spec.budget_usd:
        return "not_settled"
    if isinstance(spec.budget_decisions, int) and tally.decisions >= spec.budget_decisions:
        return "not_settled"
    from pytest_tooleffect.ci.sequential import settle

    said = settle(design_of(spec), tally.regressions, tally.improvements, tally.pairs)
    return None if said == "not_yet" else said


def _case_key(item: Any) -> tuple[str, str, str]:
    return (item.family.name, item.policy.name, item.ref.id)


def _discordant(baseline: Baseline) -> set[tuple[str, str, str]]:
    """The cases whose trials in the baseline disagree (one passed, another failed); errors say nothing."""
    seen: dict[tuple[str, str, str], set[bool]] = {}
    for d in baseline.decisions.values():
        if d.passed is not None:
            seen.setdefault((d.family, d.policy, d.case_id), set()).add(d.passed)
    return {k for k, v in seen.items() if len(v) == 2}


def _stratum(item: Any, baseline: Baseline) -> str:
    """``CLASS/pass``, ``CLASS/fail`` or ``CLASS/unpaired``: the class and the paired baseline decision."""
    before = baseline.decisions.get(item.record_id)
    paired = "unpaired" if before is None or before.passed is None else "pass" if before.passed else "fail"
    return f"{item.ref.label_class}/{paired}"


def block_of(family: str, policy: str, spec: SequentialSpec, tally: Tally, records: Sequence[Record],
             settled_ids: Sequence[str], budget_n: int, spend: Spend) -> SequentialBlock:
    """A block's part of the report's ``sequential`` section from its tally.

    Args:
        family: the block's family.
        policy: the block's policy.
        spec: its sequential gate.
        tally: its tally (a verdict, or none: NOT SETTLED, its items ran out).
        records: the block's records (the run's mean spend per decision, for what the baseline did not measure).
        settled_ids: the record ids of the items skipped as settled.
        budget_n: items left unsent by a budget.
        spend: the baseline's measured spend by record id (:func:`baseline_spend`).
    """
    design = design_of(spec)
    at = tally.at or tally.counts()
    verdict: Verdict = "not_settled"
    if tally.verdict in ("regression", "no_regression"):
        verdict = "regression" if tally.verdict == "regression" else "no_regression"
    pairs = int(at["pairs"])
    if verdict == "regression":
        why = f"regression settled after {pairs} paired decisions"
    elif verdict == "no_regression":
        why = f"no regression beyond the margin of {_pts(design.margin)} settled after {pairs} paired decisions"
    elif tally.verdict == "not_settled":
        why = f"NOT SETTLED: a budget was spent after {int(at['decisions'])} decisions (${at['cost_usd']:.6f}) " \
              "before a verdict; never a pass"
    else:
        why = f"NOT SETTLED: the block's items ran out after {pairs} paired decisions before a verdict; never a pass"
    saved = _saved(settled_ids, records, spend, len(records) + len(settled_ids) + budget_n)
    return SequentialBlock(
        family=family, policy=policy, alpha=design.alpha, margin=design.margin, beta=design.beta, effect=design.effect,
        discordance=design.discordance,
        budget_decisions=spec.budget_decisions if isinstance(spec.budget_decisions, int) else None,
        budget_usd=spec.budget_usd if isinstance(spec.budget_usd, float) else None,
        verdict=verdict, why=why, stopped_early=bool(settled_ids or budget_n), decisions=int(at["decisions"]),
        pairs=pairs, regressions=int(at["regressions"]), improvements=int(at["improvements"]),
        cost_usd=round(float(at["cost_usd"]), 9), decisions_run=tally.decisions, saved=saved, budget_skipped=budget_n)


def _pts(fraction: float) -> str:
    return f"{fraction * 100:g} points"


def _saved(ids: Sequence[str], records: Sequence[Record], spend: Spend, full: int) -> SavedSpend | None:
    """The spend the skipped decisions would have cost: each one's in the baseline's record log when it
    measured one, else this run's mean per decision of the block.
    """
    if not ids:
        return None
    spent = [_spent(r) for r in records]
    priced = [r for r in records if r.cost.cost_usd is not None]
    counted = [r for r in records if r.cost.input_tokens is not None or r.cost.output_tokens is not None]
    mean_usd = sum(c for c, _ in spent) / len(priced) if priced else None
    mean_tokens = sum(t for _, t in spent) / len(counted) if counted else None
    tokens: float | None = 0.0
    usd: float | None = 0.0
    from_baseline = 0
    for rid in ids:
        b_usd, b_tokens = spend.get(rid, (None, None))
        if b_usd is not None or b_tokens is not None:
            from_baseline += 1
        t = b_tokens if b_tokens is not None else mean_tokens
        u = b_usd if b_usd is not None else mean_usd
        tokens = None if tokens is None or t is None else tokens + t
        usd = None if usd is None or u is None else usd + u
    basis = (f"the baseline's measured spend of {from_baseline} of them" if from_baseline else "") + \
        ("; " if from_baseline and from_baseline < len(ids) else "") + \
        (f"this run's mean per decision of the block ({len(records)} decisions)" if from_baseline < len(ids) else "")
    return SavedSpend(decisions=len(ids), full_decisions=full, tokens=None if tokens is None else round(tokens),
                      cost_usd=None if usd is None else round(usd, 9), basis=basis)


def baseline_spend(baseline: Baseline, path: Path) -> Spend:
    """Each decision's measured cost (USD) and tokens (input + output) in the record log the baseline
    was saved from (its ``source``, read as given, else beside the baseline file ``path``), by record id.

    Returns:
        The spend by record id; empty when the baseline names no log, or it cannot be read (the
        saving is then estimated from the run's own decisions, and its ``basis`` says so).
    """
    if baseline.source is None:
        return {}
    from pytest_tooleffect.util.jsonl import json_lines

    source = Path(baseline.source)
    out: Spend = {}
    for where in (source, path.parent / source):
        try:
            for _, rec, why in json_lines(where):
                if why is not None or not isinstance(rec, dict) or not isinstance(rec.get("cost"), dict):
                    continue
                cost = rec["cost"]
                usd = cost.get("cost_usd")
                parts = [cost.get(k) for k in ("input_tokens", "output_tokens")]
                tokens = None if all(p is None for p in parts) else sum(int(p) for p in parts if p is not None)
                out[str(rec.get("id"))] = (None if usd is None else float(usd), tokens)
        except (OSError, ValueError, TypeError):
            out = {}
            continue
        return out
    return {}


_Make = Callable[..., Any]


def judge_sequential(section: SequentialSection | None, family: str, policy: str, result: _Make,
                     has_baseline: bool, block_in_baseline: bool = True) -> Any:
    """A block's sequential gate as a gate result: regression fails, no regression passes, not settled
    fails (a budget's end or a run out of items is never a pass).

    Args:
        section: the report's ``sequential`` section (``None``: none was written).
        family: the block's family.
        policy: the block's policy.
        result: the gate keeper's maker of this gate's result (``result(status, detail, value, n)``).
        has_baseline: the run had a baseline.
        block_in_baseline: some decision of the block is in the baseline (``False``: a block the
            baseline does not hold, such as a perturbation variant's new to the run: nothing pairs,
            so the gate is NOT JUDGED rather than NOT SETTLED after 0 paired decisions).

    Returns:
        The gate's :class:`~.gate_verdicts.GateResult`.
    """
    if not has_baseline:
        return result("not_judged", "no baseline: run with --tooleffect-baseline PATH (the test pairs decisions)")
    if not block_in_baseline:
        return result("not_judged", "no decision of this block is in the baseline: nothing pairs (save a baseline "
                                    "from a run that scored the block to judge it)")
    if section is None:
        return result("not_judged", "no sequential section in the report (a report made from record logs judges "
                                    "its sequential gates with --baseline)")
    block = next((b for b in section.blocks if (b.family, b.policy) == (family, policy)), None)
    if block is None:
        return result("not_judged", "no decision of the block was counted")
    detail = f"{block.why}: {block.regressions} regressions, {block.improvements} improvements"
    if block.saved is not None:
        detail += f"; {block.saved.decisions} decisions skipped as settled"
    status = "passed" if block.verdict == "no_regression" else "failed"
    return result(status, detail, float(block.regressions), block.pairs)
