"""The sandbox in a pytest run: the per-process provider, the ``tooleffect_sandbox`` fixture,
executing a decision's calls (and self-steered rollouts), and the effect verdict.

Part of the decision stage (``docs/design.md``, "Architecture"): a case that declares a
``world`` gets a sandbox in its setup (a provisioning failure is an error outcome); the
decision's tool calls run there in setup too (so does a rollout's every model turn, whose
provider failures are errors, never verdicts); the scoring stage judges the end state against
``expected_effects`` / ``forbidden_effects`` with :func:`judge_effect`.  :class:`Sandboxes` is
the plugin object registered at configure time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.decide.mcp_faults import server_failure
from pytest_tooleffect.formats import Case, ToolSpec
from pytest_tooleffect.oracle import Emission
from pytest_tooleffect.oracle.conversation import ConversationVerdict, TurnCheck, judge_conversation
from pytest_tooleffect.oracle.effects import EffectVerdict, diff_worlds, judge_effects, reference_key
from pytest_tooleffect.outcomes import Failure, NotScored
from pytest_tooleffect.sandbox import Sandbox, SandboxError, SandboxProvider, World, provider_class
from pytest_tooleffect.sandbox.mcp_hints import violations
from pytest_tooleffect.sandbox.mcp_world import MCP_WORLD, world_rows
from pytest_tooleffect.settings import settings_key
from pytest_tooleffect.util.exceptions import exception_text

__all__ = ["FAILING_FAULTS", "SandboxRun", "Sandboxes", "StepRun", "conversation_verdict", "execute", "judge_effect",
           "recovery", "server_names", "tooleffect_sandbox"]

#: fault kinds after which the agent has something to recover from (``slow`` still answers)
FAILING_FAULTS = ("status", "timeout", "malformed")

provider_key = pytest.StashKey["SandboxProvider | SandboxError"]()
call_report_key = pytest.StashKey[pytest.TestReport]()
kept_key = pytest.StashKey[str]()
world_key = pytest.StashKey[World]()


def _failed(item: CaseItem, message: str) -> NotScored:
    return NotScored("sandbox", server_failure(message) or Failure("SandboxError", message), item.record_id)


def provider(config: pytest.Config) -> SandboxProvider:
    """The provider of this process, initialised at first use.

    Raises:
        SandboxError: it cannot run here (the same error for every item of the run).
    """
    found = config.stash.get(provider_key, None)
    if found is None:
        settings = config.stash[settings_key].sandbox
        assert settings is not None
        cls = provider_class(settings.provider)
        kwargs: dict[str, Any] = {}
        if settings.provider == "docker":
            kwargs = {"pool": settings.pool, "image": settings.image}
        made = cls(settings.run_id, settings.owner_pid, settings.worker, **kwargs)
        try:
            made.session_init()
            found = made
        except SandboxError as exc:
            found = exc
        config.stash[provider_key] = found
    if isinstance(found, SandboxError):
        raise found
    return found


class Sandboxes:
    """The plugin object of the sandbox: hands xdist workers the run id, removes this process's
    sandboxes at the end, and lists the sandboxes kept for inspection.

    Args:
        config: pytest's config.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.notes: list[str] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """On the xdist controller: hand every worker the run id and the owning process."""
        settings = node.config.stash[settings_key].sandbox
        node.workerinput[wire.WORKER_RUN_ID] = settings.run_id
        node.workerinput[wire.WORKER_OWNER_PID] = settings.owner_pid

    @pytest.hookimpl(trylast=True)  # after xdist's controller has stopped its workers
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Remove this process's sandboxes (also after Ctrl-C or SIGTERM: pytest still finishes the
        session); on the xdist controller, then every sandbox of the run its workers left.
        """
        found = session.config.stash.get(provider_key, None)
        if isinstance(found, SandboxProvider):
            found.session_cleanup()
        settings = session.config.stash[settings_key].sandbox
        if (settings is not None and settings.provider != "off" and not hasattr(session.config, "workerinput")
                and session.config.pluginmanager.has_plugin("dsession")):
            provider_class(settings.provider).remove_run(settings.run_id)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.when == "call":
            item.stash[call_report_key] = report
        elif call.when == "teardown" and kept_key in item.stash:
            setattr(report, wire.REPORT_KEPT, item.stash[kept_key])
            report.sections.append(("tooleffect sandbox", item.stash[kept_key]))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect kept-sandbox notes (from this process or, under xdist, from the workers' reports)."""
        note = getattr(report, wire.REPORT_KEPT, None)
        if note and report.when == "teardown":
            self.notes.append(f"{report.nodeid}: {note}")

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        """List the sandboxes kept for inspection."""
        if hasattr(config, "workerinput") or not self.notes:
            return
        terminalreporter.write_sep("-", "tooleffect sandboxes kept for inspection")
        for line in self.notes:
            terminalreporter.write_line(line)


