"""The pytest entry point: registers the hooks and builds the plugin objects at configure time.

Nothing else lives here.  The stages of the path of one case are modules of their own
(``docs/design.md``, "Architecture"): :mod:`~pytest_tooleffect.options` (resolved by
:mod:`~pytest_tooleffect.settings`) →
:mod:`~pytest_tooleffect.collect.items` → :mod:`~pytest_tooleffect.decide.decision` (with
:mod:`~pytest_tooleffect.decide.sandbox_run`) → :mod:`~pytest_tooleffect.scoring.scorer` →
:mod:`~pytest_tooleffect.scoring.record` → :mod:`~pytest_tooleffect.report.reporter` →
:mod:`~pytest_tooleffect.report`.  As pytest's junitxml does, each plugin object is built in
``pytest_configure``, kept in the config's stash and unregistered in ``pytest_unconfigure``;
the controller-only reporter is skipped on xdist workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_tooleffect.ci.adaptive_run import AdaptiveRepeatsRun, with_adaptive_repeats
from pytest_tooleffect.ci.gate_keeper import GateKeeper
from pytest_tooleffect.ci.gate_rules import gates_of
from pytest_tooleffect.ci.regressions import BaselinePlugin
from pytest_tooleffect.ci.sequential_gate import SequentialGate, sequential_on
from pytest_tooleffect.collect.items import CLASS_MARKERS, CaseCollector, decider_key
from pytest_tooleffect.collect.sharding import RunSelection
from pytest_tooleffect.collect.variants import Perturber
from pytest_tooleffect.compat import PhaseReports
from pytest_tooleffect.decide.agent_threads import AgentThreads
from pytest_tooleffect.decide.decision import ModelTurns, check_rate_limit, obtain_decision, tooleffect_decision
from pytest_tooleffect.decide.sandbox_run import Sandboxes, tooleffect_sandbox
from pytest_tooleffect.options import addoptions
from pytest_tooleffect.report.outputs import check_run_outputs, release_records_lock
from pytest_tooleffect.report.replay_hint import ReplayHint
from pytest_tooleffect.report.reporter import JudgeContributor, Reporter, RunTally
from pytest_tooleffect.sandbox import registered_providers
from pytest_tooleffect.scoring.scorer import Scorer, tooleffect_score
from pytest_tooleffect.scoring.sections import PerturbationMark, RecordSection, SelectionMark, record_sections_key
from pytest_tooleffect.settings import resolve, settings_key
from pytest_tooleffect.signals import TermAsInterrupt
from pytest_tooleffect.util import redaction
from pytest_tooleffect.util.display import shown

if TYPE_CHECKING:
    from pytest_tooleffect.report.assembly import ReportSection

__all__ = ["tooleffect_decision", "tooleffect_sandbox", "tooleffect_score"]

_PLUGINS = ("tooleffect-signals", "tooleffect-collector", "tooleffect-perturber", "tooleffect-model-turns",
            "tooleffect-sandboxes",
            "tooleffect-scorer", "tooleffect-reporter", "tooleffect-gates", "tooleffect-replay-hint",
            "tooleffect-baseline", "tooleffect-sequential", "tooleffect-selection", "tooleffect-phase-reports",
            "tooleffect-repeats", "tooleffect-agent-threads")  # closed last: after the turn pool's threads were joined
#: the secrets known before this run configured (another run's, when pytester runs one inside it)
_secrets_before_key = pytest.StashKey[frozenset[str]]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_tooleffect import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    addoptions(parser, registered_providers())


def pytest_configure(config: pytest.Config) -> None:
    try:
        _configure(config)
    except pytest.UsageError as exc:  # it may quote what a file holds: pytest prints it raw
        raise pytest.UsageError(shown(str(exc), limit=None, lines=True)) from None


def _configure(config: pytest.Config) -> None:
    config.stash[_secrets_before_key] = redaction.new_scope()  # this run's secrets are its own
    for name, doc in CLASS_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: tooleffect class: {doc}")
    # adaptive repeats: the items per case are the design's (a later stage's), set before anything reads them
    settings = config.stash[settings_key] = with_adaptive_repeats(resolve(config, registered_providers()))
    if not hasattr(config, "workerinput"):  # only the controller writes: no output may be an input
        check_run_outputs(config)
    check_rate_limit(config)  # its URL and state file: usage errors before anything starts
    if settings.rate_backend is not None:  # a Redis password is cut wherever it shows
        redaction.register_url_credentials(settings.rate_backend)
    # read before any plugin object starts anything: a bad baseline file is a usage error
    baseline = BaselinePlugin(config) if settings.baseline is not None else None
    config.stash[decider_key] = obtain_decision  # the case item's setup asks it (collect imports no later stage)
    # a sequential gate: on workers too (they skip settled items and count what they score)
    sequential = (SequentialGate(config, baseline.baseline if baseline is not None else None)
                  if sequential_on(gates_of(settings)) else None)
    repeats = AdaptiveRepeatsRun(config) if settings.adaptive_repeats else None  # after the gate: its stop wraps it
    plugins: dict[str, Any] = {
        "tooleffect-signals": TermAsInterrupt(config),  # SIGTERM ends the run as Ctrl-C does; no signal cuts its finish
        "tooleffect-collector": CaseCollector(config),
        "tooleffect-perturber": Perturber(config),  # perturbed-catalog variants beside each case
        "tooleffect-sandboxes": Sandboxes(config),
        "tooleffect-scorer": Scorer(config),
        "tooleffect-agent-threads": AgentThreads(config),  # no thread an agent leaves keeps the process alive
    }
    if settings.live:
        plugins["tooleffect-model-turns"] = ModelTurns(config)
    # what the run selected: the gates judge that (a case's adaptive trials in one shard)
    selection = RunSelection(settings.shard, together=settings.adaptive_repeats)
    if not hasattr(config, "workerinput"):
        tally = RunTally()
        gates = GateKeeper(config, tally, selection)  # reads [tool.tooleffect.gates]: a usage error here
        # the report's sections (written in the assembler's order: judge, shard, baseline, gates)
        sections: list[ReportSection] = [JudgeContributor(settings.judge_model, settings.judge_calibration), gates]
        if settings.shard is not None:
            from pytest_tooleffect.report.assembly import ShardSection
            from pytest_tooleffect.report.run_model import ShardOf

            sections.append(ShardSection(shard=ShardOf(index=settings.shard[0], count=settings.shard[1])))
        if baseline is not None:
            sections.append(baseline)
        if sequential is not None:
            sections.append(sequential)
        if repeats is not None:
            sections.append(repeats)
        # before the gate keeper: of two trylast wrappers, pluggy runs the one registered first outermost,
        # so the hint's line prints after the gates' decision
        plugins["tooleffect-replay-hint"] = ReplayHint(config)
        plugins["tooleffect-reporter"] = Reporter(config, sections, tally)
        plugins["tooleffect-gates"] = gates
        plugins["tooleffect-phase-reports"] = PhaseReports(config)
    record_sections: list[RecordSection] = []  # what they add to each record, in this order
    if baseline is not None:  # on workers too: they collect (xfail marks) and make records
        plugins["tooleffect-baseline"] = baseline
        record_sections.append(baseline)
    if sequential is not None:  # after the baseline's: it reads the record's baseline status
        plugins["tooleffect-sequential"] = sequential
        record_sections.append(sequential)
    if repeats is not None:  # on workers too: they skip the trials a case does not need
        plugins["tooleffect-repeats"] = repeats
        record_sections.append(repeats)
    # on workers too: they collect, deselect (a shard's part) and make records
    plugins["tooleffect-selection"] = selection
    record_sections.append(SelectionMark(selection))
    record_sections.append(PerturbationMark())
    config.stash[record_sections_key] = record_sections
    for name, plugin in plugins.items():
        config.pluginmanager.register(plugin, name)


def pytest_unconfigure(config: pytest.Config) -> None:
    try:
        for name in _PLUGINS:
            plugin = config.pluginmanager.get_plugin(name)
            if plugin is None:
                continue
            close = getattr(plugin, "close", None)
            if close is not None:
                close()
            config.pluginmanager.unregister(plugin, name)
    finally:
        release_records_lock(config)  # once the log is closed: the next run may write it
        before = config.stash.get(_secrets_before_key, None)
        if before is not None:
            redaction.restore_scope(before)
            del config.stash[_secrets_before_key]
