"""Provider output → actions (DESIGN.md scoring rule 1).

Accepted shapes, as providers and litellm return them:

* an OpenAI chat assistant message (``tool_calls[].function.{name, arguments}``), a full chat
  completion (``choices[0].message``), or the compact ``{tool_calls: [{name, arguments}], text,
  finish_reason}`` that case files use for ``recorded``;
* OpenAI Responses-API output items (``{"type": "function_call", "name", "arguments"}``);
* Anthropic content blocks (``{"type": "tool_use", "name", "input"}``);
* Gemini parts (``{"functionCall": {"name", "args"}}``).

``arguments`` may be a JSON string or an object; ``""`` and ``null`` mean ``{}``.  A call that
cannot be parsed (arguments that are not a JSON object, no name) or a call written into the text
channel (``<tool_call>`` tags, ``[TOOL_CALLS]``, ``<|python_tag|>``, ``<function=…>``, or a bare
JSON object naming an offered tool) is a *malformed call*, never "no call".  Whether a call was
made depends on the calls present, never on ``finish_reason``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from .values import is_mapping

__all__ = ["Call", "Emission", "parse_emission"]


class Call(NamedTuple):
    """One parsed tool call: the tool's name and its arguments object."""

    name: str
    args: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """``{"tool": name, "args": {...}}``."""
        return {"tool": self.name, "args": dict(self.args)}


class Emission(NamedTuple):
    """A normalised model turn: parsed calls, malformed call attempts, and the text channel.

    ``calls == ()`` and ``malformed == ()`` is the action ``tool: null``.
    """

    calls: tuple[Call, ...] = ()
    malformed: tuple[str, ...] = ()
    malformed_names: tuple[str, ...] = ()
    text: str | None = None

    @property
    def is_null(self) -> bool:
        """True when the turn called nothing and attempted nothing."""
        return not self.calls and not self.malformed

    def actions(self) -> list[dict[str, Any]]:
        """The emitted actions as fresh dicts; ``[{"tool": None}]`` for no call."""
        if self.is_null:
            return [{"tool": None}]
        out = [{"tool": c.name, "args": dict(c.args)} for c in self.calls]
        out += [{"tool": n, "malformed": r} for n, r in zip(self.malformed_names, self.malformed)]
        return out


class _Builder:
    __slots__ = ("calls", "malformed", "malformed_names", "texts")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.malformed: list[str] = []
        self.malformed_names: list[str] = []
        self.texts: list[str] = []

    def add(self, name: Any, arguments: Any) -> None:
        if type(arguments) is dict and type(name) is str and name:  # the common case, decoded already
            self.calls.append(Call(name, dict(arguments)))
            return
        if not isinstance(name, str) or not name:
            self.malformed.append("tool call without a name")
            self.malformed_names.append("")
            return
        if arguments is None or arguments == "":
            self.calls.append(Call(name, {}))
            return
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                self.malformed.append(f"arguments of {name} are not valid JSON: {exc.msg}")
                self.malformed_names.append(name)
                return
            except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's digit limit
                self.malformed.append(f"arguments of {name} cannot be read: {type(exc).__name__}")
                self.malformed_names.append(name)
                return
            if type(arguments) is dict:  # decoded just now: no one else holds it
                self.calls.append(Call(name, arguments))
                return
        if not isinstance(arguments, Mapping):
            self.malformed.append(f"arguments of {name} are a JSON {type(arguments).__name__}, not an object")
            self.malformed_names.append(name)
            return
        self.calls.append(Call(name, dict(arguments)))


_TAG_FORMS = (
    (re.compile(r"<tool_call\b", re.I), "<tool_call> tag in the text channel"),
    (re.compile(r"\[TOOL_CALLS\]"), "[TOOL_CALLS] marker in the text channel"),
    (re.compile(r"<\|python_tag\|>"), "<|python_tag|> in the text channel"),
    (re.compile(r"<function=[\w.\-]+>"), "<function=…> call in the text channel"),
    (re.compile(r"<\|tool_call_begin\|>|<｜tool▁call▁begin｜>"), "tool-call marker in the text channel"),
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_NAME_IN_TAG = re.compile(r"""(?:name["']?\s*[:=]\s*["']|<function=)([\w.\-]+)""")


def _text_channel_calls(text: str, offered: Collection[str], has_calls: bool) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for pattern, reason in _TAG_FORMS:
        if pattern.search(text):
            m = _NAME_IN_TAG.search(text)
            found.append((m.group(1) if m else "", reason))
            return found
    if has_calls or not offered:
        return found
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body.startswith(("{", "[")):
        return found
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or too deep / too large to be a call)
        return found
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, Mapping):
            continue
        name = item.get("name")
        if name is None and isinstance(item.get("function"), Mapping):
            name = item["function"].get("name")
        if isinstance(name, str) and name in offered:
            found.append((name, "JSON tool call written into the text channel"))
    return found


