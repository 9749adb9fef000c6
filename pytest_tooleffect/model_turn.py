"""One model turn through litellm: request building, reversible tool names, cost, faults.

litellm is imported lazily (it costs seconds) with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set
first, so the bundled cost map is used and nothing is fetched.  Tool names that providers
reject (the OpenAI and Anthropic rule is ``^[a-zA-Z0-9_-]{1,64}$``; ``calendar.create_event``
breaks it) are mapped to safe names before the call, in the tool list and in the history, and
mapped back after it; the record keeps both.

A provider failure (timeout, connection error, 4xx/5xx, an invalid body) raises
:class:`ProviderError`; the plugin raises it during setup, so pytest reports an error, never a
failed decision.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .models import Case, Policy, ToolSpec

__all__ = ["ModelCache", "NameMap", "Price", "ProviderError", "Turn", "build_request", "import_litellm", "name_map",
           "run_turn", "set_concurrency", "shutdown", "submit_turn", "wait_turn"]

SAFE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ProviderError(Exception):
    """The provider failed; not a decision of the agent.

    Attributes:
        kind: the exception's class name (``Timeout``, ``InternalServerError``, …).
        message: the provider's message, shortened.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class NameMap:
    """Reversible mapping between tool names and provider-safe names."""

    to_provider: Mapping[str, str]
    to_original: Mapping[str, str]

    def out(self, name: str) -> str:
        """Original → provider-safe (unknown names pass through)."""
        return self.to_provider.get(name, name)

    def back(self, name: str) -> str:
        """Provider-safe → original (unknown names pass through)."""
        return self.to_original.get(name, name)


def name_map(names: Iterable[str]) -> NameMap:
    """Map each name to a provider-safe one, keeping safe names as they are.

    Unsafe characters become ``_``; a name over 64 characters is cut and suffixed with a hash;
    a clash gets a numeric suffix.  The mapping is injective, so it reverses exactly.
    """
    names = list(dict.fromkeys(names))
    taken = {n for n in names if SAFE_NAME.match(n)}
    out: dict[str, str] = {}
    for n in names:
        if SAFE_NAME.match(n):
            out[n] = n
            continue
        base = re.sub(r"[^a-zA-Z0-9_-]", "_", n) or "tool"
        if len(base) > 64:
            base = base[:55] + "_" + hashlib.sha1(n.encode()).hexdigest()[:8]
        cand, k = base, 1
        while cand in taken:
            k += 1
            suffix = f"_{k}"
            cand = base[: 64 - len(suffix)] + suffix
        taken.add(cand)
        out[n] = cand
    return NameMap(out, {v: k for k, v in out.items()})


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

    The policy's system prompt and tool descriptions override the family's.
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
    return kwargs, names


_LITELLM: Any = None


def import_litellm() -> Any:
    """Import litellm once, with the local cost map and its debug output off."""
    global _LITELLM
    if _LITELLM is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm as module

        litellm: Any = module
        litellm.suppress_debug_info = True
        litellm.set_verbose = False
        litellm.drop_params = True
        _LITELLM = litellm
    return _LITELLM


