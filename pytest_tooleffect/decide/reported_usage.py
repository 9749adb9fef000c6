"""Whether a provider reported the usage of an answer, read from the answer as the provider sent it.

litellm cannot say it: its ``completion`` gives every response a zero ``Usage()`` before the
provider answers (``litellm/main.py``, ``setattr(model_response, "usage", litellm.Usage())``) and
replaces it only when the body holds a ``usage`` (``convert_to_model_response_object``), so "the
server said 0" and "the server said nothing" come back as the same ``Usage(prompt_tokens=0,
completion_tokens=0)``.  litellm keeps the body it received, though, and hands it to the
``logger_fn`` a caller passes to ``completion`` / ``acompletion`` (its documented "Logger Function"
of Local Debugging: called with the call's details, ``original_response`` among them, once the
provider answered).  :class:`RawAnswer` is such a function; :func:`reported_counts` reads the body.

A usage the provider did not report is unknown (``None``), never 0, and so is each count of it on
its own (:func:`reported_counts`): a usage that gives the input tokens and no output tokens (or
``null``, or a total alone) leaves the missing count unknown, as litellm's zero for it would not
say.  A report adds the known counts and says how many decisions had none, per direction
(``docs/models.md``, Provider faults).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["RawAnswer", "agent_usage", "decoded_body", "known_count", "reported_counts"]

#: per wire format, a key that tells the body apart, and the key of its usage
#: and the keys of its input and output token counts in that usage
_USAGE_KEYS: tuple[tuple[str, str, str, str], ...] = (
    # OpenAI chat completions and the servers that speak it (vLLM, llama.cpp, …)
    ("choices", "usage", "prompt_tokens", "completion_tokens"),
    ("candidates", "usageMetadata", "promptTokenCount", "candidatesTokenCount"),  # Gemini generateContent
    ("stop_reason", "usage", "input_tokens", "output_tokens"),  # Anthropic messages
    ("output", "usage", "input_tokens", "output_tokens"),  # OpenAI Responses
)


class RawAnswer:
    """litellm's ``logger_fn`` for one request: keeps the body the provider sent.

    Attributes:
        body: the first ``original_response`` litellm logged after the provider answered (a JSON text or
            an object), or ``None`` before that.
    """

    def __init__(self) -> None:
        self.body: Any = None

    def __call__(self, details: Mapping[str, Any]) -> None:
        """Called by litellm with the call's details, before the request and after the answer."""
        # the first answer logged is the provider's body: litellm logs again, with its own error text as the
        # "original_response", when it refuses that body (its synchronous ``completion``)
        if details.get("log_event_type") == "post_api_call" and self.body is None:
            self.body = details.get("original_response")


def reported_counts(body: Any) -> tuple[bool, bool] | None:
    """Which counts of tokens the provider's body reports, each on its own.

    Args:
        body: the body as litellm logged it (:attr:`RawAnswer.body`): a JSON text, or an object.

    Returns:
        ``(input known, output known)`` for a body of a known wire format: a count is known when the
        usage gives it as a number (0 included: the provider said so); absent, ``null`` or another
        type is unknown, and so are both when only a total is given (``total_tokens``,
        ``totalTokenCount``: it does not say how it splits).  The counts are OpenAI chat's
        ``prompt_tokens`` / ``completion_tokens``, Gemini's ``promptTokenCount`` /
        ``candidatesTokenCount``, Anthropic's and OpenAI Responses' ``input_tokens`` /
        ``output_tokens``.  ``None``: it cannot be told (no body, not JSON, another shape).
    """
    body = decoded_body(body)
    if not isinstance(body, Mapping):
        return None
    for marker, key, tin, tout in _USAGE_KEYS:
        if marker in body:
            usage = body.get(key)
            if not isinstance(usage, Mapping):
                return False, False
            return known_count(usage.get(tin)), known_count(usage.get(tout))
    return None


def known_count(value: Any) -> bool:
    """Whether a usage field holds a count at all: a number (``bool`` is not one); whether it is a
    sound count is :func:`~pytest_tooleffect.util.bounds.usage_problem`'s to say.
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def decoded_body(body: Any) -> Any:
    """The body as an object (``None`` for a text that is not JSON)."""
    if isinstance(body, (str, bytes)):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


def agent_usage(usage: Any) -> tuple[Any, Any]:
    """The input and output tokens of a usage object an agent's return value carries (a litellm
    ``ModelResponse``'s ``usage``, an OpenAI SDK's ``CompletionUsage``, a plain mapping):
    ``prompt_tokens`` and ``completion_tokens``, each ``None`` when it is not known.

    An agent's return value holds no body to read, and litellm writes 0 for every count the
    provider left out (``Usage(0, 0)`` where it sent no usage at all).  So a count is unknown when it
    is absent or ``null``; an input count of 0 is unknown too (no request is sent with 0 tokens of
    input); and an output count of 0 is unknown when the total says otherwise (``total_tokens``
    given and not the input: the provider gave the total, not that 0) or when the input is unknown
    as well (litellm's zeros, not a decision that cost nothing).  Any other value is left for
    :func:`~pytest_tooleffect.util.bounds.usage_problem` to refuse.
    """
    def field(key: str) -> Any:
        return usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)

    pin, pout, total = (field(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if known_count(pin) and pin == 0:
        pin = None
    if known_count(pout) and pout == 0 and (pin is None or (known_count(total) and total != pin)):
        pout = None
    return pin, pout