def world_of(item: CaseItem) -> World:
    """The world an item's sandbox is reset to: built once per decision (kept in the item's stash
    until its sandbox is given back); a reference trajectory resets to it without its faults.
    """
    world = item.stash.get(world_key, None)
    if world is None:
        spec = item.family.family.sandbox
        assert spec is not None and item.case.world is not None
        rows: Any = item.case.world
        if spec.world == MCP_WORLD and spec.mcp is not None:
            rows = world_rows(spec.mcp, rows)
        world = item.stash[world_key] = World(spec.world, rows, {
            tool: fault.model_dump() for tool, fault in item.case.faults.items()}, item.case.timezone)
    return world


def _forget_world(item: CaseItem) -> None:
    """Let the decision's world go (its sandbox was given back, or never provisioned)."""
    if world_key in item.stash:
        del item.stash[world_key]


@pytest.fixture
def tooleffect_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """The item's sandbox, its world reset to the case's seed rows and faults.

    Only for tooleffect case items whose case declares a ``world``.  After the item the sandbox
    goes back to the pool, or is kept (``tooleffect_keep_sandbox``), or is discarded when the
    item was interrupted.  A provisioning failure fails setup: an error outcome.

    Raises:
        pytest.UsageError: requested by a test that is not a world case's item.
        NotScored: the sandbox could not be provisioned (an error outcome).
    """
    item = request.node
    if not isinstance(item, CaseItem) or item.case.world is None:
        raise pytest.UsageError("tooleffect_sandbox is only available to tooleffect cases that declare a world")
    try:
        prov = provider(item.config)
        sandbox = prov.item_init(world_of(item), item.nodeid)
    except SandboxError as exc:
        _forget_world(item)
        raise _failed(item, exception_text(exc)) from None
    yield sandbox
    _forget_world(item)
    report = item.stash.get(call_report_key, None)
    settings = item.config.stash[settings_key].sandbox
    assert settings is not None
    failed = report is None or not report.passed
    note = prov.item_cleanup(sandbox, interrupted=report is None,
                             keep=settings.keep == "always" or (settings.keep == "failed" and failed))
    if note:
        item.stash[kept_key] = note


# ----------------------------------------------------------------------------- execution


@dataclass
class StepRun:
    """One step of an item in its sandbox: the emitted turn, the calls run and what came back.

    Attributes:
        step: 1 for the decision under test, 2… for a rollout's own steps.
        emitted: the turn as the model (or the recording) gave it.
        calls: ``{name, arguments, content, error, fault, latency_ms}`` per executed call
            (``latency_ms`` in milliseconds; a malformed call is listed with ``executed: false``).
        cost: the turn's tokens, latency (ms) and money (unknown values ``None``).
    """

    step: int
    emitted: Any
    calls: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None
    cost: dict[str, Any] = field(default_factory=dict)


@dataclass
class SandboxRun:
    """Everything an item did in its sandbox (filled in setup, judged in the call phase)."""

    before: dict[str, list[dict[str, Any]]]
    after: dict[str, list[dict[str, Any]]]
    steps: list[StepRun]
    stopped: str  # no_tool | max_steps | replay
    sandbox_id: str
    restrictions: dict[str, bool]
    provider: str
    references: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    conversation: list[TurnCheck] | None = None
    """A played-through conversation's turns beside the reference's (``None``: not one)."""
    limit: int = 1
    """The step limit in force (a conversation's: per user turn)."""


