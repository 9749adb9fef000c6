"""The decision at one item: replayed from the case, asked of a model through the process's
:class:`~pytest_tooleffect.decide.model_turn.TurnPool`, or asked of the team's own agent
(:mod:`pytest_tooleffect.decide.agent`; an async agent shares the pool's slots); for a case with a
world, its calls run in the sandbox.

The third stage of the path of one case (``docs/design.md``, "Architecture").  The decision is
made in the item's setup (:func:`obtain_decision`), so a provider or sandbox failure is an error outcome,
never a verdict.  :class:`ModelTurns` is the plugin object that owns the pool: it prefetches
turns so each item only waits for its own answer, shares the rate limit with xdist workers and
cancels queued turns on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.collect.agents import AgentError
from pytest_tooleffect.collect.chunks import case_positions, chunk_scheduler, chunk_size, group_of
from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.decide.agent import AgentState, agent_state, call_agent_bounded, is_async, run_agent
from pytest_tooleffect.decide.model_cache import CacheEntryError
from pytest_tooleffect.decide.model_turn import ModelCache, TurnPool, api_key, wait_turn
from pytest_tooleffect.decide.provider_errors import ProviderError
from pytest_tooleffect.decide.ratelimit import RateLimiterError, redis_url_problem, state_file_problem
from pytest_tooleffect.decide.sandbox_run import SandboxRun, execute
from pytest_tooleffect.decide.stopping import stop_key, stopped
from pytest_tooleffect.decide.turn_process import finish_preload
from pytest_tooleffect.formats import Case, ToolSpec
from pytest_tooleffect.options import INI_RATE_BACKEND, INI_RATE_FILE
from pytest_tooleffect.oracle import Emission, parse_emission, tool_aliases
from pytest_tooleffect.outcomes import NOTHING_TO_REPLAY, RATE_LIMITER_ERROR, Failure, NotScored
from pytest_tooleffect.settings import Settings, settings_key
from pytest_tooleffect.util.exceptions import described, exception_text
from pytest_tooleffect.util.urls import without_password

__all__ = ["Decision", "ModelTurns", "check_rate_limit", "mark_may_apply", "obtain_decision", "parse_turn",
           "pool_key",
           "tooleffect_decision"]

#: Without xdist, the live items queued ahead of the running one, in multiples of the concurrency.
PREFETCH_WINDOW = 4

pool_key = pytest.StashKey[TurnPool]()


@dataclass(frozen=True)
class Decision:
    """The decision under test at one item: what was emitted and its cost.

    Attributes:
        item: the test item.
        emitted: the model turn (any shape :func:`~pytest_tooleffect.oracle.parse_emission` reads).
        emission: ``emitted`` parsed (:func:`parse_turn`): the one parse the sandbox runs and the oracle scores.
        cost: ``input_tokens``, ``output_tokens``, ``latency_ms`` (milliseconds), ``cost_usd``;
            ``None`` values mean unknown.
        extra: record fields of the turn (``provider_tool_names``, ``cached``, ``rate_wait_ms``).
        sandbox_run: what the decision did in the item's sandbox, when the case declares a world.
    """

    item: CaseItem
    emitted: Any
    emission: Emission
    cost: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    sandbox_run: SandboxRun | None = None


def _cache(settings: Settings) -> ModelCache | None:
    """The run's on-disk model cache, or ``None``."""
    if settings.cache_mode == "off" or settings.cache_dir is None:
        return None
    return ModelCache(settings.cache_dir, read="read" in settings.cache_mode, write="write" in settings.cache_mode)


def check_rate_limit(config: pytest.Config) -> None:
    """The rate limiter's Redis URL (ini ``tooleffect_rate_backend``) and state file (ini
    ``tooleffect_rate_file``), checked at configure time whenever they are set: a URL redis cannot
    use, or a path that is no limiter state file (a folder, ``/dev/null``, a YAML file), is the run's
    usage error, not a failure of every decision (nor, for ``/dev/null``, a first decision stuck on
    a lock).  A Redis that cannot be reached is found when a turn is admitted: each decision it
    keeps from being made is an error record of type ``RateLimiterError``.

    Raises:
        pytest.UsageError: naming the ini key and its value (a URL's password hidden).
    """
    settings = config.stash[settings_key]
    if settings.rate_backend is not None:
        problem = redis_url_problem(settings.rate_backend)
        if problem is not None:
            raise pytest.UsageError(f"ini {INI_RATE_BACKEND} = {without_password(settings.rate_backend)}: {problem}; "
                                    "expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][#NAME], rediss://… or "
                                    "unix:///PATH[?db=DB][#NAME]")
    if settings.rate_file is not None:
        problem = state_file_problem(settings.rate_file)
        if problem is not None:
            raise pytest.UsageError(f"ini {INI_RATE_FILE} = {config.getini(INI_RATE_FILE)} ({settings.rate_file}): "
                                    f"{problem}")


