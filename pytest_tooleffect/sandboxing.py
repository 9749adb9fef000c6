"""The sandbox in a pytest run: options, the per-process provider, the ``tooleffect_sandbox``
fixture, executing a decision's calls (and self-steered rollouts), and the effect verdict.

Registered by :mod:`pytest_tooleffect.plugin` at configure time.  A case that declares a
``world`` gets a sandbox in its setup (a provisioning failure is an error outcome); the
decision's tool calls run there in setup too (so does a rollout's every model turn, whose
provider failures are errors, never verdicts); the call phase scores the first decision against
the label and the end state against ``expected_effects`` / ``forbidden_effects``.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from .oracle import parse_emission
from .oracle.effects import EffectVerdict, judge_effects
from .sandbox.environment import Sandbox, SandboxError, SandboxProvider, World

if TYPE_CHECKING:
    from .plugin import CaseItem, Decision

__all__ = ["OPT_KEEP", "OPT_ROLLOUT", "OPT_SANDBOX", "SandboxFailed", "SandboxSettings", "StepRun",
           "tooleffect_sandbox"]

OPT_SANDBOX = "--tooleffect-sandbox"
OPT_KEEP = "--tooleffect-keep-sandbox"
OPT_ROLLOUT = "--tooleffect-rollout"
INI_SANDBOX = "tooleffect_sandbox"
INI_KEEP = "tooleffect_keep_sandbox"
INI_POOL = "tooleffect_sandbox_pool"
INI_IMAGE = "tooleffect_sandbox_image"
KEEP_MODES = ("never", "failed", "always")
#: fault kinds after which the agent has something to recover from (``slow`` still answers)
FAILING_FAULTS = ("status", "timeout", "malformed")


@dataclass(frozen=True)
class SandboxFailure:
    """What an error record says about a sandbox failure (``kind``, ``message``)."""

    kind: str
    message: str


class SandboxFailed(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A sandbox failure in setup: an error outcome with an error record, never a verdict."""

    def __init__(self, record_id: str, message: str) -> None:
        super().__init__(f"{record_id}: sandbox error (not scored): {message}", pytrace=False)
        self.error = SandboxFailure("SandboxError", message)


@dataclass(frozen=True)
class SandboxSettings:
    """Sandbox options resolved once at configure time."""

    provider: str  # "docker", "local" or "off"
    keep: str  # never | failed | always
    pool: bool
    image: str | None  # None: the tag of the sandbox/ build context
    rollout: int  # steps a policy may take (1 = the single teacher-forced decision)
    run_id: str
    owner_pid: int
    worker: str


sandbox_settings_key = pytest.StashKey[SandboxSettings]()
provider_key = pytest.StashKey["SandboxProvider | SandboxError"]()
call_report_key = pytest.StashKey[pytest.TestReport]()
kept_key = pytest.StashKey[str]()