def _execute(sandbox: Sandbox, emitted: Any, emission: Emission, step: int, cost: Mapping[str, Any],
             names: Mapping[str, str]) -> StepRun:
    run = StepRun(step, emitted, text=emission.text, cost=dict(cost))
    for call in emission.calls:
        result = sandbox.call(names.get(call.name, call.name), dict(call.args))
        run.calls.append({"name": call.name, "arguments": dict(call.args), "content": result.content,
                          "error": result.error, "fault": result.fault, "latency_ms": round(result.latency_ms, 3),
                          "executed": True, **({"mcp": dict(result.extras)} if result.extras else {})})
    for why in emission.malformed:
        run.calls.append({"name": None, "arguments": None, "content": None, "error": True, "fault": None,
                          "executed": False, "malformed": why})
    return run


def _history(run: StepRun) -> list[dict[str, Any]]:
    """The assistant turn and the tool results of one step, as chat messages."""
    executed = [c for c in run.calls if c["executed"]]
    ids = [f"call_te_{run.step}_{i}" for i in range(len(executed))]
    assistant = {"role": "assistant", "content": run.text, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for i, c in zip(ids, executed)]}
    return [assistant, *({"role": "tool", "tool_call_id": i, "name": c["name"], "content": c["content"]}
                         for i, c in zip(ids, executed))]


#: A rollout's next turn: the state with the history so far → the emitted turn, its parse (against
#: the tools offered at that state) and its cost.
#: Raises :class:`~pytest_tooleffect.outcomes.NotScored` when the provider fails.
NextTurn = Callable[[Case], tuple[Any, Emission, dict[str, Any]]]


def execute(request: pytest.FixtureRequest, item: CaseItem, emitted: Any, emission: Emission,
            cost: Mapping[str, Any], next_turn: NextTurn | None) -> SandboxRun | None:
    """Run a decision's calls in the item's sandbox, then (``--tooleffect-rollout N``, a live
    policy) let the policy go on from the results until it calls no tool or N steps are taken.

    Args:
        request: the case item's fixture request (the sandbox fixture is requested through it).
        item: the case item.
        emitted: the decision under test (any shape ``parse_emission`` reads).
        emission: ``emitted`` as the decision parsed it (its calls are the ones run).
        cost: its tokens, latency (ms) and money.
        next_turn: the policy's next turn at a state, or ``None`` for a replay (one step).

    Returns:
        What the item did in its sandbox, or ``None`` with ``--tooleffect-sandbox off``.

    Raises:
        NotScored: the sandbox failed, or a rollout step's model call failed (an error outcome:
            this runs in setup).
    """
    settings = item.config.stash[settings_key].sandbox
    assert settings is not None
    if settings.provider == "off":
        return None
    sandbox: Sandbox = request.getfixturevalue("tooleffect_sandbox")
    live = item.live  # a live item has a next turn; a replay has none
    limit = settings.rollout if live else 1
    spec = item.family.family.sandbox
    names = server_names(item)
    by_conversation = spec is not None and spec.rollout == "conversation"
    if by_conversation and (item.case.conversation is None or limit <= 1):
        limit = 1  # a conversation family's other cases are decided teacher-forced
    try:
        before = sandbox.snapshot()
        steps = [_execute(sandbox, emitted, emission, 1, cost, names)]
        if by_conversation and limit > 1 and next_turn is not None:
            after = sandbox.snapshot()  # the decision under test's own effect, as teacher-forced
            turns, stopped = _play_conversation(sandbox, item, steps, next_turn, limit, names)
        else:
            turns = None
            stopped = "replay" if not live else "no_tool"
            messages = list(item.case.messages)
            while steps[-1].calls and any(c["executed"] for c in steps[-1].calls):
                if len(steps) >= limit or next_turn is None:
                    stopped = "max_steps" if live else "replay"
                    break
                messages += _history(steps[-1])
                turn_emitted, turn_emission, turn_cost = next_turn(item.case.model_copy(update={"messages": messages}))
                steps.append(_execute(sandbox, turn_emitted, turn_emission, len(steps) + 1, turn_cost, names))
            after = sandbox.snapshot()
        references = _references(sandbox, item, names)
    except SandboxError as exc:
        raise _failed(item, exception_text(exc)) from None
    prov = provider(item.config)
    return SandboxRun(before, after, steps, stopped, sandbox.id, prov.restrictions(), prov.name, references,
                      turns, limit)


