"""The team's own agent as a policy: a Python callable, sync or async, asked for its decision at
each labelled state.

Part of the decision stage (``docs/design.md``, "Architecture").  A policy names its agent as
``agent: "package.module:function"`` (a family file's ``policies:``, ``[tool.tooleffect.policies.NAME]``
or ``--tooleffect-agent``), or a ``pytest_tooleffect_agent`` hook in a ``conftest.py`` returns
it.  The agent gets an :class:`AgentState` and returns the decision in any shape
:func:`~pytest_tooleffect.oracle.parse_emission` reads (an OpenAI message, a litellm
``ModelResponse``, Responses-API items, Anthropic blocks, Gemini parts), or an :class:`AgentTurn`
that adds its usage and cost.  An exception raised by the agent is an error outcome with its
traceback in the record, never a verdict.

What the agent returns is read once, through its own interface, into plain JSON data
(:func:`plain_decision`): the oracle, the sandbox and the record read that copy.  A value that
cannot be read so (a mapping whose ``get`` raises, a key that is no string, a set, a cycle, NaN,
more than :data:`MAX_DECISION_SIZE` characters) is a one-line agent error, never the plugin's
traceback and never a verdict on what a reading happened to make of it.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import time
import traceback
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_tooleffect.collect.agents import Agent, AgentError
from pytest_tooleffect.decide.agent_exit import agent_turn
from pytest_tooleffect.decide.agent_threads import note_new_threads
from pytest_tooleffect.decide.reported_usage import agent_usage
from pytest_tooleffect.formats import Case, Policy, ToolSpec
from pytest_tooleffect.util.bounds import usage_problem
from pytest_tooleffect.util.exceptions import described, exception_text
from pytest_tooleffect.util.unicode import lone_surrogate, surrogate_problem, without_surrogates

__all__ = ["DECISION_ROLES", "MAX_DECISION_DEPTH", "MAX_DECISION_SIZE", "AgentState", "AgentTurn", "agent_cost",
           "agent_state", "call_agent", "call_agent_bounded", "plain_decision", "run_agent", "turn_role_problem"]

#: The most an agent's decision may hold: characters of its strings and keys plus one per value.
#: A model's turn is bounded by its output cap (4,096 tokens by default, some 16,000 characters);
#: a decision past a million is a bug of the agent (a file, a log, a whole conversation returned).
MAX_DECISION_SIZE = 1_000_000
#: The deepest an agent's decision may nest (a chat message with calls and their arguments is
#: some six levels; JSON arguments rarely pass twenty).
MAX_DECISION_DEPTH = 64

@dataclass(frozen=True)
class AgentState:
    """What an agent sees at one decision point.

    Attributes:
        case_id: the case's id.
        messages: the conversation so far, OpenAI chat form (system, user, assistant, tool);
            in a rollout, with the agent's own calls and their results appended.
        tools: the tools offered there, OpenAI form (``{"type": "function", "function": {"name",
            "description", "parameters"}}``), with their original names (dots included).
        system_prompt: the family's system prompt (the policy's override when it has one), or ``None``.
        policy: the policy as given (``name``, ``agent``, ``temperature``, ``api_base``,
            ``system_prompt``, ``tool_descriptions``, and ``settings``: the free-form settings a
            policy may carry for its agent).
        trial: 1…K under ``--tooleffect-repeats K``.
        step: 1 for the decision under test, 2… for a rollout's later steps.
        timezone: the user's IANA time zone, when the case says.
    """

    case_id: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...]
    system_prompt: str | None
    policy: Mapping[str, Any]
    trial: int = 1
    step: int = 1
    timezone: str | None = None


@dataclass(frozen=True)
class AgentTurn:
    """A decision with what it cost, for an agent that knows its usage.

    Attributes:
        emitted: the decision (any shape ``parse_emission`` reads).
        input_tokens: tokens sent to the model(s), or ``None`` when unknown.
        output_tokens: tokens received, or ``None``.
        cost_usd: money spent in US dollars, or ``None``.
        extra: further fields kept in the record under ``agent`` (JSON values).
    """

    emitted: Any
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def is_async(agent: Agent) -> bool:
    """The agent is an ``async def`` function (or an object whose ``__call__`` is)."""
    return inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(type(agent).__call__)


def agent_state(case: Case, tools: Sequence[ToolSpec], system_prompt: str | None, policy: Policy,
                trial: int = 1, step: int = 1) -> AgentState:
    """The state an agent is called with (the policy's prompt and tool-description overrides applied).

    Messages, tool schemas and the policy are deep copies: an agent that edits its state changes
    neither the case, nor the family's schemas the oracle scores with, nor the next policy's state.
    """
    specs = tuple({"type": "function", "function": {
        "name": t.name,
        "description": policy.tool_descriptions.get(t.name, t.description),
        "parameters": copy.deepcopy(t.parameters) or {"type": "object", "properties": {}},
    }} for t in tools)
    prompt = policy.system_prompt if policy.system_prompt is not None else system_prompt
    return AgentState(case_id=case.id, messages=tuple(copy.deepcopy(list(case.messages))), tools=specs,
                      system_prompt=prompt, policy=policy.model_dump(exclude_none=True), trial=trial, step=step,
                      timezone=case.timezone)


def _said(exc: BaseException) -> str:
    """``Type: message`` of an exception on one line (at most 200 characters), even when its
    ``__str__`` raises (:func:`~pytest_tooleffect.util.exceptions.described`).
    """
    return described(exc, 200)


class _NotData(Exception):
    """A part of the agent's return value that is not JSON data (the reason, with where it is)."""


class _TooLarge(Exception):
    """The agent's return value is larger than :data:`MAX_DECISION_SIZE`."""


def _where(path: str) -> str:
    if not path:
        return "at the top"
    return f"at {path}" if len(path) <= 120 else f"at …{path[-119:]}"


def _key(k: Any, path: str) -> str:
    if type(k) is str:
        return k
    if isinstance(k, str):
        return str.__str__(k)  # the characters, whatever the subclass's __str__, __eq__ or __hash__ do
    raise _NotData(f"a key that is {type(k).__name__} ({_short(k)}), not a string, {_where(path)}")


def _unicode(text: str, path: str, key: bool = False) -> None:
    """A string of the agent's that is not valid Unicode (a lone surrogate) is no decision: it
    cannot be written to a record, and a reading of it with the code point replaced would be the
    plugin's guess.
    """
    found = lone_surrogate(text)
    if found is not None:
        what = "a key" if key else "a string"
        raise _NotData(f"{what} {_where(path)} holds {found[1]}, a lone surrogate, at character {found[0]}: not "
                       "valid Unicode text")


def _short(v: Any) -> str:
    try:
        text = repr(v)
    except Exception:
        return "unprintable"
    return text if len(text) <= 40 else text[:39] + "…"


def _step(path: str, key: str) -> str:
    shown = key if key.isidentifier() else json.dumps(key[:40])
    return f"{path}.{shown}" if path and key.isidentifier() else f"{path}[{shown}]" if path else shown


class _Reader:
    """One walk over an agent's return value, into plain JSON data (see :func:`plain_decision`)."""

    def __init__(self) -> None:
        self.left = MAX_DECISION_SIZE
        self.open: set[int] = set()  # the containers on the path being read: one seen again is a cycle

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise _TooLarge

    def read(self, v: Any, path: str, depth: int) -> Any:
        t = type(v)
        if t is str:
            self.spend(1 + len(v))
            _unicode(v, path)
            return v
        self.spend(1)
        if v is None or t is bool or t is int:
            return v
        if t is float:
            if not math.isfinite(v):
                raise _NotData(f"{v!r} {_where(path)}: not a JSON number")
            return v
        if depth >= MAX_DECISION_DEPTH:
            raise _NotData(f"nested deeper than {MAX_DECISION_DEPTH} levels {_where(path)}")
        if id(v) in self.open:
            raise _NotData(f"it holds itself {_where(path)} (a cycle)")
        self.open.add(id(v))
        try:
            return self._container(v, t, path, depth)
        finally:
            self.open.discard(id(v))

    def _container(self, v: Any, t: type, path: str, depth: int) -> Any:
        if t is dict:  # its own data: a plain dict overrides nothing
            return self._mapping(list(dict.items(v)), path, depth)
        if t is list or t is tuple:
            return [self.read(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
        if isinstance(v, Mapping):  # through the interface a reader uses: iteration and get()
            return self._mapping([(k, v.get(k)) for k in list(iter(v))], path, depth)
        if isinstance(v, (list, tuple)):
            return [self.read(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(list(iter(v)))]
        if isinstance(v, str):
            return self.read(str.__str__(v), path, depth)
        if isinstance(v, int):
            return int.__int__(v)
        if isinstance(v, float):
            return self.read(float.__float__(v), path, depth)
        dump = getattr(v, "model_dump", None)  # a pydantic model: litellm's, the OpenAI or Anthropic SDK's
        if callable(dump):
            return self.read(dump(), path, depth + 1)
        raise _NotData(f"a value of type {t.__name__} {_where(path)}: not JSON data (objects with string keys, "
                       "arrays, strings, finite numbers, true, false, null)")

    def _mapping(self, items: list[tuple[Any, Any]], path: str, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, x in items:
            key = _key(k, path)
            _unicode(key, path, key=True)
            if key in out:
                raise _NotData(f"two keys read as {json.dumps(key[:40])} {_where(path)}")
            self.spend(len(key))
            out[key] = self.read(x, _step(path, key), depth + 1)
        return out


def plain_decision(value: Any) -> Any:
    """What an agent returned, read once into plain JSON data: dicts with string keys, lists,
    strings, finite numbers, booleans and ``None`` (tuples become lists; a pydantic model, at any
    depth, its ``model_dump()``; a ``str``, ``int`` or ``float`` subclass its plain value).

    A mapping other than a plain dict is read through its iteration and ``get()``, a sequence other
    than a list or tuple through its iteration: what a reader of the value would call.

    Args:
        value: the agent's return value (or an :class:`AgentTurn`'s ``emitted``).

    Returns:
        The plain copy.  Whether it is a decision is :func:`~pytest_tooleffect.oracle.parse_emission`'s
        to say.

    Raises:
        AgentError: ``AgentReturnedUnreadable`` (a key that is no string, a value that is not JSON
            data: a set, bytes, an object, NaN; a cycle; deeper than :data:`MAX_DECISION_DEPTH`;
            reading it raised) or ``AgentReturnedTooLarge`` (past :data:`MAX_DECISION_SIZE`), one line each.
    """
    name = type(value).__name__
    try:
        return _Reader().read(value, "", 0)
    except _TooLarge:
        raise AgentError("AgentReturnedTooLarge", f"the agent returned a {name} holding more than "
                                                  f"{MAX_DECISION_SIZE:,} characters and values: no decision is "
                                                  "that large (a file, a log or a whole conversation returned?)"
                         ) from None
    except _NotData as exc:
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {name}, which is no decision: "
                                                    f"{exc}"[:500]) from None
    except (RecursionError, MemoryError):  # a model_dump() that recurses or grows without end
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {name}, which cannot be read: it "
                                                    "recurses or grows without end") from None
    except Exception as exc:  # the value's own methods raised (get, __iter__, model_dump, ...)
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {name}, which cannot be read: reading "
                                                    f"it raised {_said(exc)}") from None


#: The roles a decision's message may carry: the assistant's (OpenAI, Anthropic, Responses-API
#: items) and Gemini's ``model``.  A message without a role is read as the assistant's.
DECISION_ROLES = frozenset({"assistant", "model"})


def _first(value: Any, key: str) -> Any:
    items = value.get(key) if isinstance(value, dict) else None
    return items[0] if isinstance(items, list) and items else None


def turn_role_problem(emitted: Any) -> str | None:
    """What is wrong with the role of the message(s) in an agent's decision, in one line, or ``None``.

    A decision is the assistant's own turn: an agent that returns a message of the conversation (the
    user's last question, ``state.messages[-1]``; a system or tool message) returned no decision, and
    scoring its text as a reply would credit the user's words to the agent.

    Args:
        emitted: the decision as plain JSON data (:func:`plain_decision`): a message, a litellm
            ``ModelResponse``'s dump (``choices[0].message``), Gemini's ``candidates[0].content``,
            Responses-API ``output`` items or a list of items or blocks.

    Returns:
        ``the agent returned a turn of role 'user' (role): …`` naming the role and where it is, or ``None``
        when every role present is one of :data:`DECISION_ROLES`.
    """
    found: list[tuple[str, Any]] = []
    if isinstance(emitted, dict):
        found.append(("role", emitted.get("role")))
        message = _first(emitted, "choices")
        if isinstance(message, dict) and isinstance(message.get("message"), dict):
            found.append(("choices[0].message.role", message["message"].get("role")))
        content = _first(emitted, "candidates")
        if isinstance(content, dict) and isinstance(content.get("content"), dict):
            found.append(("candidates[0].content.role", content["content"].get("role")))
        items = emitted.get("output")
        if isinstance(items, list):
            found += [(f"output[{i}].role", x.get("role")) for i, x in enumerate(items) if isinstance(x, dict)]
    elif isinstance(emitted, list):
        found += [(f"[{i}].role", x.get("role")) for i, x in enumerate(emitted) if isinstance(x, dict)]
    for where, role in found:
        if role is not None and not (isinstance(role, str) and role in DECISION_ROLES):
            return (f"the agent returned a turn of role {_short(role)} ({where}), not the assistant's: a decision "
                    "is the assistant's own turn (role 'assistant'); a message of the conversation (the user's, "
                    "the system's, a tool's) is none")
    return None


def _failure(exc: BaseException) -> AgentError:
    """The agent's exception as its error: its own type, its message (safe when its ``__str__``
    raises: :func:`~pytest_tooleffect.util.exceptions.exception_text`) and its traceback.
    """
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception:  # a traceback that cannot be formatted (an exception whose attributes raise)
        tb = f"{type(exc).__name__}: <its traceback cannot be formatted>"
    return AgentError(type(exc).__name__, " ".join(exception_text(exc).split())[:500], without_surrogates(tb[-8000:]))


def agent_cost(result: Any, latency_s: float) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Split an agent's return value into the decision, its cost and record fields.

    Returns:
        ``(emitted, cost, extra)``: ``emitted`` is the decision as plain JSON data
        (:func:`plain_decision`); cost has ``input_tokens``, ``output_tokens``, ``latency_ms``
        (wall milliseconds of the call), ``cost_usd`` (unknown values ``None``; a litellm
        ``ModelResponse``'s usage is read, 0 in and 0 out as unknown:
        :func:`~.reported_usage.agent_usage`); extra is ``{"agent": {...}}`` when the agent gave any.

    Raises:
        AgentError: the agent returned ``None`` (``AgentReturnedNothing``: return a message with
            no tool calls to call nothing), tokens that are not whole numbers from 0 to
            :data:`~pytest_tooleffect.util.bounds.MAX_TOKENS` or a cost that
            is not a number of US dollars from 0 to :data:`~pytest_tooleffect.util.bounds.MAX_COST_USD`
            (``AgentBadUsage``), ``extra`` that is not JSON
            (``AgentBadExtra``), or a value that is not JSON data or cannot be read
            (``AgentReturnedUnreadable``, ``AgentReturnedTooLarge``: :func:`plain_decision`; a string
            holding a lone surrogate too, or a tool call's ``arguments`` JSON text reading as one), or a
            message that is not the assistant's
            (``AgentReturnedWrongRole``: :func:`turn_role_problem`).  A
            decision :func:`~pytest_tooleffect.oracle.parse_emission` cannot read is refused where
            the decision is parsed, once
            (:func:`~pytest_tooleffect.decide.decision.parse_turn`: ``AgentReturnedUnreadable``).
    """
    cost: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "latency_ms": round(latency_s * 1000, 3),
                            "cost_usd": None}
    extra: dict[str, Any] = {}
    if isinstance(result, AgentTurn):
        cost.update(input_tokens=result.input_tokens, output_tokens=result.output_tokens, cost_usd=result.cost_usd)
        if result.extra:
            extra["agent"] = dict(result.extra)
        result = result.emitted
    elif not isinstance(result, Mapping):
        try:
            usage = getattr(result, "usage", None)
            if usage is not None:  # litellm's Usage(0, 0) where the provider sent none: unknown (reported_usage)
                cost["input_tokens"], cost["output_tokens"] = agent_usage(usage)
        except Exception as exc:  # an object whose attributes raise: its decision cannot be read either
            raise AgentError("AgentReturnedUnreadable", f"the agent returned {type(result).__name__}, which cannot "
                                                        f"be read: reading its usage raised {_said(exc)}") from None
    if result is None:
        raise AgentError("AgentReturnedNothing", "the agent returned None; to call no tool, return a message "
                                                 "without tool calls, e.g. {'role': 'assistant', 'content': '...'}")
    problem = usage_problem(cost["input_tokens"], cost["output_tokens"], cost["cost_usd"])
    if problem is not None:
        raise AgentError("AgentBadUsage", problem)
    if extra:
        try:
            json.dumps(extra["agent"], allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise AgentError("AgentBadExtra", f"AgentTurn.extra must hold JSON values: {exception_text(exc)}") from None
        unwritable = surrogate_problem(extra["agent"], "extra")
        if unwritable is not None:
            raise AgentError("AgentBadExtra", f"AgentTurn.{unwritable}")
    emitted = plain_decision(result)
    unreadable = surrogate_problem(emitted)  # its strings are checked as read: what is left, a call's arguments text
    if unreadable is not None:
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {type(result).__name__}, which is no "
                                                    f"decision: {unreadable}"[:500])
    role = turn_role_problem(emitted)
    if role is not None:
        raise AgentError("AgentReturnedWrongRole", role)
    return emitted, cost, extra


def _caught(exc: BaseException, *, main_thread: bool) -> bool:
    """An agent's exception that is its failure (an error outcome), not the run's: anything but a
    Ctrl-C in the main thread (a ``SystemExit``, a ``KeyboardInterrupt`` raised by the agent's own
    code off the main thread, any ``BaseException`` subclass) and pytest's own outcomes.
    """
    if main_thread and isinstance(exc, KeyboardInterrupt):
        return False
    return not type(exc).__module__.startswith("_pytest")


def _called(agent: Agent, state: AgentState, *, main_thread: bool = True) -> Any:
    """The agent's return value (an awaitable for an async agent); its exception as an AgentError."""
    try:
        return agent(state)
    except BaseException as exc:
        if not _caught(exc, main_thread=main_thread):
            raise
        raise _failure(exc) from exc


async def _awaited(result: Awaitable[Any]) -> Any:
    import asyncio

    try:
        return await result
    except asyncio.CancelledError:  # the pool cancels it (timeout, interrupted run): not the agent's failure
        raise
    except BaseException as exc:  # on the pool's loop thread a SystemExit would end the loop: keep it here
        if not _caught(exc, main_thread=False):
            raise
        raise _failure(exc) from exc


def call_agent_bounded(agent: Agent, state: AgentState, timeout_s: float) -> tuple[Any, dict[str, Any],
                                                                                    dict[str, Any]]:
    """Call a sync agent as :func:`call_agent` does, in a daemon thread, waiting at most ``timeout_s``.

    A thread cannot be stopped from outside: an agent that hangs is left running there (a daemon
    thread never holds the process at exit) and its item becomes an error outcome.  A non-daemon
    thread the agent starts is noted (:mod:`.agent_threads`): it cannot hold the process either.

    Returns:
        ``(emitted, cost, extra)`` as :func:`agent_cost` returns them.

    Raises:
        AgentError: as :func:`call_agent`, or ``Timeout`` when no decision came within ``timeout_s``.
    """
    import threading

    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["result"] = call_agent(agent, state, main_thread=False)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    before = threading.enumerate()
    worker = threading.Thread(target=run, name=f"tooleffect-agent-{state.case_id}", daemon=True)
    worker.start()
    try:
        finished = done.wait(timeout_s)
    finally:
        note_new_threads(before, _name(agent), own=worker)
    if not finished:
        raise AgentError("Timeout", f"the agent gave no decision within {timeout_s:g} s (--tooleffect-timeout); "
                                    "it is left running in its thread")
    if "error" in box:
        raise box["error"]
    return box["result"]  # type: ignore[no-any-return]


def call_agent(agent: Agent, state: AgentState, *, main_thread: bool = True) -> tuple[Any, dict[str, Any],
                                                                                      dict[str, Any]]:
    """Call a sync agent (an awaitable it returns is run to completion on a new event loop).

    Returns:
        ``(emitted, cost, extra)`` as :func:`agent_cost` returns them.

    Raises:
        AgentError: the agent raised (its traceback kept; a ``SystemExit`` or another
            ``BaseException`` too, but not Ctrl-C; ``AgentCalledExit`` for a call of ``os._exit``,
            ``os.abort`` or ``os.exec*``: :mod:`.agent_exit`), returned ``None``, bad usage
            (``AgentBadUsage``: negative, NaN or infinite tokens or cost), or a value that cannot
            be read as JSON data (``AgentReturnedUnreadable``, ``AgentReturnedTooLarge``).
    """
    t0 = time.perf_counter()
    with agent_turn(_name(agent)):
        result = _called(agent, state, main_thread=main_thread)
        if inspect.isawaitable(result):
            import asyncio

            result = asyncio.run(_awaited(result))
    return _read(result, time.perf_counter() - t0)


async def run_agent(agent: Agent, state: AgentState) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Await an async agent (on the turn pool's event loop).

    Returns:
        ``(emitted, cost, extra)`` as :func:`agent_cost` returns them.

    Raises:
        AgentError: the agent raised (its traceback kept), returned ``None``, or a value that cannot
            be read as JSON data.
    """
    import threading

    before = threading.enumerate()
    t0 = time.perf_counter()
    try:
        with agent_turn(_name(agent)):
            result = _called(agent, state, main_thread=False)
            if inspect.isawaitable(result):
                result = await _awaited(result)
    finally:
        note_new_threads(before, _name(agent))
    return _read(result, time.perf_counter() - t0)


def _name(agent: Agent) -> str:
    """``module.qualname`` of an agent, as a message names it."""
    try:
        return f"{getattr(agent, '__module__', None) or '?'}.{getattr(agent, '__qualname__', type(agent).__qualname__)}"
    except Exception:
        return type(agent).__qualname__


def _read(result: Any, latency_s: float) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """:func:`agent_cost` of what the agent returned; whatever reading it raises is the agent's
    one-line error (``AgentReturnedUnreadable``), never the plugin's traceback.
    """
    try:
        return agent_cost(result, latency_s)
    except AgentError:
        raise
    except Exception as exc:
        raise AgentError("AgentReturnedUnreadable", f"the agent returned {type(result).__name__}, which cannot be "
                                                    f"read: reading it raised {_said(exc)}") from None