def _rollout_steps(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise pytest.UsageError(f"{OPT_ROLLOUT}: expected a whole number of steps, got {value!r}") from None
    if not 1 <= n <= 100:
        raise pytest.UsageError(f"{OPT_ROLLOUT}: steps must be from 1 to 100, got {n}")
    return n


def addoptions(group: Any, parser: pytest.Parser) -> None:
    """Add the sandbox options to the ``tooleffect`` group."""
    from .sandbox.environment import registered_providers

    group.addoption(OPT_SANDBOX, choices=[*registered_providers(), "off"], default=None,
                    help=f"where cases that declare a world run their tool calls: docker (default; containers "
                         f"from the locally built image), local (in-process, no isolation: for tests) or off "
                         f"(score decisions only); ini {INI_SANDBOX}")
    group.addoption(OPT_KEEP, choices=KEEP_MODES, default=None,
                    help=f"keep an item's sandbox container for inspection: never (default), failed, always; "
                         f"ini {INI_KEEP}")
    group.addoption(OPT_ROLLOUT, metavar="N", type=_rollout_steps, default=1,
                    help="let a live policy run up to N steps from each world case's state against its sandbox, "
                         "on its own outputs, until it calls no tool; the end state is judged (default 1: the "
                         "single decision)")
    parser.addini(INI_SANDBOX, "sandbox provider for world cases: docker | local | off", default="docker")
    parser.addini(INI_KEEP, "keep sandboxes for inspection: never | failed | always", default="never")
    parser.addini(INI_POOL, "reuse warm sandbox containers within a process, reset between items", type="bool",
                  default=True)
    parser.addini(INI_IMAGE, "sandbox image tag (default: tooleffect-sandbox:<hash of the sandbox/ build context>)",
                  default="")


def configure(config: pytest.Config) -> None:
    """Resolve the settings (run id from the controller under xdist) and register this module."""
    import sys

    from .sandbox.environment import registered_providers

    provider = config.getoption(OPT_SANDBOX) or config.getini(INI_SANDBOX)
    if provider not in [*registered_providers(), "off"]:
        raise pytest.UsageError(f"ini {INI_SANDBOX}: unknown provider {provider!r}")
    keep = config.getoption(OPT_KEEP) or config.getini(INI_KEEP)
    if keep not in KEEP_MODES:
        raise pytest.UsageError(f"ini {INI_KEEP}: expected one of {', '.join(KEEP_MODES)}, got {keep!r}")
    rollout = config.getoption(OPT_ROLLOUT)
    if rollout > 1 and not (config.getoption("--tooleffect-model") or config.getoption("--tooleffect-policy")):
        raise pytest.UsageError(f"{OPT_ROLLOUT} {rollout}: a rollout needs a live policy (--tooleffect-model or "
                                "--tooleffect-policy); a replay is one recorded decision")
    workerinput = getattr(config, "workerinput", None)
    config.stash[sandbox_settings_key] = SandboxSettings(
        provider=provider, keep=keep, pool=bool(config.getini(INI_POOL)), image=config.getini(INI_IMAGE) or None,
        rollout=rollout,
        run_id=workerinput["tooleffect_run_id"] if workerinput else uuid.uuid4().hex,
        owner_pid=int(workerinput["tooleffect_owner_pid"]) if workerinput else os.getpid(),
        worker=workerinput["workerid"] if workerinput else "main",
    )
    _notes.clear()
    config.pluginmanager.register(sys.modules[__name__], "tooleffect-sandbox")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the xdist controller: hand every worker the run id and the owning process."""
    settings = node.config.stash[sandbox_settings_key]
    node.workerinput["tooleffect_run_id"] = settings.run_id
    node.workerinput["tooleffect_owner_pid"] = settings.owner_pid


def provider(config: pytest.Config) -> SandboxProvider:
    """The provider of this process, initialised at first use.

    Raises:
        SandboxError: it cannot run here (the same error for every item of the run).
    """
    found = config.stash.get(provider_key, None)
    if found is None:
        from .sandbox.environment import provider_class

        settings = config.stash[sandbox_settings_key]
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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Remove this process's sandboxes (also after Ctrl-C: pytest still finishes the session)."""
    found = session.config.stash.get(provider_key, None)
    if isinstance(found, SandboxProvider):
        found.session_cleanup()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call":
        item.stash[call_report_key] = report
    elif call.when == "teardown" and kept_key in item.stash:
        report.tooleffect_kept = item.stash[kept_key]  # type: ignore[attr-defined]
        report.sections.append(("tooleffect sandbox", item.stash[kept_key]))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect kept-sandbox notes (from this process or, under xdist, from the workers' reports)."""
    note = getattr(report, "tooleffect_kept", None)
    if note and report.when == "teardown":
        _notes.append(f"{report.nodeid}: {note}")


_notes: list[str] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """List the sandboxes kept for inspection."""
    if hasattr(config, "workerinput") or not _notes:
        return
    terminalreporter.write_sep("-", "tooleffect sandboxes kept for inspection")
    for line in _notes:
        terminalreporter.write_line(line)


def world_of(item: CaseItem) -> World:
    """The world an item's sandbox is reset to."""
    spec = item.family.family.sandbox
    assert spec is not None and item.case.world is not None
    return World(spec.world, item.case.world,
                 {tool: fault.model_dump() for tool, fault in item.case.faults.items()}, item.case.timezone)


@pytest.fixture
def tooleffect_sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """The item's sandbox, its world reset to the case's seed rows and faults.

    Only for tooleffect case items whose case declares a ``world``.  After the item the sandbox
    goes back to the pool, or is kept (``tooleffect_keep_sandbox``), or is discarded when the
    item was interrupted.  A provisioning failure fails setup: an error outcome.
    """
    from .plugin import CaseItem

    item = request.node
    if not isinstance(item, CaseItem) or item.case.world is None:
        raise pytest.UsageError("tooleffect_sandbox is only available to tooleffect cases that declare a world")
    try:
        prov = provider(item.config)
        sandbox = prov.item_init(world_of(item), item.nodeid)
    except SandboxError as exc:
        raise SandboxFailed(item.record_id, str(exc)) from None
    yield sandbox
    report = item.stash.get(call_report_key, None)
    keep_mode = item.config.stash[sandbox_settings_key].keep
    failed = report is None or not report.passed
    note = prov.item_cleanup(sandbox, interrupted=report is None,
                             keep=keep_mode == "always" or (keep_mode == "failed" and failed))
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


def _execute(sandbox: Sandbox, emitted: Any, offered: list[str], step: int, cost: Mapping[str, Any]) -> StepRun:
    emission = parse_emission(emitted, offered=offered)
    run = StepRun(step, emitted, text=emission.text, cost=dict(cost))
    for call in emission.calls:
        result = sandbox.call(call.name, dict(call.args))
        run.calls.append({"name": call.name, "arguments": dict(call.args), "content": result.content,
                          "error": result.error, "fault": result.fault, "latency_ms": round(result.latency_ms, 3),
                          "executed": True})
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


def execute(request: pytest.FixtureRequest, decision: Decision) -> None:
    """Run the decision's calls in the item's sandbox, then (``--tooleffect-rollout N``, a live
    policy) let the policy go on from the results until it calls no tool or N steps are taken.

    Raises:
        SandboxFailed: the sandbox failed (an error outcome: this runs in setup).
        ProviderFailed: a rollout step's model call failed (an error outcome).
    """
    from .plugin import ProviderFailed, model_cache, settings_key

    item = decision.item
    settings = item.config.stash[sandbox_settings_key]
    if settings.provider == "off":
        return
    sandbox: Sandbox = request.getfixturevalue("tooleffect_sandbox")
    tools = list(item.case.tools) if item.case.tools is not None else list(item.family.tools)
    offered = [t.name for t in tools]
    live = item.policy.model is not None
    limit = settings.rollout if live else 1
    try:
        before = sandbox.snapshot()
        steps = [_execute(sandbox, decision.emitted, offered, 1, decision.cost)]
        stopped = "replay" if not live else "no_tool"
        messages = list(item.case.messages)
        while steps[-1].calls and any(c["executed"] for c in steps[-1].calls):
            if len(steps) >= limit:
                stopped = "max_steps" if live else "replay"
                break
            from .model_turn import ProviderError, run_turn

            messages += _history(steps[-1])
            state = item.case.model_copy(update={"messages": messages})
            run_settings = item.config.stash[settings_key]
            cache = model_cache(run_settings)
            try:
                turn = run_turn(state, tools, item.family.system_prompt, item.policy, run_settings.timeout_s,
                                run_settings.prices, api_key="unused-local-key" if item.policy.api_base else None,
                                cache=cache, trial=item.trial, retries=run_settings.retries)
            except ProviderError as exc:
                raise ProviderFailed(exc) from None
            steps.append(_execute(sandbox, turn.emitted, offered, len(steps) + 1, turn.cost))
        after = sandbox.snapshot()
    except SandboxError as exc:
        raise SandboxFailed(item.record_id, str(exc)) from None
    prov = provider(item.config)
    decision.sandbox_run = SandboxRun(before, after, steps, stopped, sandbox.id, prov.restrictions(), prov.name)


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


def judge(item: CaseItem, run: SandboxRun) -> tuple[EffectVerdict, dict[str, Any]]:
    """The effect verdict of the end state and the record fields for the sandbox part."""
    layout = item.family.world_layout
    assert layout is not None
    case = item.case
    verdict = judge_effects(run.before, run.after, layout, case.expected_effects, case.forbidden_effects,
                            case.timezone)
    rec = recovery(run)
    fields: dict[str, Any] = {
        "effect": verdict.to_dict(),
        "sandbox": {"provider": run.provider, "id": run.sandbox_id[:12],
                    "run": item.config.stash[sandbox_settings_key].run_id,
                    "worker": item.config.stash[sandbox_settings_key].worker,
                    "restrictions": sorted(k for k, v in run.restrictions.items() if v),
                    "restrictions_missing": sorted(k for k, v in run.restrictions.items() if not v)},
        "steps": [{"step": s.step, "calls": s.calls, "text": s.text, "cost": s.cost} for s in run.steps],
        "rollout": {"steps": len(run.steps), "stopped": run.stopped,
                    "limit": item.config.stash[sandbox_settings_key].rollout,
                    "self_steered": len(run.steps) > 1, "cost": _total_cost(run.steps)},
        "faults": sorted(case.faults),
        "recovery": rec,
    }
    return verdict, fields