def server_names(item: CaseItem) -> dict[str, str]:
    """In an MCP world, each renamed tool's name on its server: the family's ``name`` → ``mcp_name``
    (``tooleffect import mcp`` made ``name`` provider-safe); the calls are sent to the server under
    its own names.  Empty for any other world.
    """
    spec = item.family.family.sandbox
    if spec is None or spec.world != MCP_WORLD:
        return {}
    return {t.name: t.mcp_name for t in item.family.tools if t.mcp_name and t.mcp_name != t.name}


def _made(step: StepRun) -> bool:
    return any(c["executed"] for c in step.calls)


def _play_conversation(sandbox: Sandbox, item: CaseItem, steps: list[StepRun], next_turn: NextTurn,
                       limit: int, names: Mapping[str, str]) -> tuple[list[TurnCheck], str]:
    """Play the case's conversation through from its first step (already in ``steps``), then run
    the reference turn by turn from the same seed and hold each turn against it.

    Each user turn is given in order; within a turn the policy acts on its own outputs until it
    calls no tool, at most ``limit`` steps (reaching the limit ends the conversation there, as
    BFCL's step limit does).  The world is snapshotted after each turn; then the sandbox is reset
    to the case's seed (no faults) and the reference's calls of each turn are run, snapshotted
    after each turn.

    Returns:
        One :class:`TurnCheck` per turn played, and why the last turn stopped (``no_tool`` or
        ``max_steps``).
    """
    conversation = item.case.conversation
    layout = item.family.world_layout
    assert conversation is not None and layout is not None
    messages = list(item.case.messages)
    tools: list[ToolSpec] = item.tools
    played: list[tuple[list[str], dict[str, list[dict[str, Any]]], bool]] = []
    stopped = "no_tool"
    for k, turn in enumerate(conversation.turns):
        if turn.tools is not None:
            tools = list(turn.tools)
        if k:
            messages += [dict(m) for m in turn.user]
            t_emitted, t_emission, t_cost = next_turn(item.case.model_copy(update={"messages": messages,
                                                                                   "tools": tools}))
            steps.append(_execute(sandbox, t_emitted, t_emission, len(steps) + 1, t_cost, names))
        mine = [steps[-1]]
        while _made(mine[-1]) and len(mine) < limit:
            messages += _history(mine[-1])
            t_emitted, t_emission, t_cost = next_turn(item.case.model_copy(update={"messages": messages,
                                                                                   "tools": tools}))
            mine.append(_execute(sandbox, t_emitted, t_emission, len(steps) + 1, t_cost, names))
            steps.append(mine[-1])
        cut = _made(mine[-1])
        results = [str(c["content"]) for s in mine for c in s.calls if c["executed"]]
        played.append((results, sandbox.snapshot(), cut))
        if cut:
            stopped = "max_steps"
            break
        messages.append({"role": "assistant", "content": mine[-1].text or ""})
    sandbox.reset(world_of(item), faults=False)
    checks = []
    for k, (results, agent_world, cut) in enumerate(played):
        reference = conversation.turns[k].reference
        expected = tuple(str(sandbox.call(names.get(c.name, c.name), dict(c.arguments)).content) for c in reference)
        diff = diff_worlds(sandbox.snapshot(), agent_world, layout) if reference else {}
        checks.append(TurnCheck(k, expected, tuple(results), diff, step_limit=cut))
    return checks, stopped