def _api_key(item: CaseItem) -> str | None:
    """The item's API key (:func:`~pytest_tooleffect.decide.model_turn.api_key`; raises its ``ProviderError``)."""
    policy = item.policy
    assert policy.model is not None
    pool = item.config.stash[pool_key]
    return api_key(policy.model, policy.api_base, policy.api_key_env, keys_found=pool.keys_found)


def mark_may_apply(mark: pytest.Mark) -> bool:
    """A ``skipif`` or ``xfail`` mark applies, or only pytest can say: it has no condition, one
    holds, one is a string (pytest evaluates it in the item's module) or cannot be evaluated, or a
    non-string condition comes without a ``reason`` (pytest's setup reports that as an error).
    """
    conditions = (mark.kwargs["condition"],) if "condition" in mark.kwargs else mark.args
    if not conditions or mark.kwargs.get("reason") is None:
        return True
    for condition in conditions:
        if isinstance(condition, str):
            return True
        try:
            if bool(condition):
                return True
        except (Exception, pytest.fail.Exception, pytest.skip.Exception):  # pytest's own outcomes are no Exception
            return True
    return False


def _will_run(item: CaseItem) -> bool:
    """The item's call phase surely runs: no ``skip`` mark, no ``skipif`` mark whose condition holds
    or may hold, no ``xfail(run=False)`` that applies or may apply (unless ``--runxfail``).

    Read from the marks with pytest's public API (:func:`mark_may_apply`): a mark only pytest can judge
    counts as applying, so such an item is not prefetched and its turn is asked in its own setup if
    it runs.
    """
    if any(True for _ in item.iter_markers(name="skip")) or any(map(mark_may_apply, item.iter_markers(name="skipif"))):
        return False
    return bool(item.config.option.runxfail) or not any(
        mark_may_apply(mark) for mark in item.iter_markers(name="xfail") if not mark.kwargs.get("run", True))


def _timeout(item: CaseItem, settings: Settings) -> float:
    """A model call's timeout in seconds: the policy's own, else ``--tooleffect-timeout``."""
    return item.policy.timeout_s or settings.timeout_s


