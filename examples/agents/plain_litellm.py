"""An example agent: a plain function that builds its own prompt and calls litellm.

It is what many teams' agents look like inside: their own system prompt wording, the product's
prompt, the conversation, the tools, one ``litellm.completion`` call.  pytest-tooleffect calls it
at every labelled state with an :class:`~pytest_tooleffect.decide.agent.AgentState` and scores what it
returns.  Run it as a policy (from the repository root; the examples/agents/README.md has more)::

    TOOLEFFECT_EXAMPLE_MODEL=openai/gpt-4o-mini \
        pytest cases/ --tooleffect-agent plain=examples.agents.plain_litellm:decide

``decide`` is synchronous (one state at a time); ``adecide`` is the same agent on
``litellm.acompletion``, which the plugin runs ``--tooleffect-concurrency`` at a time.

Settings (``state.policy["settings"]``, from a policy's ``settings:`` table), each with an
environment-variable fallback:

* ``model`` (``TOOLEFFECT_EXAMPLE_MODEL``): a litellm model name, e.g. ``openai/gpt-4o-mini``.
* ``api_base`` (``TOOLEFFECT_EXAMPLE_API_BASE``): an OpenAI-compatible server, e.g. a local vLLM.
* ``api_key_env`` (default ``TOOLEFFECT_EXAMPLE_API_KEY``): the variable holding the key; when it
  is unset, a placeholder key is sent to a local ``api_base``, and with no ``api_base`` litellm
  reads the provider's own variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...).
* ``temperature`` (default 0), ``timeout_s`` (default 60).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_tooleffect.decide.agent import AgentState, AgentTurn
from pytest_tooleffect.decide.model_turn import NameMap, import_litellm, name_map

__all__ = ["AGENT_PROMPT", "LOCAL_KEY", "adecide", "build_request", "config", "decide", "to_turn"]

#: The agent's own instructions, put before the product's system prompt.
AGENT_PROMPT = (
    "You are an assistant that acts through tools. Call a tool only when the user's request needs its "
    "result or its effect and you do not have that already. When the conversation already holds what "
    "you need, when a detail you need is missing, or when the user only thanks you or confirms, answer "
    "in text and call no tool. Never repeat a call whose result is already in the conversation."
)

#: The key sent to a local OpenAI-compatible server that wants one but checks none.
LOCAL_KEY = "unused-local-key"


def _litellm() -> Any:
    """litellm, imported at the first decision, as the plugin imports it for its own model turns.

    ``import_litellm`` reads litellm's bundled price map (no download at import) and turns its
    debug output off.  Importing at the first call rather than with this module matters under
    ``filterwarnings = error`` (this repository's setting): litellm silences a pydantic warning of
    its own with a ``warnings`` filter it adds at import, and pytest puts the filters back as they
    were after collection, so a litellm imported while the agent is collected loses that filter,
    and its first call raises the warning.
    """
    return import_litellm()


def config(state: AgentState) -> dict[str, Any]:
    """The agent's configuration: the policy's settings, else the environment.

    Args:
        state: the state the agent is asked at (its ``policy["settings"]`` is read).

    Returns:
        ``model``, ``api_base`` (or ``None``), ``api_key`` (or ``None``: litellm's own lookup),
        ``temperature`` and ``timeout_s``.

    Raises:
        ValueError: no model is configured.
    """
    settings: Mapping[str, Any] = state.policy.get("settings") or {}
    model = settings.get("model") or os.environ.get("TOOLEFFECT_EXAMPLE_MODEL")
    if not model:
        raise ValueError("no model: set the policy's settings.model or TOOLEFFECT_EXAMPLE_MODEL "
                         "(a litellm model name such as openai/gpt-4o-mini)")
    api_base = settings.get("api_base") or os.environ.get("TOOLEFFECT_EXAMPLE_API_BASE") or None
    api_key = os.environ.get(settings.get("api_key_env") or "TOOLEFFECT_EXAMPLE_API_KEY")
    if not api_key and api_base:
        api_key = LOCAL_KEY
    return {"model": model, "api_base": api_base, "api_key": api_key or None,
            "temperature": float(settings.get("temperature", 0.0)), "timeout_s": float(settings.get("timeout_s", 60))}


def _system_prompt(state: AgentState) -> str:
    """The agent's own wording, then the product's prompt, then what the agent knows of the user."""
    parts = [AGENT_PROMPT]
    if state.system_prompt:
        parts.append(state.system_prompt.strip())
    parts += [str(m.get("content") or "").strip() for m in state.messages if m.get("role") == "system"]
    if state.timezone:
        parts.append(f"The user's time zone is {state.timezone}.")
    return "\n\n".join(p for p in parts if p)


def _history(messages: Sequence[Mapping[str, Any]], names: NameMap) -> list[dict[str, Any]]:
    """The conversation without system messages, tool names made provider-safe, arguments as JSON text."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "system":
            continue
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc.get("function") or {})
                args = fn.get("arguments")
                fn["name"] = names.out(str(fn.get("name", "")))
                fn["arguments"] = args if isinstance(args, str) else json.dumps(args or {})
                calls.append({**tc, "type": "function", "function": fn})
            m["tool_calls"] = calls
        if m.get("role") == "tool" and m.get("name"):
            m["name"] = names.out(str(m["name"]))
        out.append(m)
    return out


def build_request(state: AgentState) -> tuple[dict[str, Any], NameMap]:
    """The ``litellm.completion`` keyword arguments for one state, and the tool-name map.

    Providers reject tool names outside ``^[a-zA-Z0-9_-]{1,64}$`` (``calendar.create_event``), so
    the tools go out under :func:`pytest_tooleffect.decide.model_turn.name_map`'s safe names, which map
    back exactly.

    Args:
        state: the state the agent is asked at.

    Returns:
        ``(kwargs, names)``.
    """
    cfg = config(state)
    names = name_map(t["function"]["name"] for t in state.tools)
    tools = [{"type": "function", "function": {**t["function"], "name": names.out(t["function"]["name"])}}
             for t in state.tools]
    kwargs: dict[str, Any] = {
        "model": cfg["model"],
        "messages": [{"role": "system", "content": _system_prompt(state)}, *_history(state.messages, names)],
        "temperature": cfg["temperature"],
        "timeout": cfg["timeout_s"],
    }
    if tools:
        kwargs["tools"] = tools
    if cfg["api_base"]:
        kwargs["api_base"] = cfg["api_base"]
    if cfg["api_key"]:
        kwargs["api_key"] = cfg["api_key"]
    return kwargs, names


def to_turn(response: Any, names: NameMap) -> AgentTurn:
    """The decision in a litellm response: an OpenAI assistant message with the original tool names,
    the tokens it used and its price (``None`` when litellm's price map does not know the model).
    """
    message = response.choices[0].message
    emitted: dict[str, Any] = {"role": "assistant", "content": message.content}
    calls = []
    for tc in message.tool_calls or []:
        calls.append({"id": tc.id, "type": "function",
                      "function": {"name": names.back(tc.function.name), "arguments": tc.function.arguments}})
    if calls:
        emitted["tool_calls"] = calls
    usage = getattr(response, "usage", None)
    try:
        cost: float | None = float(_litellm().completion_cost(completion_response=response))
    except Exception:  # a model litellm's map has no price for: unknown, never 0
        cost = None
    renamed = {k: v for k, v in names.to_provider.items() if k != v}
    return AgentTurn(emitted=emitted,
                     input_tokens=getattr(usage, "prompt_tokens", None),
                     output_tokens=getattr(usage, "completion_tokens", None),
                     cost_usd=cost,
                     extra={"model": response.model, **({"tool_names": renamed} if renamed else {})})


def decide(state: AgentState) -> AgentTurn:
    """The agent's decision at ``state`` (one blocking ``litellm.completion`` call).

    Args:
        state: the conversation so far, the tools offered, the product's system prompt, the policy.

    Returns:
        The assistant message (tool calls or text) with its usage and cost.
    """
    kwargs, names = build_request(state)
    return to_turn(_litellm().completion(**kwargs), names)


async def adecide(state: AgentState) -> AgentTurn:
    """:func:`decide` on ``litellm.acompletion``: the plugin awaits many of these at once.

    Args:
        state: the conversation so far, the tools offered, the product's system prompt, the policy.

    Returns:
        The assistant message (tool calls or text) with its usage and cost.
    """
    kwargs, names = build_request(state)
    return to_turn(await _litellm().acompletion(**kwargs), names)