def _references(sandbox: Sandbox, item: CaseItem, names: Mapping[str, str]
                ) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The end state of each reference trajectory the case's ``same_as_after`` conditions name:
    the world reset to the seed (no faults), the calls run, a snapshot.  Runs after the decision,
    so the sandbox is left in a reference state (it is reset before its next item).
    """
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for effect in (*item.case.expected_effects, *item.case.forbidden_effects):
        if effect.same_as_after is None or reference_key(effect.same_as_after) in out:
            continue
        sandbox.reset(world_of(item), faults=False)
        for call in effect.same_as_after:
            sandbox.call(names.get(call.name, call.name), dict(call.arguments))
        out[reference_key(effect.same_as_after)] = sandbox.snapshot()
    return out


def recovery(run: SandboxRun) -> str | None:
    """How the agent answered the first injected failure.

    Returns:
        ``retried`` (called the failed tool again), ``other_path`` (called other tools),
        ``told_user`` (answered without a tool call), ``none`` (the rollout ended at its step
        limit right after the failure), ``not_observed`` (no step after the failure: a single
        decision, or a replay), or ``None`` when no failing fault fired.
    """
    for k, step in enumerate(run.steps):
        failed = [c["name"] for c in step.calls if c.get("fault") in FAILING_FAULTS]
        if not failed:
            continue
        if k + 1 >= len(run.steps):
            return "none" if run.stopped == "max_steps" else "not_observed"
        nxt = run.steps[k + 1]
        names = [c["name"] for c in nxt.calls if c["executed"]]
        if any(n in failed for n in names):
            return "retried"
        return "other_path" if names else "told_user"
    return None


def _total_cost(steps: list[StepRun]) -> dict[str, Any]:
    """Tokens, latency (ms) and money summed over a rollout's steps (``None`` when any is unknown)."""
    out: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "latency_ms", "cost_usd"):
        values = [s.cost.get(key) for s in steps]
        known = [float(v) for v in values if v is not None]
        out[key] = None if len(known) < len(values) else round(sum(known), 6)
    return out


def judge_effect(item: CaseItem, run: SandboxRun) -> tuple[EffectVerdict, dict[str, Any]]:
    """The effect verdict of the end state and the record fields for the sandbox part.

    Returns:
        The verdict, and the record fields ``effect``, ``sandbox``, ``steps``, ``rollout``,
        ``faults``, ``recovery`` and, for a played-through conversation, ``conversation`` (the
        :class:`~pytest_tooleffect.oracle.conversation.ConversationVerdict` as a dict, with
        ``turns``: the conversation's user turns).
    """
    sandbox_settings = item.config.stash[settings_key].sandbox
    assert sandbox_settings is not None
    layout = item.family.world_layout
    assert layout is not None
    case = item.case
    verdict = judge_effects(run.before, run.after, layout, case.expected_effects, case.forbidden_effects,
                            case.timezone, run.references)
    rec = recovery(run)
    fields: dict[str, Any] = {
        "effect": verdict.to_dict(),
        "sandbox": {"provider": run.provider, "id": run.sandbox_id[:12],
                    "run": sandbox_settings.run_id,
                    "worker": sandbox_settings.worker,
                    "restrictions": sorted(k for k, v in run.restrictions.items() if v),
                    "restrictions_missing": sorted(k for k, v in run.restrictions.items() if not v)},
        "steps": [{"step": s.step, "calls": s.calls, "text": s.text, "cost": s.cost} for s in run.steps],
        "rollout": {"steps": len(run.steps), "stopped": run.stopped,
                    "limit": run.limit,
                    "self_steered": len(run.steps) > 1, "cost": _total_cost(run.steps)},
        "faults": sorted(case.faults),
        "recovery": rec,
    }
    found = [v.model_dump(mode="json") for s in run.steps for v in violations(s.calls, s.step)]
    if found:
        fields["annotation_violations"] = found
    if run.conversation is not None:
        assert case.conversation is not None
        judged = conversation_verdict(run.conversation, case.conversation.no_tool_turns)
        fields["conversation"] = {**judged.to_dict(), "turns": len(case.conversation.turns)}
    return verdict, fields


def conversation_verdict(turns: list[TurnCheck], no_tool_turns: str) -> ConversationVerdict:
    """The played-through conversation's verdict (``no_tool_turns``: ``decision`` or ``bfcl``)."""
    return judge_conversation(turns, no_tool_turns="bfcl" if no_tool_turns == "bfcl" else "decision")
