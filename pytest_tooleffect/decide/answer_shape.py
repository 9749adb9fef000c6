"""What is wrong with an OpenAI chat answer litellm refused, read from the body the provider sent.

litellm validates a chat completion's body before the plugin sees it (``convert_to_model_response_object``)
and, when the body is not the shape it expects, raises an ``InternalServerError`` ("Invalid response
object") whose message names no field: a pydantic error for ``Message``, a ``TypeError`` for a usage
that is no object, Python's ``ValueError`` for an integer of more digits than ``int()`` reads.  The body
itself is at hand (:class:`~.reported_usage.RawAnswer`, litellm's ``logger_fn``), so the fault is named
from it, one line, field by field (:func:`body_problem`).

An assistant message's ``content`` may be a string, ``null``, or a list of content parts (OpenAI's
chat completions API: text and refusal parts); litellm refuses the list, so a list of such parts is read
as its text (:func:`parts_read`), the parts in order, a refusal part's ``refusal`` as its text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.decide.reported_usage import decoded_body
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.json_keys import long_integer

__all__ = ["body_problem", "parts_read"]

#: the content part types of an assistant message and the key holding each one's text
_PART_TEXT = {"text": "text", "refusal": "refusal"}


def _a(value: Any) -> str:
    """``a list``, ``a string``, ``a number``… : a JSON value's type as the errors name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "a JSON object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def body_problem(body: Any) -> str | None:
    """The first fault of an OpenAI chat completion body, named by its field in one line.

    Args:
        body: the body as litellm logged it (:attr:`~.reported_usage.RawAnswer.body`): a JSON text or an object.

    Returns:
        e.g. ``choices[0].message.role is Assistant, not assistant: a role is written in lower case``,
        ``usage: a JSON object, got a list``,
        ``choices[0].message.tool_calls[0].function.arguments: an integer of 5000 digits (over Python's
        4300-digit limit)``; ``None`` when no fault is found here (another wire format, no body, or a body
        whose only oddity is a content list of text parts, which :func:`parts_read` reads).
    """
    if isinstance(body, (str, bytes)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            json.loads(text)
        except ValueError:
            big = long_integer(text)
            return f"the body holds {big}" if big else None
    body = decoded_body(body)
    if not isinstance(body, Mapping) or "choices" not in body:
        return None
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        return f"usage: a JSON object, got {_a(usage)}"
    choices = body["choices"]
    if not isinstance(choices, list):
        return f"choices: a list, got {_a(choices)}"
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        if not isinstance(choice, Mapping):
            return f"{where}: a JSON object, got {_a(choice)}"
        message = choice.get("message")
        if not isinstance(message, Mapping):
            return f"{where}.message: a JSON object, got {_a(message)}"
        problem = _message_problem(f"{where}.message", message)
        if problem:
            return problem
    return None


def _message_problem(where: str, message: Mapping[str, Any]) -> str | None:
    role = message.get("role")
    if role is not None and role != "assistant":
        if not isinstance(role, str):
            return f"{where}.role: the string assistant, got {_a(role)}"
        why = ("a role is written in lower case" if role.lower() == "assistant"
               else "the answer is not the model's own turn")
        return f"{where}.role is {shown(role, limit=40)}, not assistant: {why}"
    content = message.get("content")
    if isinstance(content, list):
        for j, part in enumerate(content):
            key = _PART_TEXT.get(str(part.get("type"))) if isinstance(part, Mapping) else None
            if key is None or not isinstance(part.get(key), str):
                return (f"{where}.content[{j}]: a text or refusal part ({{type: text, text: …}}), got "
                        + (f"a part of type {part.get('type')!r}" if isinstance(part, Mapping) else _a(part)))
    elif content is not None and not isinstance(content, str):
        return f"{where}.content: a string, null or a list of text parts, got {_a(content)}"
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return f"{where}.tool_calls: a list, got {_a(calls)}"
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            return f"{where}.tool_calls[{k}].function: a JSON object, got {_a(function)}"
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            big = long_integer(arguments)
            if big:
                return f"{where}.tool_calls[{k}].function.arguments: {big}"
    return None


def parts_read(body: Any) -> dict[str, Any] | None:
    """The body with each message whose ``content`` is a list of text (or refusal) parts holding their text,
    joined in order; ``None`` when no message holds such a list, or the body has another fault
    (:func:`body_problem`).
    """
    if body_problem(body) is not None:
        return None
    doc = decoded_body(body)
    if not isinstance(doc, Mapping) or "choices" not in doc:
        return None
    read = dict(doc)
    read["choices"], changed = [], False
    for choice in doc["choices"]:
        content = choice["message"].get("content")
        if isinstance(content, list):
            text = "".join(part[_PART_TEXT[part["type"]]] for part in content)
            choice = {**choice, "message": {**choice["message"], "content": text}}
            changed = True
        read["choices"].append(choice)
    return read if changed else None