@dataclass(frozen=True)
class Price:
    """A user price for a model litellm's cost map does not know, in USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass(frozen=True)
class ModelCache:
    """On-disk cache of model answers keyed by policy (model, parameters, prompt overrides), state
    and trial: one JSON file per key under ``directory``.

    litellm 1.110's own cache has no disk backend (its ``local`` cache lives in memory), so answers
    are stored here: the request keyword arguments litellm gets (which hold the policy's model,
    temperature, system prompt and tool descriptions, and the state's messages and tools), plus
    the trial number, hashed with SHA-256.

    Attributes:
        directory: where answers are stored.
        read: answer from the cache when a key is present.
        write: store fresh answers.
    """

    directory: Path
    read: bool = True
    write: bool = True

    @staticmethod
    def key(kwargs: Mapping[str, Any], trial: int) -> str:
        """The cache key of one request."""
        doc = {k: v for k, v in kwargs.items() if k != "api_key"}
        return hashlib.sha256(json.dumps([doc, trial], sort_keys=True, default=str).encode()).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        """A stored answer, or ``None``."""
        path = self.directory / f"{key}.json"
        if not self.read or not path.is_file():
            return None
        try:
            doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc

    def put(self, key: str, doc: Mapping[str, Any]) -> None:
        """Store an answer (atomically: written aside, then renamed)."""
        if not self.write:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(doc, default=str), encoding="utf-8")
        os.replace(tmp, self.directory / f"{key}.json")


@dataclass
class Turn:
    """A model's answer at one decision point.

    Attributes:
        emitted: the assistant message (OpenAI shape) with tool names mapped back.
        cost: ``input_tokens``, ``output_tokens``, ``latency_ms`` (ms), ``cost_usd`` (``None`` when
            the price is unknown), ``priced_by`` (``litellm``, ``user``, or ``None``).
        provider_names: the names the provider used, where they differ from the originals.
    """

    emitted: dict[str, Any]
    cost: dict[str, Any]
    provider_names: dict[str, str] = field(default_factory=dict)
    cached: bool = False


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_CONCURRENCY = 8


def set_concurrency(n: int) -> None:
    """Model turns in flight at once in this process (a new pool from the next call on)."""
    global _CONCURRENCY, _POOL
    if n != _CONCURRENCY and _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = None
    _CONCURRENCY = max(1, n)


def shutdown(cancel: bool = True) -> None:
    """Stop the pool; with ``cancel``, turns not yet started are dropped (Ctrl-C)."""
    global _POOL
    if _POOL is not None:
        _POOL.shutdown(wait=False, cancel_futures=cancel)
        _POOL = None


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=_CONCURRENCY, thread_name_prefix="tooleffect-model")
    return _POOL


def _price(litellm: Any, model: str, response: Any, prices: Mapping[str, Price],
           usage: Mapping[str, int | None]) -> tuple[float | None, str | None]:
    if usage.get("input_tokens") is None:
        return None, None
    try:
        litellm.get_model_info(model=model)
        known = True
    except Exception:  # litellm raises several types for an unmapped model
        known = False
    if known:
        try:
            return float(litellm.completion_cost(completion_response=response, model=model)), "litellm"
        except Exception:  # noqa: S110 - fall through to the user's table
            pass
    price = prices.get(model) or prices.get(model.split("/", 1)[-1])
    if price is not None and usage.get("input_tokens") is not None:
        cost = ((usage["input_tokens"] or 0) * price.input_per_mtok
                + (usage["output_tokens"] or 0) * price.output_per_mtok) / 1e6
        return cost, "user"
    return None, None


def submit_turn(case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy,
                timeout_s: float = 60.0, prices: Mapping[str, Price] | None = None, api_key: str | None = None,
                cache: ModelCache | None = None, trial: int = 1, retries: int = 0) -> concurrent.futures.Future[Turn]:
    """Start one model turn on the shared pool and return its future (see :func:`run_turn`).

    A cached answer comes back as an already completed future.  The pool's size is the
    concurrency set by :func:`set_concurrency`; the calls are litellm's own blocking client, one
    per pool thread, each waiting on the network with the GIL released.
    """
    if not policy.model:
        raise ValueError(f"policy {policy.name} has no model")
    kwargs, names = build_request(case, tools, system_prompt, policy)
    key = ModelCache.key(kwargs, trial) if cache is not None else ""
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        done: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        done.set_result(Turn(emitted=hit["emitted"], cost=hit["cost"], provider_names=hit.get("provider_names", {}),
                             cached=True))
        return done
    if api_key is not None:
        kwargs["api_key"] = api_key
    import_litellm()  # here, once, before any pool thread needs it (a module must not be imported by two threads)
    return _pool().submit(_call, kwargs, names, policy.model, timeout_s, prices or {}, cache, key, retries)


def _call(kwargs: dict[str, Any], names: NameMap, model: str, timeout_s: float, prices: Mapping[str, Price],
          cache: ModelCache | None, key: str, retries: int) -> Turn:
    litellm = import_litellm()
    t0 = time.perf_counter()
    try:
        # litellm retries 429s, 5xx and timeouts itself, with exponential backoff
        response = litellm.completion(**kwargs, timeout=timeout_s, num_retries=retries, max_retries=0)
    except Exception as exc:  # every provider failure is an error outcome, never a verdict
        raise ProviderError(type(exc).__name__, " ".join(str(exc).split())[:500]) from exc
    latency_ms = (time.perf_counter() - t0) * 1000
    try:
        data = response.model_dump()
        message = dict(data["choices"][0]["message"])
    except Exception as exc:
        raise ProviderError("InvalidResponse", f"no choices[0].message in the response: {exc}") from exc
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
    usage = data.get("usage") or {}
    tokens = {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")}
    if not usage:  # a provider that reports no usage: tokens and cost are unknown, not zero
        tokens = {"input_tokens": None, "output_tokens": None}
    cost_usd, priced_by = _price(litellm, model, response, prices, tokens)
    cost = {**tokens, "latency_ms": round(latency_ms, 3), "cost_usd": cost_usd, "priced_by": priced_by}
    if cache is not None:
        cache.put(key, {"emitted": message, "cost": cost, "provider_names": provider_names})
    return Turn(emitted=message, cost=cost, provider_names=provider_names)


def wait_turn(future: concurrent.futures.Future[Turn], timeout_s: float, retries: int = 0) -> Turn:
    """Wait for a turn, bounded on the wall clock (the client's timeout bounds each read only).

    Raises:
        ProviderError: the call failed, or no complete answer came in time.
    """
    bound = timeout_s * (retries + 1) + 2.0 * retries + 1.0
    try:
        return future.result(timeout=bound)
    except concurrent.futures.TimeoutError as exc:
        future.cancel()
        raise ProviderError("Timeout", f"no complete answer within {timeout_s:g} s") from exc


def run_turn(case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy,
             timeout_s: float = 60.0, prices: Mapping[str, Price] | None = None,
             api_key: str | None = None, cache: ModelCache | None = None, trial: int = 1, retries: int = 0) -> Turn:
    """Ask the policy's model for its decision at one state (one litellm call, ``retries`` more on
    429/5xx/timeouts).

    Args:
        case: the state.
        tools: the tools offered there.
        system_prompt: the family's system prompt (a policy override wins).
        policy: model, api base, temperature, overrides.
        timeout_s: request timeout in seconds.
        prices: per-model prices for models the cost map does not know.
        api_key: passed to litellm (local servers accept any key).
        cache: answer from / store into this on-disk cache.
        trial: the trial number (part of the cache key, so repeated trials stay distinct).
        retries: litellm's ``num_retries``.

    Returns:
        The :class:`Turn`.

    Raises:
        ProviderError: the provider failed or answered with an unreadable body.
    """
    future = submit_turn(case, tools, system_prompt, policy, timeout_s, prices, api_key, cache, trial, retries)
    return wait_turn(future, timeout_s, retries)
