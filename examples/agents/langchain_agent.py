"""An example agent built on LangChain: a prompt template piped into ``ChatOpenAI`` with the
state's tools bound, asked at every labelled state.

Why LangChain: it is the most widely used agent framework on PyPI (``langchain`` is downloaded
more than pydantic-ai, openai-agents, LlamaIndex or CrewAI), so it is the framework a team that
brings its own agent is most likely to have built on; and ``langchain-openai``'s ``ChatOpenAI``
speaks to any OpenAI-compatible server (vLLM, Ollama, llama.cpp, a proxy), which is how this
example is tested against the plugin's local scripted server.  The same shape fits any LangChain chat model with
``bind_tools`` (``ChatAnthropic``, ``ChatGoogleGenerativeAI``, ...).

Two ways to run it (examples/agents/README.md has the command lines):

* the module-level functions, by import path:
  ``pytest cases/ --tooleffect-agent langchain=examples.agents.langchain_agent:decide``
  (``adecide`` is the async one);
* the ``pytest_tooleffect_agent`` hook in ``examples/agents/conftest.py``, which builds a
  :class:`LangChainAgent` from a named policy's settings (the pytest-idiomatic way for an agent
  object built in a ``conftest.py``).

Settings (``state.policy["settings"]``, or :meth:`LangChainAgent.from_settings`):

* ``model`` (fallback ``TOOLEFFECT_EXAMPLE_MODEL``): the OpenAI model name; an ``openai/``
  prefix, as litellm names models, is dropped, so one variable serves both examples.
* ``api_base`` (fallback ``TOOLEFFECT_EXAMPLE_API_BASE``): an OpenAI-compatible server.
* ``api_key_env`` (default ``TOOLEFFECT_EXAMPLE_API_KEY``): the variable holding the key; when it
  is unset, a local ``api_base`` gets a placeholder key and OpenAI itself ``OPENAI_API_KEY``.
* ``temperature`` (0), ``timeout_s`` (60), ``max_retries`` (2).
* ``input_per_mtok`` and ``output_per_mtok``: USD per million tokens; without them the price
  comes from litellm's bundled map when it knows the model, else it is unknown (``None``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from pytest_tooleffect.decide.agent import AgentState, AgentTurn
from pytest_tooleffect.decide.model_turn import NameMap, name_map

__all__ = ["LOCAL_KEY", "LangChainAgent", "adecide", "decide", "from_langchain", "to_langchain"]

#: The key sent to a local OpenAI-compatible server that wants one but checks none.
LOCAL_KEY = "unused-local-key"

PROMPT = ChatPromptTemplate.from_messages([("system", "{system}"), MessagesPlaceholder("conversation")])


def to_langchain(messages: Sequence[Mapping[str, Any]], names: NameMap) -> list[BaseMessage]:
    """OpenAI chat messages (system messages left out) as LangChain messages, tool names provider-safe.

    Args:
        messages: the state's conversation, OpenAI form.
        names: the tool-name map of the state's tools.

    Returns:
        ``HumanMessage``, ``AIMessage`` (with ``tool_calls``) and ``ToolMessage`` objects.
    """
    out: list[BaseMessage] = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content is not None else ""
        if role == "user":
            out.append(HumanMessage(content=text))
        elif role == "assistant":
            calls, invalid = [], []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                name, raw = names.out(str(fn.get("name", ""))), fn.get("arguments")
                try:
                    args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
                except ValueError:
                    invalid.append({"name": name, "args": raw, "id": tc.get("id"), "error": None,
                                    "type": "invalid_tool_call"})
                    continue
                calls.append({"name": name, "args": args, "id": tc.get("id"), "type": "tool_call"})
            out.append(AIMessage(content=text, tool_calls=calls, invalid_tool_calls=invalid))
        elif role == "tool":
            out.append(ToolMessage(content=text, tool_call_id=str(m.get("tool_call_id") or ""),
                                   name=names.out(str(m.get("name") or "")) or None))
    return out


def from_langchain(message: AIMessage, names: NameMap) -> dict[str, Any]:
    """A LangChain ``AIMessage`` as an OpenAI assistant message with the original tool names.

    Calls LangChain could not parse (``invalid_tool_calls``: arguments that are not JSON) are
    kept with their raw arguments, so the oracle scores them as malformed calls, not as no call.
    """
    content = message.content
    text = content if isinstance(content, str) else "".join(
        b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, str | dict))
    calls = [{"id": tc.get("id") or f"call_{i}", "type": "function",
              "function": {"name": names.back(tc["name"]), "arguments": json.dumps(tc["args"])}}
             for i, tc in enumerate(message.tool_calls)]
    calls += [{"id": tc.get("id") or f"invalid_{i}", "type": "function",
               "function": {"name": names.back(tc.get("name") or ""), "arguments": tc.get("args") or ""}}
              for i, tc in enumerate(message.invalid_tool_calls)]
    emitted: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        emitted["tool_calls"] = calls
    return emitted


class LangChainAgent:
    """A tool-calling agent on LangChain: ``PROMPT | ChatOpenAI(...).bind_tools(tools)``.

    Args:
        model: the OpenAI model name (``gpt-4o-mini``, or the name a local server serves).
        api_base: an OpenAI-compatible base URL (``http://127.0.0.1:8000/v1``), or ``None`` for OpenAI.
        api_key: the key, or ``None`` (``ChatOpenAI`` reads ``OPENAI_API_KEY``).
        temperature: sampling temperature.
        timeout_s: seconds per request.
        max_retries: retries of a failed request (the OpenAI client's backoff).
        prices: ``(input, output)`` USD per million tokens, or ``None`` (litellm's map, when it knows the model).
    """

    def __init__(self, model: str, api_base: str | None = None, api_key: str | None = None,
                 temperature: float = 0.0, timeout_s: float = 60.0, max_retries: int = 2,
                 prices: tuple[float, float] | None = None) -> None:
        self.model = model.removeprefix("openai/")
        self.prices = prices
        key = api_key or (LOCAL_KEY if api_base else None)
        self.llm = ChatOpenAI(model=self.model, base_url=api_base, api_key=SecretStr(key) if key else None,
                              temperature=temperature, timeout=timeout_s, max_retries=max_retries,
                              use_responses_api=False)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> LangChainAgent:
        """Build the agent from a policy's settings, with the environment as fallback.

        Raises:
            ValueError: no model is configured.
        """
        model = settings.get("model") or os.environ.get("TOOLEFFECT_EXAMPLE_MODEL")
        if not model:
            raise ValueError("no model: set the policy's settings.model or TOOLEFFECT_EXAMPLE_MODEL")
        prices = None
        if settings.get("input_per_mtok") is not None and settings.get("output_per_mtok") is not None:
            prices = (float(settings["input_per_mtok"]), float(settings["output_per_mtok"]))
        return cls(model=str(model),
                   api_base=settings.get("api_base") or os.environ.get("TOOLEFFECT_EXAMPLE_API_BASE") or None,
                   api_key=os.environ.get(settings.get("api_key_env") or "TOOLEFFECT_EXAMPLE_API_KEY") or None,
                   temperature=float(settings.get("temperature", 0.0)),
                   timeout_s=float(settings.get("timeout_s", 60)), max_retries=int(settings.get("max_retries", 2)),
                   prices=prices)

    def _chain(self, state: AgentState) -> tuple[Any, dict[str, Any], NameMap]:
        """The runnable for this state's tools, its input and the tool-name map."""
        names = name_map(t["function"]["name"] for t in state.tools)
        tools = [{"type": "function", "function": {**t["function"], "name": names.out(t["function"]["name"])}}
                 for t in state.tools]
        system = [state.system_prompt or "You are a helpful assistant.",
                  *(str(m.get("content") or "") for m in state.messages if m.get("role") == "system")]
        if state.timezone:
            system.append(f"The user's time zone is {state.timezone}.")
        chain = PROMPT | (self.llm.bind_tools(tools) if tools else self.llm)
        return chain, {"system": "\n\n".join(system), "conversation": to_langchain(state.messages, names)}, names

    def _turn(self, message: AIMessage, names: NameMap) -> AgentTurn:
        usage: Mapping[str, Any] = message.usage_metadata or {}
        tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
        return AgentTurn(emitted=from_langchain(message, names), input_tokens=tokens_in, output_tokens=tokens_out,
                         cost_usd=self._price(tokens_in, tokens_out), extra={"framework": "langchain",
                                                                             "model": self.model})

    def _price(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        if tokens_in is None or tokens_out is None:
            return None
        if self.prices is not None:
            return (tokens_in * self.prices[0] + tokens_out * self.prices[1]) / 1e6
        try:  # litellm (a pytest-tooleffect dependency) carries a price map; LangChain has none
            from pytest_tooleffect.decide.model_turn import import_litellm

            prompt_usd, completion_usd = import_litellm().cost_per_token(
                model=self.model, prompt_tokens=tokens_in, completion_tokens=tokens_out)
            return float(prompt_usd + completion_usd)
        except Exception:  # a model the map does not know: unknown, never 0
            return None

    def decide(self, state: AgentState) -> AgentTurn:
        """The agent's decision at ``state`` (``chain.invoke``)."""
        chain, inputs, names = self._chain(state)
        return self._turn(chain.invoke(inputs), names)

    async def adecide(self, state: AgentState) -> AgentTurn:
        """The agent's decision at ``state`` (``chain.ainvoke``; the plugin awaits many at once)."""
        chain, inputs, names = self._chain(state)
        return self._turn(await chain.ainvoke(inputs), names)


_agents: dict[str, LangChainAgent] = {}
_agents_lock = threading.Lock()


def _agent(state: AgentState) -> LangChainAgent:
    """One agent per distinct settings (its HTTP clients reused from state to state)."""
    settings = state.policy.get("settings") or {}
    key = json.dumps(settings, sort_keys=True, default=str)
    with _agents_lock:
        if key not in _agents:
            _agents[key] = LangChainAgent.from_settings(settings)
        return _agents[key]


def decide(state: AgentState) -> AgentTurn:
    """The LangChain agent configured by the policy's settings, asked at ``state``.

    Args:
        state: the conversation so far, the tools offered, the product's system prompt, the policy.

    Returns:
        The assistant message (tool calls or text) with its usage and cost.
    """
    return _agent(state).decide(state)


async def adecide(state: AgentState) -> AgentTurn:
    """:func:`decide`, awaited (``ainvoke``).

    Args:
        state: the conversation so far, the tools offered, the product's system prompt, the policy.

    Returns:
        The assistant message (tool calls or text) with its usage and cost.
    """
    return await _agent(state).adecide(state)