class ModelTurns:
    """The plugin object of a run with live policies: the process's turn pool and its prefetching.

    Built at configure time (on the controller and on every xdist worker).

    Args:
        config: pytest's config; the pool goes into its stash under :data:`pool_key`.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[settings_key]
        self.prefetched: dict[str, concurrent.futures.Future[Any]] = {}
        self.submitted: set[str] = set()
        self.started: dict[str, threading.Event] = {}  # item's node id -> set once its turn holds a slot
        # live item's node id -> the live items of its work unit (one list per unit; pytest_collection_finish)
        self.unit_of: dict[str, list[CaseItem]] = {}
        self.live: list[CaseItem] = []  # the live items that will run, in order
        self.position: dict[str, int] = {}  # live item's node id -> its index in self.live
        self.queued_to = 0  # without xdist: self.live[:queued_to] were queued
        self.keys: dict[str, str | None | ProviderError] = {}  # policy name -> its key (or why it has none)
        self.rate_dir: Path | None = None
        self.rate_file: Path | None = None
        turns = _runs_model_turns(config)
        # the requests are made in a child process, which imports litellm while this one collects
        # (a thread here would only take turns with collection: one interpreter runs one thread at a time)
        self.pool = TurnPool(self.settings.concurrency, self._rate_limit(), _cache(self.settings), process=turns)
        config.stash[pool_key] = self.pool
        if turns and not config.option.collectonly:  # a run that only lists its items makes no turn
            self.pool.start()

    def _rate_limit(self) -> Any:
        """One limiter state file per run: the controller creates it, xdist workers get its path."""
        settings = self.settings
        if settings.rpm is None and settings.tpm is None:
            return None
        from pytest_tooleffect.decide.ratelimit import RateLimit, RedisRateLimit, private_state_dir

        if settings.rate_backend is not None:  # one limit over shards and hosts
            return RedisRateLimit(settings.rate_backend, settings.rpm, settings.tpm, settings.rate_window_s)
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is not None and wire.WORKER_RATE_STATE in workerinput:
            path = Path(workerinput[wire.WORKER_RATE_STATE])
        elif settings.rate_file is not None:  # several runs (other terminals, CI jobs on one host) share one limit
            try:
                settings.rate_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a folder that cannot be made (/proc/…, under a file, read-only)
                raise pytest.UsageError(f"ini {INI_RATE_FILE} = {str(settings.rate_file)!r}: its folder cannot be "
                                        f"made ({exc.strerror or exc})") from None
            path = self.rate_file = settings.rate_file
        else:
            self.rate_dir = private_state_dir()
            path = self.rate_dir / "limiter.sqlite"
        return RateLimit(path, settings.rpm, settings.tpm, settings.rate_window_s)

    def _api_key(self, item: CaseItem) -> str | None:
        """The item's API key, resolved once per policy and run (raises its ``ProviderError`` each time)."""
        name = item.policy.name
        if name not in self.keys:
            try:
                self.keys[name] = _api_key(item)
            except ProviderError as exc:
                self.keys[name] = exc
        found = self.keys[name]
        if isinstance(found, ProviderError):
            raise ProviderError(found.kind, found.message)
        return found

    def submit(self, item: CaseItem, state: Case | None = None, step: int = 1) -> concurrent.futures.Future[Any] | None:
        """Start the item's turn on the pool (or take it from the cache): a model turn, or an async
        agent's; ``None`` for a sync agent (it is called in setup).
        """
        settings = self.settings
        if item.agent is not None:
            agent = item.agent
            if not is_async(agent):
                return None
            snapshot = _agent_state(item, state, step)
            timeout_s = _timeout(item, settings)
            return self.pool.submit_coroutine(lambda: _bounded_agent(agent, snapshot, timeout_s))
        case = state if state is not None else item.case
        tools = _offered(item, state)
        try:
            key = self._api_key(item)
        except ProviderError as exc:  # the item's error outcome, raised where it waits (never here, in prefetch)
            failed: concurrent.futures.Future[Any] = concurrent.futures.Future()
            failed.set_exception(exc)
            return failed
        started = threading.Event() if state is None else None
        if started is not None:  # asked by withdraw() until the item's setup takes its turn
            self.started[item.nodeid] = started
        return self.pool.submit(case, tools, item.family.system_prompt, item.policy, _timeout(item, settings),
                                settings.prices, api_key=key, trial=item.trial, retries=settings.retries,
                                started=started)

    def turn(self, item: CaseItem, state: Case | None = None, step: int = 1) -> tuple[Any, Emission, dict[str, Any],
                                                                                      dict[str, Any]]:
        """The item's decision at its state (prefetched if it was), or at ``state`` (a rollout's step).

        Returns:
            ``(emitted, emission, cost, extra)``: the decision, its one parse (:func:`parse_turn`, against
            the tools offered at the state), its tokens, latency (ms) and money, and the record fields
            of the turn.

        Raises:
            NotScored: the provider failed, the rate limiter failed (``RateLimiterError``), the stored
                turn of a read-only model cache does not validate (``CacheEntryInvalid``) or is not there
                (``CacheMiss``: no request made), or the agent
                raised (an error outcome, never a verdict).
        """
        settings = self.settings
        future = self.prefetched.pop(item.nodeid, None) if state is None else None
        try:
            if future is None:
                future = self.submit(item, state, step)
            self.started.pop(item.nodeid, None)  # the item's own setup waits for it: never withdrawn
            if item.agent is not None:
                if future is None:  # a sync agent, called here
                    emitted, cost, extra = call_agent_bounded(item.agent, _agent_state(item, state, step),
                                                              _timeout(item, settings))
                else:
                    emitted, cost, extra = _agent_result(future, _timeout(item, settings))
                emission = parse_turn(item, emitted, _offered(item, state))
                told = extra.get("agent", {})
                return emitted, emission, cost, {"agent": {"callable": item.agent_source, **told}}
            assert future is not None
            turn = wait_turn(future, _timeout(item, settings), settings.retries)
        except ProviderError as exc:
            raise NotScored("provider", Failure(exc.kind, exc.message)) from None
        except CacheEntryError as exc:  # --tooleffect-cache read: a stored turn that does not validate, or none
            raise NotScored("model cache", Failure(exc.kind, exc.message)) from None
        except RateLimiterError as exc:  # no request was made: the limiter's failure, not the provider's
            raise NotScored("rate limiter", Failure(RATE_LIMITER_ERROR, exc.message)) from None
        except AgentError as exc:
            raise NotScored("agent", Failure(exc.kind, exc.message, exc.traceback)) from None
        except concurrent.futures.CancelledError:
            raise NotScored("agent", Failure("Cancelled", "the agent's turn was cancelled (interrupted run)")) from None
        extra = {"provider_tool_names": turn.provider_names} if turn.provider_names else {}
        extra["cached"] = turn.cached
        extra["rate_wait_ms"] = turn.rate_wait_ms
        return turn.emitted, parse_turn(item, turn.emitted, _offered(item, state)), turn.cost, extra

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The live items that will run (after -k / -m deselection), by chunk of positions
        (:mod:`.chunks`: under ``--dist load`` and ``loadgroup`` a worker is handed whole chunks).
        """
        if self.settings.concurrency <= 1:
            return
        units: dict[str, list[CaseItem]] = {}
        workers = int(getattr(self.config, "workerinput", {}).get(wire.WORKER_COUNT, 1))
        size = chunk_size(len(session.items), workers)
        at = (case_positions([i.nodeid for i in session.items]) if self.settings.adaptive_repeats
              else range(len(session.items)))  # a case's adaptive trials stay in one chunk (chunks.py)
        for n, item in zip(at, session.items, strict=True):
            if isinstance(item, CaseItem) and item.live:
                unit = units.setdefault(group_of(item.nodeid, n, size), [])  # the controller's work unit (chunks.py)
                unit.append(item)
                self.unit_of[item.nodeid] = unit
                self.position[item.nodeid] = len(self.live)
                self.live.append(item)

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """On the xdist controller under ``--dist loadgroup``, and under ``--dist load`` (what
        ``-n W`` alone means) in a live run: schedule whole chunks (:mod:`.chunks`).  pytest-xdist's
        ``load`` stops refilling a worker whose last test took 0.1 s or more while it holds two,
        so a worker waiting on model turns had two items and two turns in flight, not the run's
        concurrency.
        """
        if not _chunked(config, self.settings):
            return None
        return chunk_scheduler(config, log, together=self.settings.adaptive_repeats)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Prefetch model turns so that each item only waits for its own answer.

        Without xdist every live item runs here, in order: each one keeps the next :data:`PREFETCH_WINDOW` ×
        ``--tooleffect-concurrency`` live items queued (the pool keeps the concurrency in flight), so a slow
        answer holds up no slot, the first item waits for its own turn only, and the process holds the cases
        of the queued items, not of every item. Under xdist with ``--dist load`` (``-n W`` alone) or
        ``--dist loadgroup`` a worker is handed whole chunks of items (:func:`_chunked`), so it queues the chunk of the
        item it starts, from that item on (the rest of a chunk a crashed worker left is handed again without
        its finished items). Under other ``--dist`` modes a worker does not know its items: it looks one item
        ahead. A run a sequential gate may stop keeps only the concurrency queued (:meth:`_ahead`).
        """
        if not (isinstance(item, CaseItem) and item.live) or self.settings.concurrency <= 1 \
                or self.config.option.setuponly:  # --setup-only / --setup-plan: no decision is made
            return
        batch: list[pytest.Item]
        if not hasattr(self.config, "workerinput"):  # a window from this item on, each item queued once
            at = self.position.get(item.nodeid, self.queued_to)
            end = at + self._ahead()
            batch = list(self.live[max(at, self.queued_to):end])
            self.queued_to = max(self.queued_to, end)
        elif self.config.workerinput.get(wire.WORKER_CHUNKED):
            unit = self.unit_of.get(item.nodeid, [])
            at = unit.index(item)
            batch = list(unit[at:at + self._ahead()])  # a unit handed again after a crash: its unfinished rest
        else:
            batch = [nextitem] if isinstance(nextitem, CaseItem) and nextitem.live else []
        for it in [item, *batch]:
            assert isinstance(it, CaseItem)
            if it.nodeid not in self.submitted:
                self.submitted.add(it.nodeid)
                if not _will_run(it) or stopped(self.config, it):  # a turn paid for and thrown away
                    continue
                try:
                    _ = it.case  # read again (kept until teardown); a line that changed is its own setup's error
                except ValueError:
                    continue
                future = self.submit(it)
                if future is not None:
                    self.prefetched[it.nodeid] = future

    def _ahead(self) -> int:
        """How many live items to keep queued from the running one: :data:`PREFETCH_WINDOW` × the concurrency,
        or, when a later stage may stop the run (a sequential gate: :mod:`.stopping`), the concurrency alone,
        so that few turns are answered, and paid for, ahead of the verdict.
        """
        window = 1 if stop_key in self.config.stash else PREFETCH_WINDOW
        return window * self.settings.concurrency

    def withdraw(self, item: CaseItem) -> bool:
        """Take back the item's prefetched turn, if it has not come back (a sequential gate settled).

        Returns:
            ``True`` when no answer was paid for: none was queued, or the queued one was cancelled
            while it waited for a concurrency slot (its request never sent); ``False`` when its
            answer is back or its request may have been sent (the item then runs: its decision,
            paid for, is scored).
        """
        future = self.prefetched.get(item.nodeid)
        if future is None:
            return True
        started = self.started.get(item.nodeid)
        if future.done() or (started is not None and started.is_set()):
            return False
        future.cancel()
        del self.prefetched[item.nodeid]
        return True

    def pytest_report_collectionfinish(self, config: pytest.Config, items: list[pytest.Item]) -> str | None:
        """Say up front how long a request limit makes the run at the least (when over ten minutes)."""
        settings = self.settings
        if settings.rpm is None:
            return None
        live = sum(1 for it in items if isinstance(it, CaseItem) and it.live)
        least_s = max(0, -(-live // settings.rpm) - 1) * settings.rate_window_s
        if least_s < 600:
            return None
        return (f"tooleffect: at {settings.rpm} requests per {settings.rate_window_s:g} s, {live} live model turns "
                f"take at least {least_s / 60:.0f} min (Ctrl-C keeps the finished records)")

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """On the xdist controller, hand each worker the run's rate-limit state file, and say
        whether the controller schedules whole chunks (the worker then prefetches its chunk).
        """
        node.workerinput[wire.WORKER_CHUNKED] = _chunked(self.config, self.settings)
        if self.rate_dir is not None:
            node.workerinput[wire.WORKER_RATE_STATE] = str(self.rate_dir / "limiter.sqlite")
        elif self.rate_file is not None:
            node.workerinput[wire.WORKER_RATE_STATE] = str(self.rate_file)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C: drop model turns not yet started; finished records are already on disk."""
        self.pool.cancel()

    def close(self) -> None:
        """Stop the pool's loop and its child process, and remove the run's private limiter state."""
        finish_preload()  # an import on a thread of this process (a judge's, say): never cut in the middle
        self.pool.close()
        self.pool.close_process()
        if self.rate_dir is not None:
            import shutil

            shutil.rmtree(self.rate_dir, ignore_errors=True)


def _chunked(config: pytest.Config, settings: Settings) -> bool:
    """On the xdist controller: it schedules whole chunks (``--dist loadgroup``, or ``--dist load``
    in a live run, with more than one model turn in flight).
    """
    if settings.concurrency <= 1:
        return False
    dist = config.getvalue("dist")
    return dist == "loadgroup" or (dist == "load" and settings.live)


#: seconds past its own timeout an async agent's turn is waited for, before its loop is taken as blocked
LOOP_GRACE_S = 5.0


def _agent_result(future: concurrent.futures.Future[Any], timeout_s: float) -> Any:
    """An async agent's turn from the pool: the loop's own timeout ends it, unless a blocking call
    inside the ``async def`` holds the loop (then this wait ends it, ``LOOP_GRACE_S`` later).
    """
    try:
        return future.result(timeout=timeout_s + LOOP_GRACE_S)
    except TimeoutError:
        future.cancel()
        raise AgentError("Timeout", f"the agent gave no decision within {timeout_s:g} s (--tooleffect-timeout), "
                                    "and its event loop did not answer: a blocking call inside async def?") from None


async def _bounded_agent(agent: Any, state: Any, timeout_s: float) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """An async agent's turn, bounded by ``--tooleffect-timeout`` (a hung agent is an error outcome)."""
    try:
        return await asyncio.wait_for(run_agent(agent, state), timeout_s)
    except TimeoutError:
        raise AgentError("Timeout", f"the agent gave no decision within {timeout_s:g} s "
                                    "(--tooleffect-timeout)") from None


def _agent_state(item: CaseItem, state: Case | None, step: int) -> AgentState:
    """The snapshot an agent policy is called with at the item's state, or at a rollout's ``state``
    (made here alone, once per turn: an async agent's when its turn is submitted, a sync agent's
    when it is called).
    """
    return agent_state(state if state is not None else item.case, _offered(item, state), item.family.system_prompt,
                       item.policy, item.trial, step)


def _offered(item: CaseItem, state: Case | None) -> list[ToolSpec]:
    """The tools offered at a rollout's state (its own, as a conversation's later turn offers), else the item's."""
    return list(state.tools) if state is not None and state.tools is not None else item.tools


def _runs_model_turns(config: pytest.Config) -> bool:
    """This process may make model turns: some policy asked for may have a model, and it is not
    the xdist controller (the workers make the turns; the controller never imports litellm).
    """
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        return False
    return config.stash[settings_key].model_turns


def _model_turns(config: pytest.Config) -> ModelTurns:
    plugin = config.pluginmanager.get_plugin("tooleffect-model-turns")
    assert isinstance(plugin, ModelTurns)
    return plugin


def obtain_decision(item: CaseItem) -> Decision:
    """The decision at ``item``, obtained in its setup (so a provider failure is an error).

    The case item's own setup calls it after the item's fixtures (the decider of
    :data:`~pytest_tooleffect.collect.items.decider_key`), without a fixture of its own: a fixture that
    takes ``request`` costs pytest three ``RequestFixtureDef`` objects per item (each reading a
    function signature), a tenth of a replayed decision's time.

    Replay (no model option): the case's ``recorded`` turn, at no cost; a case with nothing
    recorded is skipped.  A live policy: the model's turn, or the agent's.  A case with a world: the decision's
    calls run in the item's sandbox (and, with ``--tooleffect-rollout N``, the policy's next
    steps too).

    Raises:
        NotScored: the provider, the agent or the sandbox failed (an error outcome).
    """
    if item.case.label is None:
        pytest.skip("unlabelled case: nothing to score against")
    next_turn = None
    if item.replay:
        if item.case.recorded is None:
            pytest.skip(NOTHING_TO_REPLAY)
        emitted: Any = item.case.recorded.model_dump(exclude_none=True)
        emission = parse_turn(item, emitted, item.tools)
        cost: dict[str, Any] = {}
        extra: dict[str, Any] = {}
    else:
        turns = _model_turns(item.config)
        emitted, emission, cost, extra = turns.turn(item)
        steps = [1]

        def next_turn(state: Case) -> tuple[Any, Emission, dict[str, Any]]:
            steps.append(steps[-1] + 1)
            t_emitted, t_emission, t_cost, _ = turns.turn(item, state, steps[-1])
            return t_emitted, t_emission, t_cost

    run = (execute(item.fixture_request, item, emitted, emission, cost, next_turn)
           if item.case.world is not None else None)
    return Decision(item, emitted, emission, cost, extra, run)


def parse_turn(item: CaseItem, emitted: Any, offered: Sequence[ToolSpec]) -> Emission:
    """A turn's one parse: :func:`~pytest_tooleffect.oracle.parse_emission` of ``emitted``, against the
    names of the tools ``offered`` at its state (a bare JSON call in the text names one of them); a
    call under an MCP tool's server name (``mcp_name``) is read as the family's tool
    (:func:`~pytest_tooleffect.oracle.tool_aliases`).

    Every turn of an item is parsed here once; the sandbox runs the parsed calls and the oracle
    scores them.

    Raises:
        AgentError: an agent policy's turn is nothing the oracle reads (``AgentReturnedUnreadable``:
            an error outcome, never a verdict).
        TypeError: a model's or a recorded turn is nothing the oracle reads.
    """
    try:
        return parse_emission(emitted, offered=[t.name for t in offered], aliases=tool_aliases(offered))
    except Exception as exc:  # an agent's turn is plain JSON data (agent.plain_decision) of a shape it is not
        if item.agent is None:
            raise
        why = " ".join(exception_text(exc).split()) if isinstance(exc, (TypeError, ValueError)) else described(exc)
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {type(emitted).__name__}, which is no "
                                                    f"decision: {why}"[:500]) from None


@pytest.fixture
def tooleffect_decision(request: pytest.FixtureRequest) -> Decision:
    """The decision at this case item (the one its setup obtains; obtained now if asked for first).

    Raises:
        pytest.UsageError: requested by a test that is not a tooleffect case item.
        NotScored: the provider, the agent or the sandbox failed (an error outcome).
    """
    item = request.node
    if not isinstance(item, CaseItem):
        raise pytest.UsageError("tooleffect_decision is only available to tooleffect case items")
    decision: Decision = item.decide()
    return decision