def _from_block(b: _Builder, block: Mapping[str, Any]) -> None:
    kind = block.get("type")
    if kind in ("function_call", "custom_tool_call"):  # Responses API
        b.add(block.get("name"), block.get("arguments", block.get("input")))
    elif kind in ("tool_use", "server_tool_use"):  # Anthropic
        b.add(block.get("name"), block.get("input"))
    elif "functionCall" in block or "function_call" in block:  # Gemini part
        fc = block.get("functionCall") or block.get("function_call") or {}
        if not is_mapping(fc):
            b.malformed.append(f"a function call that is a {type(fc).__name__}, not an object")
            b.malformed_names.append("")
            return
        b.add(fc.get("name"), fc.get("args"))
    elif kind == "message" and isinstance(block.get("content"), list):  # Responses message item
        for part in block["content"]:
            _from_part(b, part)
    elif isinstance(block.get("text"), str):
        b.texts.append(block["text"])


def _from_part(b: _Builder, part: Any) -> None:
    if not isinstance(part, Mapping):
        raise TypeError(f"cannot read a model turn from a part that is a {type(part).__name__}")
    _from_block(b, part)


def _from_message(b: _Builder, msg: Any) -> None:
    if type(msg) is not dict and not isinstance(msg, Mapping):
        raise TypeError(f"cannot read a model turn from a message that is a {type(msg).__name__}")
    calls = msg.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise TypeError(f"tool_calls must be a list, got {type(calls).__name__}")
        for tc in calls:
            if type(tc) is not dict and not isinstance(tc, Mapping):
                b.malformed.append(f"a tool call that is a {type(tc).__name__}, not an object")
                b.malformed_names.append("")
                continue
            fn = tc.get("function")
            if fn is None or (type(fn) is not dict and not isinstance(fn, Mapping)):
                fn = tc
            args = fn["arguments"] if "arguments" in fn else fn["args"] if "args" in fn else fn.get("input")
            b.add(fn.get("name"), args)
    legacy = msg.get("function_call")
    if legacy is not None and is_mapping(legacy):
        b.add(legacy.get("name"), legacy.get("arguments"))
    has_content = "content" in msg
    content = msg["content"] if has_content else msg.get("text")
    if content is None:
        return
    if isinstance(content, str):
        b.texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping):
                _from_block(b, block)
    elif isinstance(content, Mapping) and isinstance(content.get("parts"), list):
        for part in content["parts"]:
            _from_part(b, part)
    if has_content and isinstance(msg.get("text"), str):
        b.texts.append(msg["text"])


def _head(values: Sequence[Any], key: str) -> Mapping[str, Any]:
    head = values[0]
    if not isinstance(head, Mapping):
        raise TypeError(f"cannot read a model turn: {key}[0] is a {type(head).__name__}")
    return head


def parse_emission(output: Any, offered: Collection[str] = ()) -> Emission:
    """Normalise one model turn into an :class:`Emission`.

    Args:
        output: any shape listed in the module docstring (dicts, lists, or an object with
            ``model_dump()`` such as a litellm ``ModelResponse``).
        offered: tool names offered at the state, to recognise a bare JSON call in the text.

    Returns:
        The emission; never raises on malformed calls (they are reported in ``malformed``).

    Raises:
        TypeError: ``output`` is not one of the accepted shapes.

    """
    if type(output) is not dict and hasattr(output, "model_dump") and not isinstance(output, Mapping):
        output = output.model_dump()
    b = _Builder()
    if type(output) is dict and "choices" not in output and "output" not in output and "candidates" not in output \
            and "parts" not in output:  # a plain message, the common case
        _from_message(b, output)
    elif is_mapping(output):
        choices = output.get("choices")
        items, candidates, parts = output.get("output"), output.get("candidates"), output.get("parts")
        if choices and isinstance(choices, Sequence):  # the ABC check only when there is a value
            _from_message(b, _head(choices, "choices").get("message") or {})
        elif isinstance(items, list):
            for item in items:
                _from_part(b, item)
        elif candidates and isinstance(candidates, list):
            content = _head(candidates, "candidates").get("content") or {}
            if not is_mapping(content) or not isinstance(content.get("parts", []), list):
                raise TypeError("cannot read a model turn: candidates[0].content is not {parts: [...]}")
            for part in content.get("parts", []):
                _from_part(b, part)
        elif isinstance(parts, list):
            for part in parts:
                _from_part(b, part)
        else:
            _from_message(b, output)
    elif isinstance(output, Sequence) and not isinstance(output, (str, bytes)):
        for item in output:
            if not isinstance(item, Mapping):
                raise TypeError(f"cannot read a model turn from a list holding {type(item).__name__}")
            _from_block(b, item)
    elif output is None:
        pass
    else:
        raise TypeError(f"cannot read a model turn from {type(output).__name__}")
    text = ("\n".join(t for t in b.texts if t) or None) if b.texts else None
    if text:
        for name, reason in _text_channel_calls(text, offered, bool(b.calls)):
            b.malformed.append(reason)
            b.malformed_names.append(name)
    return Emission(tuple(b.calls), tuple(b.malformed), tuple(b.malformed_names), text)
