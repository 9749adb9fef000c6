"""Provider failures: the :class:`ProviderError` of a failed request, which failures are retried
and after how long, and the stop reasons that make an answer not a decision.

A failed litellm call becomes a :class:`ProviderError` (:func:`provider_error`): a reset
connection is :data:`CONNECTION_RESET`, else the exception's class name with its HTTP status.
A failed attempt is retried only when :func:`retryable` says so (a timeout, a lost connection, a
408, 429 or 5xx answer), after the provider's ``Retry-After`` (:func:`retry_after_s`, at most
:data:`MAX_RETRY_AFTER_S`) or else :func:`backoff_s`.  An answer the provider's safety layer
stopped, or one cut off at the output cap, is :data:`CONTENT_FILTER` or :data:`TRUNCATED`
(:func:`stop_failure`).  Every message of a :class:`ProviderError` has the run's known secrets
redacted (:mod:`pytest_tooleffect.util.redaction`).

This module imports no litellm: it reads the exceptions and answers litellm gives
(:mod:`pytest_tooleffect.decide.model_turn` makes the requests).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.util.exceptions import exception_text, without_traceback
from pytest_tooleffect.util.redaction import redact
from pytest_tooleffect.util.unicode import without_surrogates

__all__ = ["BAD_USAGE", "CONNECTION_RESET", "CONTENT_FILTER", "MAX_RETRY_AFTER_S", "RETRY_STATUSES", "TRUNCATED",
           "ProviderError", "backoff_s", "exception_chain", "native_reason", "provider_error", "retry_after_s",
           "retryable", "stop_failure"]


class ProviderError(Exception):
    """The provider failed; not a decision of the agent.

    Attributes:
        kind: the exception's class name (``Timeout``, ``InternalServerError``, …), or one of the
            plugin's own: ``ConnectionReset``, ``RateLimit``, ``ContentFilter`` and
            ``Truncated`` (an answer that is not a decision, :func:`stop_failure`).
        message: the provider's message, shortened, with every known secret redacted, cut where a
            Python traceback starts inside it (litellm writes its own into some messages: the
            exception it ended in is kept, :func:`~pytest_tooleffect.util.exceptions.without_traceback`),
            lone surrogates made U+FFFD.
        status: the HTTP status of the provider's answer, when there was one.
        retry_after: the seconds the provider's ``Retry-After`` asked for (:func:`retry_after_s`),
            when it sent one.
    """

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        message = redact(without_surrogates(without_traceback(message)))
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after: float | None = None


#: The error kind of a connection the provider's side reset (``ECONNRESET``), told apart from a
#: timeout and from an HTTP error (litellm wraps it as a 500 ``InternalServerError``).
CONNECTION_RESET = "ConnectionReset"
#: The error kind of an answer whose usage is no count of tokens (negative, fractional, past
#: :data:`~pytest_tooleffect.util.bounds.MAX_TOKENS`) or whose price is out of bounds: its
#: figures are not added to any total, and its decision is not scored (as ``AgentBadUsage``).
BAD_USAGE = "BadUsage"


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (``__cause__``, else ``__context__``),
    each once.
    """
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not e for e in out):
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def provider_error(exc: BaseException) -> ProviderError:
    """The :class:`ProviderError` of a failed litellm call: a reset connection is ``ConnectionReset``;
    else the exception's class name, with its HTTP status when it has one.  The message is the
    exception's first line of text: a traceback litellm wrote into it is cut, the exception that
    traceback ended in kept (``… Invalid response object (KeyError: 'message'; its traceback left out)``).
    """
    chain = exception_chain(exc)
    message = " ".join(without_traceback(exception_text(exc)).split())[:500]
    if any(isinstance(e, ConnectionResetError) for e in chain):
        return ProviderError(CONNECTION_RESET, f"the connection was reset by the provider's side ({message})")
    status = next((s for e in chain if isinstance(s := getattr(e, "status_code", None), int)), None)
    if any(type(e).__name__ == "APIConnectionError" for e in chain[1:]) and status == 500:
        return ProviderError("APIConnectionError", message)  # litellm reports a lost connection as a 500
    return ProviderError(type(exc).__name__, message, status)


