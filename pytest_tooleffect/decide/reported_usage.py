"""Whether a provider reported the usage of an answer, read from the answer as the provider sent it.

litellm cannot say it: its ``completion`` gives every response a zero ``Usage()`` before the
provider answers (``litellm/main.py``, ``setattr(model_response, "usage", litellm.Usage())``) and
replaces it only when the body holds a ``usage`` (``convert_to_model_response_object``), so "the
server said 0" and "the server said nothing" come back as the same ``Usage(prompt_tokens=0,
completion_tokens=0)``.  litellm keeps the body it received, though, and hands it to the
``logger_fn`` a caller passes to ``completion`` / ``acompletion`` (its documented "Logger Function"
of Local Debugging: called with the call's details, ``original_response`` among them, once the
provider answered).  :class:`RawAnswer` is such a function; :func:`usage_reported` reads the body.

A usage the provider did not report is unknown (``None``), never 0: a report adds known counts and
says how many decisions had none (``docs/models.md``, Provider faults).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["RawAnswer", "agent_usage", "usage_reported"]

#: per wire format, a key that tells the body apart, and the key of its usage
_USAGE_KEYS: tuple[tuple[str, str], ...] = (
    ("choices", "usage"),  # OpenAI chat completions and the servers that speak it (vLLM, llama.cpp, …)
    ("candidates", "usageMetadata"),  # Gemini generateContent
    ("stop_reason", "usage"),  # Anthropic messages
    ("output", "usage"),  # OpenAI Responses
)


class RawAnswer:
    """litellm's ``logger_fn`` for one request: keeps the body the provider sent.

    Attributes:
        body: the ``original_response`` litellm logged after the provider answered (a JSON text or
            an object), or ``None`` before that.
    """

    def __init__(self) -> None:
        self.body: Any = None

    def __call__(self, details: Mapping[str, Any]) -> None:
        """Called by litellm with the call's details, before the request and after the answer."""
        if details.get("log_event_type") == "post_api_call":
            self.body = details.get("original_response")


def usage_reported(body: Any) -> bool | None:
    """Whether the provider's body reports a usage.

    Args:
        body: the body as litellm logged it (:attr:`RawAnswer.body`): a JSON text, or an object.

    Returns:
        ``True``: the body has a non-empty usage object (its counts may be 0: the provider said so);
        ``False``: a body of a known wire format (OpenAI chat or Responses, Anthropic, Gemini) whose
        usage is absent, ``null`` or empty; ``None``: it cannot be told (no body, not JSON, another
        shape): litellm's usage is then taken as it is.
    """
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if not isinstance(body, Mapping):
        return None
    for marker, key in _USAGE_KEYS:
        if marker in body:
            usage = body.get(key)
            return isinstance(usage, Mapping) and bool(usage)
    return None


def agent_usage(usage: Any) -> tuple[Any, Any]:
    """The input and output tokens of a usage object an agent's return value carries (a litellm
    ``ModelResponse``'s ``usage``, an OpenAI SDK's ``CompletionUsage``): ``prompt_tokens`` and
    ``completion_tokens``, ``(None, None)`` when both are 0.

    An agent's return value holds no body to read, and litellm writes ``Usage(0, 0)`` where the
    provider sent no usage; no request is sent with 0 tokens of input, so 0 in and 0 out is read as
    "not reported", never as a decision that cost nothing.
    """
    pin, pout = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
    if pin == 0 and pout == 0 and not isinstance(pin, bool) and not isinstance(pout, bool):
        return None, None
    return pin, pout
