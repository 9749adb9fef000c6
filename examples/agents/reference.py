"""A reference policy with no model: an agent that never calls a tool.

It answers every state with a short text reply, so on any family it scores 100 % on the no-tool
class and 0 % on the others: the floor a real agent has to clear, and the reason a set without
no-tool rows cannot rank an agent. It needs no provider, so it runs a family that has no
recorded decisions (``cases/tooltalk``) end to end offline::

    pytest cases/tooltalk --tooleffect-agent abstain=examples.agents.reference:abstain
"""

from __future__ import annotations

from typing import Any

from pytest_tooleffect.decide.agent import AgentState

__all__ = ["abstain"]


def abstain(state: AgentState) -> dict[str, Any]:
    """Reply in text and call no tool, whatever the state.

    Args:
        state: the decision point (ignored).

    Returns:
        An OpenAI assistant message with no tool calls.
    """
    return {"role": "assistant", "content": "I can help with that. Could you tell me a bit more?"}
