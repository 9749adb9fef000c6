"""One model turn through litellm: request building, reversible tool names, cost, faults.

litellm is imported lazily (it costs seconds) with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set
first, so the bundled cost map is used and nothing is fetched.  The plugin's pool makes its
requests in a child process (:mod:`pytest_tooleffect.decide.turn_process`), started at configure time,
which imports litellm while pytest collects in this one; the first turn waits only for what is
left of that import.  A pool built without it (``run_turn``, the library's direct use) imports
and calls litellm in this process.  Tool names that providers
reject (the OpenAI and Anthropic rule is ``^[a-zA-Z0-9_-]{1,64}$``; ``calendar.create_event``
breaks it) are mapped to safe names before the call, in the tool list and in the history, and
mapped back after it; the record keeps both.

Turns run as coroutines on the event loop thread of a :class:`TurnPool` (one per process:
:meth:`TurnPool.submit` returns a :class:`concurrent.futures.Future`), at most the pool's
concurrency in flight, each request admitted first by the pool's run-wide rate limit
(:mod:`pytest_tooleffect.decide.ratelimit`) and made by :func:`~.turn_process.answer_once`.

A provider failure (timeout, connection reset, 4xx/5xx, an invalid body) or an answer that is
not a decision (the provider's safety layer stopped it, or it was cut off at the output cap:
:func:`~pytest_tooleffect.decide.provider_errors.stop_failure`) raises
:class:`~pytest_tooleffect.decide.provider_errors.ProviderError` (which failures are retried, and after
how long, is :mod:`pytest_tooleffect.decide.provider_errors`'s to say); the plugin raises it during
setup, so pytest reports an error, never a failed decision.  Retries (:func:`_complete`) are this
module's alone: litellm's ``num_retries`` is off, so ``retries`` N makes at most N + 1 requests.
The request's key comes from :func:`api_key`; every message of a ``ProviderError`` has the run's
known secrets redacted (:mod:`pytest_tooleffect.util.redaction`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_tooleffect.decide.model_cache import CacheEntryError, ModelCache, message_role_problem
from pytest_tooleffect.decide.provider_errors import (
    MAX_RETRY_AFTER_S,
    ProviderError,
    backoff_s,
    native_reason,
    retryable,
    stop_failure,
)
from pytest_tooleffect.decide.ratelimit import Limiter, RateLimiterError, RateLimitTooSmall
from pytest_tooleffect.decide.turn_process import (
    TurnProcess,
    answer_once,
    count_tokens,
    import_litellm,
    keys_in_environment,
    preload_litellm,
)
from pytest_tooleffect.formats import Case, Policy, Price, ToolSpec
from pytest_tooleffect.oracle.names import NameMap, name_map  # re-exported: the mapping is the oracle's too
from pytest_tooleffect.util.exceptions import described
from pytest_tooleffect.util.redaction import register
from pytest_tooleffect.util.unicode import surrogate_problem

__all__ = ["DEFAULT_MAX_TOKENS", "PLACEHOLDER_KEY", "CacheEntryError", "ModelCache", "NameMap", "Price", "Turn",
           "TurnPool", "api_key", "build_request", "import_litellm", "name_map", "preload_litellm", "run_turn",
           "wait_turn"]

T = TypeVar("T")
#: seconds :meth:`TurnPool.close` waits for the event loop's thread to end its cancelled turns
LOOP_CLOSE_S = 5.0
#: seconds past a request's own bound that the child's answer is waited for
CHILD_GRACE_S = 5.0
#: The output-token cap of a live request when the policy sets none (``Policy.max_tokens``): a
#: decision is one call or a short reply, so this only stops a turn that runs away.
DEFAULT_MAX_TOKENS = 4096


def _map_history(messages: Sequence[Mapping[str, Any]], names: NameMap) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                tc = dict(tc)
                if isinstance(tc.get("function"), Mapping):
                    fn = dict(tc["function"])
                    fn["name"] = names.out(fn.get("name", ""))
                    tc["function"] = fn
                    tc.setdefault("type", "function")
                calls.append(tc)
            m["tool_calls"] = calls
        if m.get("role") == "tool" and m.get("name"):
            m["name"] = names.out(m["name"])
        out.append(m)
    return out


def build_request(case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy
                  ) -> tuple[dict[str, Any], NameMap]:
    """The litellm ``completion`` keyword arguments for one decision, and the name map.

    The policy's system prompt and tool descriptions override the family's; ``max_tokens`` is
    the policy's, else :data:`DEFAULT_MAX_TOKENS`.
    """
    names = name_map([t.name for t in tools])
    messages: list[dict[str, Any]] = []
    prompt = policy.system_prompt if policy.system_prompt is not None else system_prompt
    history = [m for m in case.messages if not (prompt is not None and m.get("role") == "system")]
    if prompt:
        messages.append({"role": "system", "content": prompt})
    messages += _map_history(history, names)
    specs = [{"type": "function", "function": {
        "name": names.out(t.name),
        "description": policy.tool_descriptions.get(t.name, t.description),
        "parameters": t.parameters or {"type": "object", "properties": {}},
    }} for t in tools]
    kwargs: dict[str, Any] = {"model": policy.model, "messages": messages}
    if specs:
        kwargs["tools"] = specs
    if policy.api_base:
        kwargs["api_base"] = policy.api_base
    if policy.temperature is not None:
        kwargs["temperature"] = policy.temperature
    kwargs["max_tokens"] = policy.max_tokens or DEFAULT_MAX_TOKENS
    return kwargs, names


#: The key sent to an ``api_base`` when neither the policy's ``api_key_env`` nor the provider's
#: usual variable holds one: OpenAI-compatible local servers started without ``--api-key`` want
#: some key and accept any.
PLACEHOLDER_KEY = "unused-local-key"


def api_key(model: str, api_base: str | None, api_key_env: str | None,
            keys_found: Callable[[str, str], bool] | None = None) -> str | None:
    """The API key of a request to ``model``, or ``None`` to let litellm read the provider's
    usual variable itself.

    In order: the variable ``api_key_env`` names (its value becomes a known secret, redacted
    from everything the run writes); with no ``api_key_env`` and no ``api_base``, ``None``
    (litellm reads ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, …); with an
    ``api_base``, ``None`` when litellm's ``validate_environment`` finds the provider's variable
    set, else :data:`PLACEHOLDER_KEY`.  ``keys_found(model, api_base)`` asks that question where
    litellm is (:meth:`TurnPool.keys_found`); by default, of litellm imported here.

    Raises:
        ProviderError: ``ApiKeyMissing``: ``api_key_env`` names a variable that is not set.
    """
    if api_key_env:
        value = os.environ.get(api_key_env)
        if not value:
            raise ProviderError("ApiKeyMissing", f"api_key_env {api_key_env}: the environment variable is not set")
        register(value)
        return value
    if not api_base:
        return None
    found = (keys_found or (lambda m, b: keys_in_environment(import_litellm(), m, b)))(model, api_base)
    return None if found else PLACEHOLDER_KEY


@dataclass
class Turn:
    """A model's answer at one decision point.

    Attributes:
        emitted: the assistant message (OpenAI shape) with tool names mapped back.
        cost: ``input_tokens``, ``output_tokens``, ``latency_ms`` (ms), ``cost_usd`` (``None`` when
            the price is unknown), ``priced_by`` (``litellm``, ``user``, or ``None``).
        provider_names: the names the provider used, where they differ from the originals.
        cached: the answer came from the on-disk cache (no request was made).
        rate_wait_ms: milliseconds spent waiting for the run-wide rate limit (not part of
            ``latency_ms``).
    """

    emitted: dict[str, Any]
    cost: dict[str, Any]
    provider_names: dict[str, str] = field(default_factory=dict)
    cached: bool = False
    rate_wait_ms: float = 0.0


class TurnPool:
    """The model turns of one process: one event loop on a daemon thread, at most
    ``concurrency`` requests in flight, each admitted by the run-wide rate limit first.

    Built once per process at configure time and kept in the config's stash; the decision
    fixture and the sandbox's rollouts submit to it, Ctrl-C cancels it.

    Args:
        concurrency: model turns in flight at once (at least 1).
        limit: the run-wide rate limit (shared by the run's processes), or ``None``.
        cache: the on-disk answer cache, or ``None``.
        process: make the requests in a child process (:mod:`.turn_process`: litellm is imported
            there, beside this process's work, and never here); else litellm is imported and
            called in this process.
    """

    def __init__(self, concurrency: int = 8, limit: Limiter | None = None, cache: ModelCache | None = None,
                 process: bool = False) -> None:
        self.concurrency = max(1, concurrency)
        self.limit = limit
        self.cache = cache
        self.process = TurnProcess() if process else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._semaphore: asyncio.Semaphore | None = None  # touched by the loop thread only

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=_run_loop, args=(loop,), name="tooleffect-model", daemon=True)
                self._thread.start()
                self._loop = loop
        return self._loop

    def start(self) -> None:
        """Start litellm's import now, so that it runs while pytest collects: in the child process
        (started here), or on a daemon thread of this one (:func:`preload_litellm`).
        """
        if self.process is not None:
            self.process.start()
        else:
            preload_litellm()

    def keys_found(self, model: str, api_base: str) -> bool:
        """Whether litellm's ``validate_environment`` finds the provider's key variable set (asked where litellm is)."""
        if self.process is None:
            return keys_in_environment(import_litellm(), model, api_base)
        _, future = self.process.call("keys", {"model": model, "api_base": api_base})
        return bool(future.result())

    async def answer(self, kwargs: Mapping[str, Any], timeout_s: float, bound_s: float, model: str,
                     prices: Mapping[str, Price]) -> dict[str, Any]:
        """One request (:func:`~.turn_process.answer_once`), here or in the child process; a
        cancelled wait cancels the child's request.
        """
        if self.process is None:
            return await answer_once(import_litellm(), kwargs, timeout_s, bound_s, model, prices)
        request_id, future = self.process.call("answer", {"kwargs": kwargs, "timeout_s": timeout_s, "bound_s": bound_s,
                                                          "model": model, "prices": prices})
        try:  # bounded here too: a child that stopped answering (frozen, swapping) must not hold the turn
            return await asyncio.wait_for(asyncio.wrap_future(future), bound_s + CHILD_GRACE_S)
        except TimeoutError:
            self.process.cancel(request_id)
            raise ProviderError("Timeout", f"no complete answer within {timeout_s:g} s per attempt ({bound_s:g} s in "
                                           "all; the model-turn process did not answer)") from None
        except asyncio.CancelledError:
            self.process.cancel(request_id)
            raise

    async def count(self, kwargs: Mapping[str, Any]) -> int:
        """The request's input tokens (:func:`~.turn_process.count_tokens`), here or in the child."""
        if self.process is None:
            return count_tokens(import_litellm(), kwargs)
        _, future = self.process.call("count", {"kwargs": kwargs})
        return int(await asyncio.wrap_future(future))

    def slot(self) -> asyncio.Semaphore:
        """The semaphore that bounds requests in flight (made on the loop thread at first use)."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._semaphore

    def submit(self, case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy,
               timeout_s: float = 60.0, prices: Mapping[str, Price] | None = None, api_key: str | None = None,
               trial: int = 1, retries: int = 0, started: threading.Event | None = None
               ) -> concurrent.futures.Future[Turn]:
        """Start one model turn and return its future (arguments as :func:`run_turn`'s; ``started`` is
        set once the turn holds a concurrency slot: from then on its request may be sent).

        A cached answer comes back as an already completed future.  Otherwise the turn is a
        coroutine around ``litellm.acompletion`` on this pool's event loop.

        Raises:
            ValueError: the policy has no model.
        """
        if not policy.model:
            raise ValueError(f"policy {policy.name} has no model")
        kwargs, names = build_request(case, tools, system_prompt, policy)
        cache = self.cache
        key = ModelCache.key(kwargs, trial) if cache is not None else ""
        done: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        try:
            hit = cache.get_turn(key, case.id) if cache is not None else None
        except CacheEntryError as exc:  # raised where the item waits for its turn, never here (a prefetch); a miss too
            done.set_exception(exc)
            return done
        if hit is not None:
            done.set_result(Turn(emitted=hit["emitted"], cost=hit["cost"],
                                 provider_names=hit.get("provider_names", {}), cached=True))
            return done
        if api_key is not None:
            kwargs["api_key"] = api_key
        if self.process is None:
            import_litellm()  # here, in the caller's thread, once: its import takes seconds
        coro = _turn(self, kwargs, names, policy.model, timeout_s, prices or {}, key, retries, started)
        return asyncio.run_coroutine_threadsafe(coro, self._event_loop())

    def submit_coroutine(self, make: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Run ``make()`` on this pool's event loop once a concurrency slot is free (an async
        agent's turn shares the slots with model turns).
        """

        async def bounded() -> T:
            async with self.slot():
                return await make()

        return asyncio.run_coroutine_threadsafe(bounded(), self._event_loop())

    def cancel(self) -> None:
        """Drop every turn not yet finished (Ctrl-C): those waiting for a slot never start, those
        in flight have their requests closed.  The event loop stays for later turns.
        """
        loop = self._loop
        if loop is None:
            return

        def cancel_all() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(cancel_all)

    def close(self) -> None:
        """Stop the event loop (turns still running are cancelled first) and wait, at most
        :data:`LOOP_CLOSE_S` seconds, for its thread to close it.

        A process that goes on after the run (``pytest.main`` called twice, pytester in-process)
        is left no running thread and no unclosed loop.
        """
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        self.cancel()
        loop.call_soon_threadsafe(loop.stop)
        self._loop = self._thread = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(LOOP_CLOSE_S)

    def close_process(self) -> None:
        """End the child process, if one was started (after :meth:`close`)."""
        if self.process is not None:
            self.process.close()


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until it is stopped; then let its cancelled turns end, end the threads of its
    default executor (``asyncio.to_thread``) and close it.
    """
    try:
        loop.run_forever()
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def _wall_bound(timeout_s: float, retries: int) -> float:
    """The wall-clock bound of one answer in seconds, retries and their backoff included (each
    attempt is bounded by ``_wall_bound(timeout_s, 0)``).

    The client's timeout bounds each read only, so a server that drips bytes would otherwise
    never time out.
    """
    return timeout_s * (retries + 1) + 2.0 * retries + 1.0


async def _admit(limit: Limiter, tokens: int, flight_s: float) -> tuple[int, float]:
    """Wait until the rate limit admits one request; its slot and the seconds held back (slept,
    so a request admitted at once counts as not having waited).
    """
    held = 0.0
    while True:  # in a thread: another process holding the file's lock must not stall the event loop
        slot, wait_s = await asyncio.to_thread(limit.try_acquire, tokens, flight_s)
        if slot is not None:
            return slot, held
        t0 = time.perf_counter()
        await asyncio.sleep(wait_s)
        held += time.perf_counter() - t0


async def _settle(limit: Limiter, slot: int, tokens: int | None) -> None:
    """Tell the limit a request ended.  A limiter failing now keeps the answer: the request's row
    then leaves the window on its own, a window after its wall-clock bound (later than it would:
    the limit stays safe), with its estimated tokens; the limiter's next admission, failing too,
    is where the failure is recorded.
    """
    try:
        await asyncio.to_thread(limit.settle, slot, tokens)
    except RateLimiterError:
        pass


async def _complete(pool: TurnPool, kwargs: dict[str, Any], model: str, timeout_s: float, retries: int,
                    prices: Mapping[str, Price]) -> tuple[dict[str, Any], float, float]:
    """One answer (:meth:`TurnPool.answer`'s), seconds spent on the provider, seconds waited for the limit.

    The only retry layer: litellm's own (``num_retries``) and the OpenAI client's
    (``max_retries``) are off, so ``retries`` N makes at most N + 1 requests.  A failure is
    retried only when :func:`retryable` says so, after the provider's ``Retry-After`` (at most
    :data:`MAX_RETRY_AFTER_S`) or else :func:`backoff_s`.  With a rate limit, every attempt is a
    request the limit admits first.  Each attempt is bounded on the wall clock by
    :func:`_wall_bound` of ``timeout_s``.
    """
    limit = pool.limit
    estimate = await pool.count(kwargs) if limit is not None else 0
    waited = spent = 0.0
    bound = _wall_bound(timeout_s, 0)
    for attempt in range(retries + 1):
        slot: int | None = None
        if limit is not None:
            try:
                slot, w = await _admit(limit, estimate, bound + 1.0)
            except RateLimitTooSmall as exc:
                raise ProviderError("RateLimit", f"{exc} (raise --tooleffect-tpm / ini tooleffect_tpm)") from None
            waited += w
        t0 = time.perf_counter()
        try:
            answer = await pool.answer(kwargs, timeout_s, bound, model, prices)
        except ProviderError as exc:
            if limit is not None and slot is not None:
                await _settle(limit, slot, None)
            spent += time.perf_counter() - t0
            if attempt == retries or not retryable(exc):
                raise
            after = exc.retry_after
            if after is not None and after > MAX_RETRY_AFTER_S:
                raise ProviderError(exc.kind, f"{exc.message} (the provider asked to retry after {after:g} s, "
                                              f"more than {MAX_RETRY_AFTER_S:g} s: not retried)") from None
            pause = after if after is not None else backoff_s(attempt)
            await asyncio.sleep(pause)
            spent += pause
            continue
        spent += time.perf_counter() - t0
        if limit is not None and slot is not None:
            tin, tout = answer["tokens"]["input_tokens"], answer["tokens"]["output_tokens"]
            # a count the provider did not report: the estimate stays (half a usage would understate it)
            await _settle(limit, slot, None if tin is None or tout is None else (tin + tout) or None)
        return answer, spent, waited
    raise AssertionError("unreachable")  # pragma: no cover


async def _turn(pool: TurnPool, kwargs: dict[str, Any], names: NameMap, model: str, timeout_s: float,
                prices: Mapping[str, Price], key: str, retries: int, started: threading.Event | None = None) -> Turn:
    async with pool.slot():
        if started is not None:
            started.set()
        answer, spent_s, waited_s = await _complete(pool, kwargs, model, timeout_s, retries, prices)
    data = answer["data"]
    try:
        message = dict(data["choices"][0]["message"])
    except Exception as exc:
        raise ProviderError("InvalidResponse", f"no choices[0].message in the response: {described(exc)}") from exc
    unwritable = surrogate_problem(message, "choices[0].message")  # a call's arguments (JSON text) read too
    if unwritable is not None:  # JSON's "\ud800" unpaired: no writer takes it, and a reading of it would be a guess
        raise ProviderError("InvalidResponse", f"{unwritable} (an unpaired \\uD800-\\uDFFF escape in the "
                                               "response's JSON): the answer is not scored, nor cached")
    wrong_role = message_role_problem(message, "choices[0].message")  # the user's or a tool's turn echoed back
    if wrong_role is not None:
        raise ProviderError("InvalidResponse", f"{wrong_role}; not scored")
    not_a_decision = stop_failure(data["choices"][0], kwargs.get("max_tokens"))
    if not_a_decision is not None:  # never cached: a later run asks again
        raise not_a_decision
    if native_reason(data["choices"][0]) == "MALFORMED_FUNCTION_CALL" and not message.get("tool_calls"):
        # Gemini could not parse the call the model wrote, and litellm maps that to "stop" with no
        # call: the agent's own malformed call (scoring rule 1), never an abstention
        message["tool_calls"] = [{"id": "malformed_function_call", "type": "function",
                                  "function": {"name": "", "arguments": ""}}]
    provider_names: dict[str, str] = {}
    calls = []
    for tc in message.get("tool_calls") or []:
        tc = dict(tc)
        fn = dict(tc.get("function") or {})
        original = names.back(fn.get("name") or "")
        if original != fn.get("name"):
            provider_names[original] = fn.get("name") or ""
        fn["name"] = original
        tc["function"] = fn
        calls.append(tc)
    message["tool_calls"] = calls
    cost = {**answer["tokens"], "latency_ms": round(spent_s * 1000, 3), "cost_usd": answer["cost_usd"],
            "priced_by": answer["priced_by"]}
    if pool.cache is not None:
        pool.cache.put(key, {"emitted": message, "cost": cost, "provider_names": provider_names})
    return Turn(emitted=message, cost=cost, provider_names=provider_names, rate_wait_ms=round(waited_s * 1000, 3))


def wait_turn(future: concurrent.futures.Future[Turn], timeout_s: float, retries: int = 0) -> Turn:
    """Wait for a turn.  The turn itself is bounded on the wall clock (``timeout_s`` per attempt,
    retries and backoff included) from the moment its request may start: time spent waiting for
    a concurrency slot or the rate limit is not part of the bound.

    Raises:
        ProviderError: the call failed, or no complete answer came in time.
        RateLimiterError: the run's rate limiter failed before the request could be admitted.
        CacheEntryError: under ``--tooleffect-cache read``, the stored turn does not validate, or none
            is stored (:class:`~.model_cache.CacheMissError`: no request was made).
    """
    try:
        return future.result()
    except concurrent.futures.CancelledError as exc:
        raise ProviderError("Cancelled", "the model turn was cancelled (interrupted run)") from exc


def run_turn(case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy,
             timeout_s: float = 60.0, prices: Mapping[str, Price] | None = None,
             api_key: str | None = None, cache: ModelCache | None = None, trial: int = 1, retries: int = 0,
             pool: TurnPool | None = None) -> Turn:
    """Ask the policy's model for its decision at one state (one litellm call, at most ``retries``
    more on 408, 429, 5xx, timeouts and lost connections).

    Args:
        case: the state.
        tools: the tools offered there.
        system_prompt: the family's system prompt (a policy override wins).
        policy: model, api base, temperature, overrides.
        timeout_s: request timeout in seconds.
        prices: per-model prices for models the cost map does not know.
        api_key: passed to litellm (``None``: litellm reads the provider's usual variable; see :func:`api_key`).
        cache: answer from / store into this on-disk cache.
        trial: the trial number (part of the cache key, so repeated trials stay distinct).
        retries: retries of a failed request (the only retry layer: litellm's ``num_retries`` is off).
        pool: the process's pool (its concurrency, rate limit and cache, ``cache`` then ignored);
            ``None``: a pool of one turn, closed after it.

    Returns:
        The :class:`Turn`.

    Raises:
        ProviderError: the provider failed or answered with an unreadable body (``InvalidResponse``:
            no message, or text that is not valid Unicode: a lone surrogate), or usage that is no
            count (``BadUsage``).
        CacheEntryError: the cache is read only and its entry for this turn does not validate, or it
            holds none (:class:`~.model_cache.CacheMissError`: no request made).
    """
    own = pool is None
    used = TurnPool(1, cache=cache) if pool is None else pool
    try:
        return wait_turn(used.submit(case, tools, system_prompt, policy, timeout_s, prices, api_key, trial, retries),
                         timeout_s, retries)
    finally:
        if own:
            used.close()