#: The statuses a request is retried on: 408 (request timeout), 429 (rate limited) and every 5xx.
#: 400, 401, 403, 404, 409, 422 and other 4xx answers would fail the same way again.
RETRY_STATUSES = frozenset({408, 429})
#: The longest ``Retry-After`` honoured, in seconds: a provider asking for more ends the turn
#: (an error outcome saying so) instead of stalling the run.
MAX_RETRY_AFTER_S = 60.0


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1`` when the provider names no ``Retry-After``:
    0.5, 1, 2, 2, … (exponential, capped at 2 s).
    """
    return min(2.0, 0.5 * 2.0 ** attempt)


def retryable(exc: ProviderError) -> bool:
    """Whether a failed attempt is worth another: a timeout, a connection reset or refused, a
    408, 429 or 5xx answer.  Never a 400, 401, 403 or other 4xx, nor an unreadable 200.
    """
    if exc.kind in ("Timeout", CONNECTION_RESET, "APIConnectionError"):
        return True
    status = exc.status
    if status is None:
        return False
    return status in RETRY_STATUSES or status >= 500


def retry_after_s(exc: BaseException | None) -> float | None:
    """The seconds a provider's ``Retry-After`` (or ``retry-after-ms``) header asks for, or ``None``.

    ``Retry-After`` is delta-seconds or an HTTP date (RFC 9110 section 10.2.3).
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        headers = getattr(exc, "litellm_response_headers", None)
        response = getattr(exc, "response", None)
        if headers is None and response is not None:
            headers = getattr(response, "headers", None)
        if headers is not None:
            ms = headers.get("retry-after-ms")
            if ms is not None:
                try:
                    return max(0.0, float(ms) / 1000.0)
                except ValueError:
                    pass
            value = headers.get("retry-after")
            if value is not None:
                try:
                    return max(0.0, float(value))
                except ValueError:
                    from email.utils import parsedate_to_datetime

                    try:
                        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
                    except (TypeError, ValueError):
                        return None
        exc = exc.__cause__ or exc.__context__
    return None


#: The error kind of an answer the provider's safety layer stopped (a refusal that is not the agent's choice).
CONTENT_FILTER = "ContentFilter"
#: The error kind of an answer cut off at the output-token cap (its calls may be cut mid-argument).
TRUNCATED = "Truncated"
#: Provider stop reasons as litellm keeps them raw (Gemini's ``native_finish_reason``, Anthropic's
#: ``stop_reason``), for the cases litellm's mapped ``finish_reason`` hides: Gemini reports
#: ``tool_calls`` whenever a call is present, even when the call was cut at ``MAX_TOKENS``.
_NATIVE_FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE",
                              "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "refusal"})
_NATIVE_TRUNCATED = frozenset({"MAX_TOKENS", "max_tokens", "model_context_window_exceeded"})


def native_reason(choice: Mapping[str, Any]) -> str | None:
    """The provider's own stop reason where litellm keeps it (``provider_specific_fields``), or ``None``."""
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else None
    where = (choice.get("provider_specific_fields"), message.get("provider_specific_fields") if message else None)
    for fields in where:
        if isinstance(fields, Mapping):
            for k in ("native_finish_reason", "stop_reason"):
                if isinstance(fields.get(k), str):
                    return str(fields[k])
    return None


def stop_failure(choice: Mapping[str, Any], max_tokens: int | None = None) -> ProviderError | None:
    """The error of an answer that is not a decision, from its stop reason; ``None`` for a decision.

    litellm maps every provider's stop reason onto OpenAI's ``finish_reason``
    (``litellm_core_utils/core_helpers.py``, ``map_finish_reason``): ``content_filter`` is OpenAI's
    own, Anthropic's ``refusal``, Gemini's ``SAFETY``, ``RECITATION``, ``BLOCKLIST``,
    ``PROHIBITED_CONTENT``, ``SPII``, ``LANGUAGE`` and ``OTHER``, Bedrock's ``guardrail_intervened``;
    ``length`` is OpenAI's own, Anthropic's ``max_tokens`` (and ``pause_turn``, ``compaction``,
    ``model_context_window_exceeded``), Gemini's ``MAX_TOKENS``.  The raw reason litellm keeps
    (``provider_specific_fields``) is read too, because Gemini's mapped reason says ``tool_calls``
    for a call cut at ``MAX_TOKENS``.

    Args:
        choice: ``choices[0]`` of litellm's response, as a dict.
        max_tokens: the request's output cap, named in the message.

    Returns:
        :data:`CONTENT_FILTER` or :data:`TRUNCATED` as a :class:`ProviderError`, or ``None``.
    """
    finish = choice.get("finish_reason")
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
    native = native_reason(choice)
    said = f"finish_reason {finish}" + (f", the provider's {native}" if native and native != finish else "")
    if finish == "content_filter" or native in _NATIVE_FILTERED:
        return ProviderError(CONTENT_FILTER, f"the provider's safety layer stopped the answer ({said}): "
                                             "not a decision of the agent")
    if finish == "length" or native in _NATIVE_TRUNCATED:
        calls = len((message or {}).get("tool_calls") or [])
        cut = f"; {calls} tool call(s) possibly cut mid-argument" if calls else ""
        cap = f" of {max_tokens} tokens" if max_tokens else ""
        return ProviderError(TRUNCATED, f"the answer was cut off at the output cap{cap} ({said}{cut}): not a "
                                        "decision; raise the policy's max_tokens")
    return None
