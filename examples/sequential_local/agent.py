"""The agents of the sequential gate's live demonstration against the real local model
(``examples/sequential_local/demo.py``; docs/sequential-gate.md, "Live, against the real local model").

``decide`` is a small team agent around one model call: it sends the state to the local model
(llama-server with Qwen2.5-Coder-0.5B-Instruct, ``tooleffect model serve``), and, since that model
writes its calls as JSON in the text rather than in the structured ``tool_calls`` channel (docs/models.md),
it reads a JSON object ``{"name": ..., "arguments": {...}}`` in the reply as the call, the way an agent
loop built on such a model would.  The model decides; the agent only parses.

``regressed`` is the same agent with a **planted** regression: on the planted cases it replaces the
decision by a wrong one without asking the model (no call where a tool was needed, an unwanted
``read_thread`` where none was), so every planted decision fails.  The planted cases are the ids listed
in the file ``TOOLEFFECT_PLANTED_CASES`` (the demonstration writes there the baseline's passing cases
with the smallest SHA-256 of their id, as many as the regression's points ask), else a share of all
cases chosen by the SHA-256 of the case id (``TOOLEFFECT_PLANTED``, a fraction, default 0.12).  It is
planted, not found: the demonstration measures the gate, not the model.

Settings (environment, so that both agents run under one policy name and pair with one baseline):
``TOOLEFFECT_LOCAL_MODEL`` (default ``openai/qwen2.5-coder-0.5b-instruct-q4_k_m``),
``TOOLEFFECT_LOCAL_API_BASE`` (default ``http://127.0.0.1:8089/v1``), ``TOOLEFFECT_LOCAL_MAX_TOKENS``
(default 32: a call to the demo family's one tool fits in about 22 tokens), and ``TOOLEFFECT_LOCAL_PRICE_IN``
/ ``TOOLEFFECT_LOCAL_PRICE_OUT`` (USD per million tokens, an illustrative price put in the record; unset:
no price).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.decide.agent import AgentState, AgentTurn

__all__ = ["case_hash", "decide", "parse_call", "planted", "regressed"]

MODEL = "openai/qwen2.5-coder-0.5b-instruct-q4_k_m"
API_BASE = "http://127.0.0.1:8089/v1"
_OBJECT = re.compile(r"\{.*\}", re.S)


def planted(case_id: str, share: float) -> bool:
    """The case is one of the planted share: the first 8 hex digits of SHA-256(case id), over 16**8, below ``share``."""
    return int(case_hash(case_id)[:8], 16) / 16 ** 8 < share


def parse_call(text: str | None) -> dict[str, Any] | None:
    """A tool call written as JSON in a reply (``{"name": "read_thread", "arguments": {...}}``), as an
    OpenAI ``tool_calls`` entry; ``None`` when the reply holds none.
    """
    found = _OBJECT.search(text or "")
    if found is None:
        return None
    try:
        obj = json.loads(found.group(0))
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return {"id": "call_0", "type": "function",
            "function": {"name": obj["name"], "arguments": args if isinstance(args, str) else json.dumps(args)}}


async def decide(state: AgentState) -> AgentTurn:
    """The local model's decision at ``state``, its JSON call read as a call; the tokens it spent."""
    from pytest_tooleffect.decide.model_turn import import_litellm

    litellm = import_litellm()
    messages: list[Mapping[str, Any]] = ([{"role": "system", "content": state.system_prompt}]
                                         if state.system_prompt else [])
    response = await litellm.acompletion(
        model=os.environ.get("TOOLEFFECT_LOCAL_MODEL", MODEL),
        api_base=os.environ.get("TOOLEFFECT_LOCAL_API_BASE", API_BASE), api_key="unused-local-key",
        messages=[*messages, *state.messages], tools=list(state.tools), temperature=0.0,
        max_tokens=int(os.environ.get("TOOLEFFECT_LOCAL_MAX_TOKENS", "32")), timeout=600)
    message = response.choices[0].message
    calls = [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
             for c in message.tool_calls or []]
    text = message.content
    if not calls:
        call = parse_call(text)
        calls, text = ([call], None) if call is not None else ([], text)
    usage = response.usage
    return AgentTurn({"role": "assistant", "content": text, "tool_calls": calls or None},
                     input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                     cost_usd=_priced(usage.prompt_tokens, usage.completion_tokens))


def _priced(input_tokens: int, output_tokens: int) -> float | None:
    """USD at ``TOOLEFFECT_LOCAL_PRICE_IN`` / ``_OUT`` per million tokens (illustrative: the local model is
    free); ``None`` when they are not set.
    """
    price_in, price_out = os.environ.get("TOOLEFFECT_LOCAL_PRICE_IN"), os.environ.get("TOOLEFFECT_LOCAL_PRICE_OUT")
    if price_in is None or price_out is None:
        return None
    return (input_tokens * float(price_in) + output_tokens * float(price_out)) / 1e6


def _planted_here(case_id: str) -> bool:
    listed = os.environ.get("TOOLEFFECT_PLANTED_CASES")
    if listed:
        with open(listed, encoding="utf-8") as f:
            return case_id in {line.strip() for line in f}
    return planted(case_id, float(os.environ.get("TOOLEFFECT_PLANTED", "0.12")))


def case_hash(case_id: str) -> str:
    """SHA-256 of the case id, hex: the order the planted cases are chosen in."""
    return hashlib.sha256(case_id.encode()).hexdigest()


async def regressed(state: AgentState) -> AgentTurn:
    """:func:`decide` with the planted regression: a wrong decision on the planted cases."""
    if _planted_here(state.case_id):
        needs_tool = "th-" in " ".join(str(m.get("content") or "") for m in state.messages)
        if needs_tool:
            return AgentTurn({"role": "assistant", "content": "Done.", "tool_calls": None}, 0, 0,
                             extra={"planted": True})
        call = {"id": "call_0", "type": "function",
                "function": {"name": "read_thread", "arguments": json.dumps({"thread_id": "th-000"})}}
        return AgentTurn({"role": "assistant", "content": None, "tool_calls": [call]}, 0, 0, extra={"planted": True})
    return await decide(state)
