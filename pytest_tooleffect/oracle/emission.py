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

A tool may have other names a call can use (``aliases``: the name its MCP server gives it, where
the family's ``name`` is the provider-safe form, docs/mcp.md): a call under such a name, in the
tool-call channel or written in the text, is read as a call of the tool under the family's name.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

from pytest_tooleffect.oracle.names import name_map
from pytest_tooleffect.oracle.textscan import JsonScan, Markers
from pytest_tooleffect.oracle.values import is_mapping
from pytest_tooleffect.util.json_keys import RepeatedKey, loads_unique, long_integer

__all__ = ["Call", "Emission", "parse_emission", "tool_aliases"]


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
    invented_results: tuple[str, ...] = ()
    """Tool results the model wrote into its own text (``<tool_response>`` and the like): a
    finding of its own; a turn that holds one and no call is a malformed call, never a clean
    abstention."""
    malformed_raw: tuple[str, ...] = ()
    """What each malformed call attempt was read from, as the policy gave it (one per entry of
    ``malformed``, in its order): a call in the tool-call channel, its arguments as sent (a string
    as it is, anything else as JSON); a call or an invented tool result written into the text
    channel, the text from where it starts to where the next one starts (or the text ends)."""

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
    __slots__ = ("calls", "malformed", "malformed_names", "malformed_raw", "texts")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.malformed: list[str] = []
        self.malformed_names: list[str] = []
        self.malformed_raw: list[str] = []
        self.texts: list[str] = []

    def attempt(self, name: str, reason: str, raw: str) -> None:
        """A call attempt that cannot be parsed: its name (``""``: none readable), why, and its raw text."""
        self.malformed.append(reason)
        self.malformed_names.append(name)
        self.malformed_raw.append(raw)

    def add(self, name: Any, arguments: Any) -> None:
        if type(arguments) is dict and type(name) is str and name:  # the common case, decoded already
            self.calls.append(Call(name, dict(arguments)))
            return
        if not isinstance(name, str) or not name:
            self.attempt("", "tool call without a name", _raw(arguments))
            return
        if arguments is None or arguments == "":
            self.calls.append(Call(name, {}))
            return
        if isinstance(arguments, str):
            try:
                arguments = loads_unique(arguments)  # a key given twice is a malformed call, never the last kept
            except RepeatedKey as exc:
                self.attempt(name, f"arguments of {name} hold the key {exc.key!r} twice: JSON keeps only one of "
                                   "them without a word", arguments)
                return
            except json.JSONDecodeError as exc:
                self.attempt(name, f"arguments of {name} are not valid JSON: {exc.msg}", arguments)
                return
            except (ValueError, RecursionError) as exc:  # e.g. an integer past Python's digit limit
                why = (long_integer(arguments) if isinstance(exc, ValueError) else None) or type(exc).__name__
                self.attempt(name, f"arguments of {name} cannot be read: {why}", arguments)
                return
            if type(arguments) is dict:  # decoded just now: no one else holds it
                self.calls.append(Call(name, arguments))
                return
        if not isinstance(arguments, Mapping):
            self.attempt(name, f"arguments of {name} are a JSON {type(arguments).__name__}, not an object",
                         _raw(arguments))
            return
        self.calls.append(Call(name, dict(arguments)))


def _raw(value: Any) -> str:
    """What a call attempt in the tool-call channel sent, as text: a string as it is, anything
    else as JSON (a value JSON has no form for as its ``str``; a value JSON cannot hold at all,
    circular or too deep, as its type).
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a circular or too deep value
        return f"<a {type(value).__name__} that cannot be written as JSON>"


_OPENERS = (  # (opening marker, closing marker or None, the form's name in the finding)
    (re.compile(r"<tool_call\b[^>]*>", re.I), re.compile(r"</tool_call>", re.I), "<tool_call> tag"),
    (re.compile(r"<tools\b[^>]*>", re.I), re.compile(r"</tools>", re.I), "<tools> tag"),
    (re.compile(r"<function_calls?\b[^>]*>", re.I), re.compile(r"</function_calls?>", re.I), "<function_call> tag"),
    (re.compile(r"\[TOOL_CALLS\]"), None, "[TOOL_CALLS] marker"),
    (re.compile(r"<\|python_tag\|>"), re.compile(r"<\|eom_id\|>|<\|eot_id\|>"), "<|python_tag|>"),
    (re.compile(r"<\|tool_calls?_(?:section_)?begin\|>|<｜tool▁calls?▁begin｜>"), None, "tool-call marker"),
)
_RESULT_TAGS = re.compile(r"<(tool_response|tool_result|tool_output|function_response|function_result)\b[^>]*>"
                          r"|<\|ipython\|>|\[TOOL_RESULTS\]|<\|tool_response\|>", re.I)
_FENCE = re.compile(r"```")
# calls whose name is written outside any JSON: <function=NAME>, functions.NAME: / functions.NAME(,
# [TOOL_CALLS]NAME[ARGS], <|python_tag|>NAME.call( / NAME(
_NAMED_FORMS = (
    (re.compile(r"<function=([\w.\-]+)>"), "<function=…> call"),
    (re.compile(r"(?<![\w.])functions\.([A-Za-z_][\w.\-]*?)\s*[:(]"), "functions.… stub"),
    (re.compile(r"\[TOOL_CALLS\]\s*([A-Za-z_][\w.\-]*)\s*\[ARGS\]"), "[TOOL_CALLS] marker"),
    (re.compile(r"<\|python_tag\|>\s*([A-Za-z_][\w.\-]*?)(?:\.call)?\("), "<|python_tag|>"),
)
_NAME_FIELD = re.compile(r"""["']?(?:name|tool_name|tool|function)["']?\s*[:=]\s*["']([\w.\-]+)["']""")
_NAME_KEYS = ("name", "tool_name", "tool", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
_GAP = re.compile(r"[ \n:`json]*")
_OPEN_BRACE = re.compile(r"\{")
_CLOSE_BRACE = re.compile(r"\}")
_CUT = "text channel cut"
#: a call whose JSON may be whole but goes past what the JSON reader reads (too deep, a number too long)
_UNREADABLE = "JSON call past the JSON reader's limits"
#: a call whose JSON gives a key twice (its arguments' or its own): JSON keeps one of them without a word
_TWICE = "JSON call holding the key"


class _Found(NamedTuple):
    start: int
    end: int
    name: str
    form: str


def _lookup(offered: Collection[str], aliases: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """Every name a model may write for an offered tool (the original, the provider-safe name given
    to it, an alias of it, and ``functions.``-prefixed forms) → the original name.
    """
    return _lookup_of(tuple(offered), tuple(aliases.items()) if aliases else ())


@functools.lru_cache(maxsize=256)
def _lookup_of(names: tuple[str, ...], aliases: tuple[tuple[str, str], ...] = ()) -> Mapping[str, str]:
    """:func:`_lookup` of the names in this order, built once per tool set (a run offers few)."""
    out: dict[str, str] = {}
    if not names:
        return MappingProxyType(out)
    safe = name_map(names)
    for n in names:
        for written in (n, safe.out(n)):
            out.setdefault(written, n)
            out.setdefault(f"functions.{written}", n)
    offered = set(names)
    for alias, n in aliases:  # after the offered names: an offered name always means its own tool
        if n in offered:
            out.setdefault(alias, n)
            out.setdefault(f"functions.{alias}", n)
    return MappingProxyType(out)


def _aliased(b: _Builder, offered: Collection[str], aliases: Mapping[str, str]) -> None:
    """The calls and named attempts under an alias of an offered tool renamed to the tool's name."""
    names = set(offered)

    def named(name: str) -> str:
        to = aliases.get(name)
        return to if to is not None and name not in names and to in names else name

    b.calls = [c if c.name in names else Call(named(c.name), c.args) for c in b.calls]
    b.malformed_names = [named(n) if n else n for n in b.malformed_names]


def _call_in(obj: Any, lookup: Mapping[str, str], depth: int = 0) -> list[str]:
    """The names of the calls a decoded JSON value holds (``[]``: not a call).

    A call is an object with a name field (``name``, ``tool_name``, ``tool``, or ``function`` as a
    string or ``{name}``) naming an offered tool, or naming any tool beside an arguments field;
    an object whose only key is an offered tool's name with an object value; a list of calls; or
    ``{tool_calls: [...]}`` / ``{function_call: {...}}``.
    """
    if depth > 3:
        return []
    if isinstance(obj, list):
        return [n for item in obj for n in _call_in(item, lookup, depth + 1)]
    if not isinstance(obj, Mapping):
        return []
    for key in ("tool_calls", "function_call", "tool_call"):
        if isinstance(obj.get(key), (list, Mapping)):
            return _call_in(obj[key], lookup, depth + 1)
    name: Any = None
    for key in _NAME_KEYS:
        value = obj.get(key)
        if isinstance(value, Mapping):
            value = value.get("name")
        if isinstance(value, str) and value:
            name = value
            break
    has_args = any(k in obj for k in _ARG_KEYS) or isinstance(obj.get("function"), Mapping)
    if isinstance(name, str):
        if name in lookup:
            return [lookup[name]]
        if has_args:
            return [name]  # a call to a tool that was not offered: still a call attempt
        return []
    if len(obj) == 1:
        (key, value), = obj.items()
        if isinstance(key, str) and key in lookup and isinstance(value, Mapping):
            return [lookup[key]]
    return []


def _call_keys(lookup: Mapping[str, str]) -> re.Pattern[str]:
    """Where a JSON call may be: a key :func:`_call_in` reads written out (``"name"``, an offered
    tool's name …), or a backslash (a key written with escapes).  A JSON value holding none of these
    is no call.
    """
    return _call_keys_of(tuple(lookup))


@functools.lru_cache(maxsize=256)
def _call_keys_of(names: tuple[str, ...]) -> re.Pattern[str]:
    keys = sorted({*_NAME_KEYS, "tool_calls", "function_call", "tool_call", *names}, key=len, reverse=True)
    # a lookahead: keys sharing a quote ("a""name") are found both
    return re.compile('(?="(?:' + "|".join(map(re.escape, keys)) + ')")|\\\\')


def _raw_bound(text: str) -> int:
    """The most characters the raw texts of one reply's attempts hold in all: past it each is cut
    (a list of many calls written in the text gives each of them the whole list).
    """
    return 2 * len(text) + (1 << 16)


#: what every call written in the text holds at least one of: a tag or marker's ``<`` (``<tool_call>``,
#: ``<function=…>``, ``<|python_tag|>``, ``<｜tool▁calls▁begin｜>``), ``[TOOL_CALLS]``, a ``functions.`` stub,
#: a JSON key's quote or escape (``"name"``, ``\\u…``: :func:`_call_keys`), a cut-off call's brace
_CALL_SIGNS = ("<", "[TOOL_CALLS]", "functions.", '"', "\\", "{")


def could_hold_call(text: str) -> bool:
    """Whether ``text`` holds one of :data:`_CALL_SIGNS`: a text with none has no call written in it
    (:func:`_text_channel_calls` finds none, and no JSON object after one), and is not read for them.
    """
    return any(sign in text for sign in _CALL_SIGNS)


def _text_channel_calls(text: str, offered: Collection[str], has_calls: bool,
                        aliases: Mapping[str, str] | None = None) -> tuple[list[tuple[str, str, str]], int]:
    """:func:`_scan_text_channel`, for a text that :func:`could_hold_call` (else no attempt and no result)."""
    if not could_hold_call(text):
        return [], 0
    return _scan_text_channel(text, offered, has_calls, aliases)


def _scan_text_channel(text: str, offered: Collection[str], has_calls: bool,
                       aliases: Mapping[str, str] | None = None) -> tuple[list[tuple[str, str, str]], int]:
    """Every call attempt written into ``text``, in order: ``(original name or as written, reason,
    raw text)``, the raw text running from where the attempt starts to where the next one starts
    (or the text ends); and how many JSON objects that are not calls follow a call written in the
    text (the model going on with the tool's answer it imagines).

    Several per reply; anywhere in it (after prose, before prose, one per fence, inside tags);
    doubled braces (``{{…}}}``) read by their inner object.  With structured calls present, only
    explicit call markers count (a model may echo its call as JSON beside it).

    Time and memory are linear in the text's length (:mod:`~pytest_tooleffect.oracle.textscan`);
    a text whose JSON would take more reading than the bound allows is read up to there, and the
    rest is an attempt of its own saying so (never a clean abstention).
    """
    lookup = _lookup(offered, aliases)
    markers = Markers(text, _OPENERS, _FENCE)
    found: list[_Found] = []
    for pattern, form in _NAMED_FORMS:
        for m in pattern.finditer(text):
            written = m.group(1)
            found.append(_Found(m.start(), m.end(), lookup.get(written, written), form))
    # a JSON object right after a named form (functions.x: {...}) is that call's arguments: the
    # named forms by end, with how far the gap after each may run (blanks, colons, backticks, "json")
    gaps = sorted((f.end, _GAP.match(text, f.end).end()) for f in found)  # type: ignore[union-attr]
    gap_ends = [e for e, _ in gaps]
    reach = list(itertools.accumulate((r for _, r in gaps), max))
    spans = [(f.start, f.end) for f in found]
    results_after = 0
    json_call_end = len(text) + 1  # where the first call written as bare or fenced JSON ends
    keys = [m.start() for m in _call_keys(lookup).finditer(text)]
    scan = JsonScan(text)
    pos = 0
    while not (json_call_end > pos and bisect_left(keys, pos) == len(keys)):  # else no call and no result can follow
        got = scan.next_value(pos)
        if got is None:
            break
        start, obj, end = got
        names = _call_in(obj, lookup) if (lookup or isinstance(obj, (dict, list))) else []
        if not names and isinstance(obj, dict) and obj and end - start > 2 and json_call_end <= start:
            results_after += 1
        if names:
            form = markers.form_at(start)
            i = bisect_right(gap_ends, start) - 1
            if i < 0 or reach[i] < start:  # no named form owns it
                found.extend(_Found(start, end, n, form) for n in names)
                if form.endswith("JSON call"):
                    json_call_end = min(json_call_end, end)
            spans.append((start, end))
        pos = end if names else start + 1
    covered = _Covered(spans)
    braces = [m.start() for m in _OPEN_BRACE.finditer(text)]
    closes = [m.start() for m in _CLOSE_BRACE.finditer(text)]
    # a call cut off mid-JSON (a length stop, a missing brace): its name field outside every read call
    for m in _NAME_FIELD.finditer(text):
        written = m.group(1)
        if written not in lookup or covered(m.start()):
            continue
        i = bisect_left(braces, m.start()) - 1
        if i < 0:
            continue
        brace = braces[i]
        if bisect_left(closes, brace) < bisect_left(closes, m.start()) or covered(brace):
            continue
        form = markers.form_at(brace)
        where = {"JSON call": "", "fenced JSON call": " in a fence"}.get(form, f" in {form}")
        limit = scan.limits.get(brace)  # whole, maybe, but past what the reader reads: that limit, not "unterminated"
        twice = scan.repeated.get(brace)  # whole, but giving a key twice: JSON keeps one of them without a word
        found.append(_Found(brace, m.end(), lookup[written],
                            f"{_TWICE} {twice!r} twice{where}" if twice is not None
                            else f"unterminated JSON call{where}" if limit is None
                            else f"{_UNREADABLE}{where}: {limit}"))
        covered.add(brace, len(text))
        break  # every later name field is inside this call
    # a marker with no readable call after it is still an attempt
    last_start = max((f.start for f in found), default=-1)
    for opener, _closer, form in _OPENERS:
        name_at: tuple[int, re.Match[str] | None] = (len(text) + 1, None)  # a search's start and what it found
        for m in opener.finditer(text):
            if m.start() > last_start and not covered(m.start()):
                if not (name_at[0] <= m.end() <= (name_at[1].start() if name_at[1] else len(text))):
                    name_at = (m.end(), _NAME_FIELD.search(text, m.end()))
                name = name_at[1]
                written = name.group(1) if name else ""
                found.append(_Found(m.start(), m.end(), lookup.get(written, written),
                                    f"{form} without a readable call"))
                last_start = m.start()
    if scan.cut_at is not None:
        found.append(_Found(scan.cut_at, len(text), "", _CUT))
    found.sort(key=lambda f: f.start)
    if has_calls:
        found = [f for f in found if f.form not in ("JSON call", "fenced JSON call")
                 and not f.form.startswith(("unterminated JSON call", _UNREADABLE, _TWICE))]
    ends = [f.start for f in found[1:]] + [len(text)]
    out, left = [], _raw_bound(text)
    for f, end in zip(found, ends):
        raw = text[f.start:max(end, f.end)]
        if len(raw) > left:
            raw = raw[:max(left, 0)] + f" … ({len(raw):,} characters, cut)"
        left -= len(raw)
        reason = (f"the text channel read for calls up to character {f.start:,} of {len(text):,} only: its JSON "
                  f"nests or repeats past what a reply is read for ({scan.budget:,} characters); a call "
                  "after it is not seen" if f.form == _CUT else f"{f.form} in the text channel")
        out.append((f.name, reason, raw))
    return out, 0 if has_calls else results_after


class _Covered:
    """Is a position inside one of some spans (``[start, end)``)?  Binary search over their union."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b in sorted(s for s in spans if s[0] < s[1]):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self._starts = [a for a, _ in merged]
        self._ends = [b for _, b in merged]
        self._extra: list[tuple[int, int]] = []

    def add(self, start: int, end: int) -> None:
        self._extra.append((start, end))

    def __call__(self, pos: int) -> bool:
        i = bisect_right(self._starts, pos) - 1
        return (i >= 0 and pos < self._ends[i]) or any(a <= pos < b for a, b in self._extra)


def _invented_results(text: str) -> list[str]:
    """Tool results the model wrote itself (``<tool_response>``, ``<|ipython|>``, ``[TOOL_RESULTS]``…)."""
    return [f"invented tool result ({m.group(0)}) in the text channel: a tool's answer the model never received"
            for m in _RESULT_TAGS.finditer(text)]


def _from_block(b: _Builder, block: Mapping[str, Any]) -> None:
    kind = block.get("type")
    if kind in ("function_call", "custom_tool_call"):  # Responses API
        b.add(block.get("name"), block.get("arguments", block.get("input")))
    elif kind in ("tool_use", "server_tool_use"):  # Anthropic
        b.add(block.get("name"), block.get("input"))
    elif "functionCall" in block or "function_call" in block:  # Gemini part
        fc = block.get("functionCall") or block.get("function_call") or {}
        if not is_mapping(fc):
            b.attempt("", f"a function call that is a {type(fc).__name__}, not an object", _raw(fc))
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
                b.attempt("", f"a tool call that is a {type(tc).__name__}, not an object", _raw(tc))
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


def parse_emission(output: Any, offered: Collection[str] = (), aliases: Mapping[str, str] | None = None) -> Emission:
    """Normalise one model turn into an :class:`Emission`.

    Args:
        output: any shape listed in the module docstring (dicts, lists, or an object with
            ``model_dump()`` such as a litellm ``ModelResponse``).
        offered: tool names offered at the state, to recognise a bare JSON call in the text.
        aliases: other names of offered tools → their names (an MCP tool's server name → the
            family's ``name``, :func:`tool_aliases`); a call under an alias is the tool's call.
            A name that is itself offered, or an alias of a tool not offered, is left as written.

    Returns:
        The emission, its calls under the offered tools' names; never raises on malformed calls
        (they are reported in ``malformed``).

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
    invented: list[str] = []
    if text:
        calls, results_after = _text_channel_calls(text, offered, bool(b.calls), aliases)
        for name, reason, raw in calls:
            b.attempt(name, reason, raw)
        invented = _invented_results(text)
        invented += ["invented tool result (a JSON object after the call written in the text channel): a tool's "
                     "answer the model never received"] * results_after
        if invented and not b.calls and not b.malformed:  # never a clean abstention
            first = _RESULT_TAGS.search(text)
            b.attempt("", invented[0], text[first.start():] if first else text)
    if aliases:
        _aliased(b, offered, aliases)
    return Emission(tuple(b.calls), tuple(b.malformed), tuple(b.malformed_names), text, tuple(invented),
                    tuple(b.malformed_raw))


def tool_aliases(tools: Iterable[Any]) -> dict[str, str]:
    """The other names a call may give the offered tools: each MCP tool's server name (``mcp_name``,
    where the import made ``name`` provider-safe) → its ``name``.

    Args:
        tools: tool specs (objects with ``name`` and ``mcp_name``, such as
            :class:`~pytest_tooleffect.formats.ToolSpec`).

    Returns:
        ``{mcp_name: name}`` for the tools whose two names differ (empty for most families).
    """
    return {t.mcp_name: t.name for t in tools if getattr(t, "mcp_name", None) and t.mcp_name != t.name}
