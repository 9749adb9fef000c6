"""A live MCP server's tools as a family (``tooleffect import mcp``).

The server is reached with the official MCP Python SDK (the ``mcp`` extra): over stdio (a command
line this process starts) or streamable HTTP (a URL).  Its tools are listed page by page
(``tools/list`` and its ``nextCursor``) and written as the family's ``tools.json``: each tool's
``name``, ``description`` and ``parameters`` (the ``inputSchema``), and, when the server gave them,
``title``, ``outputSchema`` and ``annotations`` (MCP's own key names, verbatim:
``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``, ``title``).  A name
MCP allows but providers do not (a dot, a slash, over 64 characters) becomes its provider-safe
name (:func:`pytest_tooleffect.oracle.names.name_map`) and the server's is kept as ``mcp_name``.
``family.yaml`` gets the ``mcp:`` block: the server's name and version, the transport, the
command or URL, and ``trust_annotations: false``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shlex
import signal
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_tooleffect.collect.family import FAMILY_FILE, written_by, yaml_load
from pytest_tooleffect.data.importers.family_yaml import rewrite_family
from pytest_tooleffect.formats import McpServerInfo, McpSource, ToolSpec
from pytest_tooleffect.formats.mcp import HINT_CLASSES
from pytest_tooleffect.oracle.hints import hint_class
from pytest_tooleffect.oracle.names import name_map
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.output_files import write_text
from pytest_tooleffect.util.redaction import redact, register
from pytest_tooleffect.util.urls import url_secrets, without_password

__all__ = ["IMPORT_MCP", "MAX_PAGES", "Catalog", "McpImportError", "catalog_tools", "ignored_hints", "import_mcp",
           "list_catalog"]

IMPORT_MCP = "tooleffect import mcp"
#: the most ``tools/list`` pages read from one server (a cursor that never ends is an error)
MAX_PAGES = 1000
#: the most characters of a stdio server's stderr an error quotes
STDERR_TAIL = 2000
#: the most characters of what the SDK logged that an error quotes
SDK_SAID = 400
#: the most characters of an error message (the server's stderr tail included)
MESSAGE_LIMIT = STDERR_TAIL + 1000
#: pydantic's pointer to its documentation in a validation error: no help for a server's fault
_PYDANTIC_LINK = re.compile(r"\s*For further information visit \S+")
#: the hint keys of MCP's ``ToolAnnotations``, as the specification spells them
HINT_KEYS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
#: how the comment lines this import writes at the top of ``family.yaml`` start (made anew by each import)
_HEADER = (f"# Written by `{IMPORT_MCP}`", "# Running it again rewrites", "# The tools by their hints",
           "# Hints not of MCP's type")


class McpImportError(ValueError):
    """The server could not be reached, or did not list its tools as MCP says; the message says
    which server and, for a stdio server, ends with the last of what it wrote to stderr.
    """


@dataclass(frozen=True)
class Catalog:
    """What a server said about itself: its name and version and its tools (MCP's JSON, camelCase keys)."""

    server: McpServerInfo
    tools: tuple[dict[str, Any], ...]
    pages: int


async def _list(client: Any) -> tuple[list[dict[str, Any]], int]:
    """Every tool of a connected ``mcp.Client``, following ``nextCursor`` to the last page."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    require("mcp", IMPORT_MCP)
    from mcp import types
    from pydantic import TypeAdapter

    raw_result = TypeAdapter(dict[str, Any])
    for page in range(1, MAX_PAGES + 1):
        # the answer as the server sent it, then checked as the SDK checks it: the SDK's models
        # would turn a hint of another type ("yes", 0) into a boolean, and the import must see it
        raw = await client.session.send_request(
            types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor)), raw_result)
        result = types.ListToolsResult.model_validate(raw)
        for tool, sent in zip(result.tools, raw.get("tools") or [], strict=False):
            entry = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
            if isinstance(sent, dict) and isinstance(sent.get("annotations"), dict):
                entry["annotations"] = sent["annotations"]
            tools.append(entry)
        cursor = result.next_cursor
        if cursor is None:
            return tools, page
        if cursor in seen:
            raise McpImportError(f"tools/list gave the cursor {cursor!r} twice: its pages never end")
        seen.add(cursor)
    raise McpImportError(f"tools/list still had a next page after {MAX_PAGES} pages")


async def _catalog(server: Any, timeout: float) -> Catalog:
    require("mcp", IMPORT_MCP)
    from mcp import Client

    async with asyncio.timeout(timeout):
        async with Client(server, read_timeout_seconds=timeout) as client:
            info = client.server_info
            tools, pages = await _list(client)
    name = info.name if info is not None and info.name else "unnamed"
    version = info.version if info is not None and info.version else ""
    return Catalog(McpServerInfo(name=name, version=version), tuple(tools), pages)


def list_catalog(command: Sequence[str] | None = None, url: str | None = None, timeout: float = 60.0) -> Catalog:
    """Connect to a server, introduce this client, and list every tool it offers.

    Args:
        command: the command line that starts a stdio server (program first), or ``None``.
        url: a streamable-HTTP endpoint (``http://127.0.0.1:PORT/mcp``), or ``None``.  Exactly one
            of ``command`` and ``url``.
        timeout: seconds the whole exchange may take.

    Returns:
        The server's :class:`Catalog`.

    Raises:
        McpImportError: the server could not be started or reached, broke off, answered outside
            MCP, or did not answer within ``timeout`` (the message names the server; for a stdio
            server, with the end of its stderr; with what the SDK logged, such as a line it could not
            parse; the URL's credentials cut, control characters shown as escapes).
        MissingExtra: the ``mcp`` extra is not installed.
        KeyboardInterrupt: SIGINT (Ctrl-C) while listing, raised once the server is closed.
    """
    if (command is None) == (url is None) or (command is not None and not command):
        raise McpImportError("give a stdio server's command line or a streamable-HTTP url, not both")
    require("mcp", IMPORT_MCP)
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    for secret in url_secrets(url or ""):  # cut wherever the SDK's or the transport's message repeats it
        register(secret)
    where = (f"the MCP server {shlex.join(command)!r}" if command is not None
             else f"the MCP server at {without_password(url or '')}")
    sdk = _SdkLog()
    logger = logging.getLogger("mcp")
    propagate = logger.propagate
    logger.addHandler(sdk)  # the SDK's own reports (a line it could not parse) go into the message, not the terminal
    logger.propagate = False
    try:
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            server: Any = url
            if command is not None:  # the SDK's stdio transport, with the server's stderr kept for the error
                server = stdio_client(StdioServerParameters(command=command[0], args=list(command[1:])),
                                      errlog=errlog)
            try:
                catalog = asyncio.run(_interruptible(server, timeout))
            except McpImportError as exc:
                raise McpImportError(_clean(f"{where}: {exc}{sdk.said()}{_tail(errlog)}")) from None
            except TimeoutError:
                why = "" if not sdk.said() else " (an answer could not be parsed)"
                raise McpImportError(_clean(f"{where}: no complete tool list within {timeout:g} s{why}"
                                            f"{sdk.said()}{_tail(errlog)}")) from None
            except Exception as exc:  # the SDK's and the transport's errors alike: one line naming the server
                raise McpImportError(_clean(f"{where}: {_reason(exc)}{sdk.said()}{_tail(errlog)}")) from None
    finally:
        logger.removeHandler(sdk)
        logger.propagate = propagate
    if catalog is None:  # Ctrl-C: raised here, once the loop and the server are closed
        raise KeyboardInterrupt
    return catalog


async def _interruptible(server: Any, timeout: float) -> Catalog | None:
    """:func:`_catalog`, or ``None`` when SIGINT (Ctrl-C) came first: the listing is cancelled (the
    transport closes the server) and what the cancellation became inside the SDK (a timeout, a
    closed connection) is not taken for the server's fault.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    hit: list[int] = []

    def interrupt() -> None:
        hit.append(signal.SIGINT)
        if task is not None:
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, interrupt)
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such handlers (Windows)
        handled = False
    try:
        return await _catalog(server, timeout)
    except BaseException:
        if hit:
            return None
        raise
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)


class _SdkLog(logging.Handler):
    """What the SDK logged while listing (a line from the server it could not parse), kept for the error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            first = next((x.strip() for x in str(exc).splitlines()[1:] if x.strip()), "") or str(exc)
            line += f" ({type(exc).__name__}: {first})"
        self.lines.append(line)

    def said(self) -> str:
        """The first thing the SDK logged, bounded, as the middle of a message ("" when nothing)."""
        if not self.lines:
            return ""
        more = f" (and {len(self.lines) - 1} more)" if len(self.lines) > 1 else ""
        return f"; the MCP SDK said: {shown(' '.join(self.lines[0].split()), limit=SDK_SAID)}{more}"


def _clean(message: str) -> str:
    """An error message as the terminal may show it: URL credentials and known secrets cut
    (:func:`~pytest_tooleffect.util.redaction.redact`), control characters as visible escapes
    (:func:`~pytest_tooleffect.util.display.shown`), at most :data:`MESSAGE_LIMIT` characters.
    """
    return shown(redact(message), limit=MESSAGE_LIMIT)


def _reason(exc: BaseException) -> str:
    """An exception as one line; an exception group by its first leaf (anyio's task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = _PYDANTIC_LINK.sub("", " ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tail(errlog: Any) -> str:
    """The last :data:`STDERR_TAIL` characters the server wrote to stderr, as the end of a message."""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read().strip()
    except (OSError, ValueError):
        return ""
    if not text:
        return ""
    cut = "…" if len(text) > STDERR_TAIL else ""
    return f"; its stderr ends: {cut}{text[-STDERR_TAIL:]}"


def catalog_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The server's tools as a family's ``tools.json`` list.

    Args:
        tools: MCP ``Tool`` objects as JSON (``name``, ``title``, ``description``, ``inputSchema``,
            ``outputSchema``, ``annotations``).

    Returns:
        One ``{"name", "description", "parameters"}`` per tool, in the server's order, with
        ``title``, ``outputSchema`` and ``annotations`` (the hint keys the server gave, verbatim)
        when given, and ``mcp_name`` when ``name`` is the server's name made provider-safe.

    Raises:
        McpImportError: a tool without a name, or two tools with the same name.
    """
    names = [t.get("name") for t in tools]
    if not all(isinstance(n, str) and n for n in names):
        raise McpImportError("tools/list gave a tool without a name")
    dup = sorted({str(n) for n in names if names.count(n) > 1})
    if dup:
        raise McpImportError(f"tools/list gave the same tool name twice: {', '.join(dup)}")
    safe = name_map(str(n) for n in names)
    out: list[dict[str, Any]] = []
    for tool in tools:
        name = str(tool["name"])
        entry: dict[str, Any] = {"name": safe.out(name), "description": tool.get("description") or "",
                                 "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}}}
        if tool.get("title"):
            entry["title"] = tool["title"]
        if tool.get("outputSchema") is not None:
            entry["outputSchema"] = tool["outputSchema"]
        hints = tool.get("annotations") or {}
        kept = {k: hints[k] for k in HINT_KEYS if hints.get(k) is not None and _typed(k, hints[k])}
        if kept:
            entry["annotations"] = kept
        if entry["name"] != name:
            entry["mcp_name"] = name
        out.append(entry)
    return out


def _typed(key: str, value: Any) -> bool:
    """Whether a hint's value has the type MCP gives it: ``title`` a string, every other a boolean."""
    return isinstance(value, str) if key == "title" else isinstance(value, bool)


def ignored_hints(tools: Sequence[dict[str, Any]]) -> list[str]:
    """The hints of the server's tools that are not of their type (``"readOnlyHint": "yes"``,
    ``"destructiveHint": 0``), as ``"TOOL: KEY=VALUE"``: :func:`catalog_tools` leaves them out, so
    the tool reads as not declaring them (MCP's worst-case default), never as a guessed boolean.
    """
    out: list[str] = []
    for tool in tools:
        hints = tool.get("annotations") or {}
        if isinstance(hints, dict):
            out += [f"{tool.get('name')}: {k}={json.dumps(hints[k], ensure_ascii=False)}" for k in HINT_KEYS
                    if hints.get(k) is not None and not _typed(k, hints[k])]
    return out


def _trust_kept(out: Path, source: McpSource, tools: Sequence[dict[str, Any]]) -> str:
    """Whether the family's ``trust_annotations: true`` outlives this import.

    The user set it after checking the server's hints (``tooleffect sandbox probe``); it holds for
    that server only.  ``"kept"``: it was true and the server's name and version and every tool as
    written (``tools.json``: names, schemas, hints) are unchanged.  ``"reset"``: it was true and
    something changed, so it goes back to false until the hints are checked again.  ``"default"``:
    it was not true (or the earlier files are not readable), so the import's default stands.
    """
    try:
        earlier = yaml_load((out / FAMILY_FILE).read_text(encoding="utf-8"))
        before = json.loads((out / "tools.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return "default"
    block = earlier.get("mcp") if isinstance(earlier, dict) else None
    if not isinstance(block, dict) or block.get("trust_annotations") is not True:
        return "default"
    same_server = block.get("server") == source.server.model_dump(mode="json")
    return "kept" if same_server and before == json.loads(json.dumps(list(tools))) else "reset"


def import_mcp(out: Path, catalog: Catalog, source: McpSource) -> dict[str, Any]:
    """Write the family: ``out/tools.json`` and ``out/family.yaml``.

    A ``family.yaml`` this command wrote before keeps every key but ``mcp`` and ``tools_file``
    (the ``annotations:`` policy, the system prompt, the oracle a user added) and the user's
    comments, the ``mcp`` block's included (:func:`~pytest_tooleffect.data.importers.family_yaml.rewrite_family`,
    ruamel.yaml's round trip); only the header this import writes is made anew.  A new one names the
    family after its folder.

    Args:
        out: the family folder (made when missing).
        catalog: the server's tools (:func:`list_catalog`).
        source: the ``mcp:`` block (its ``server`` is the catalog's).

    Returns:
        A summary: the server, the number of tools, of pages and of renamed tools; ``trust``, what
        became of a ``trust_annotations: true`` the family had (:func:`_trust_kept`: ``kept``,
        ``reset``, ``default``; ``new`` for a family written the first time); per hint, the
        tools that declare it; the tools that declare none; the tools per hint class (``read``,
        ``write``, ``destructive``) as their hints read, an absent hint at MCP's default; the hints
        left out because they are not of MCP's type (``ignored_hints``, :func:`ignored_hints`).
        A URL is written without its password and secret query parameters
        (:func:`~pytest_tooleffect.util.urls.without_password`).

    Raises:
        OSError: the folder or a file cannot be written.
        McpImportError: the catalog is not usable (:func:`catalog_tools`), or the family file this
            import wrote before is no longer valid YAML.
        MissingExtra: importing again, and ruamel.yaml (the ``mcp`` extra) is not installed.
    """
    tools = catalog_tools(catalog.tools)
    out.mkdir(parents=True, exist_ok=True)
    family: dict[str, Any] = {"name": out.resolve().name, "description": f"The tools of the MCP server "
                              f"{catalog.server.name} {catalog.server.version}".rstrip() + "."}
    path = out / FAMILY_FILE
    owned: dict[str, Any] = {"tools_file": "tools.json", "mcp": source.model_dump(mode="json", exclude_none=True)}
    if source.url is not None:  # never a password or a token: the URL as shown
        owned["mcp"]["url"] = without_password(source.url)
    body: str | None = None
    trust = "new"
    if written_by(out, IMPORT_MCP):  # the keys it owns replaced, the rest and the user's comments kept
        trust = _trust_kept(out, source, tools)
        owned["mcp"]["trust_annotations"] = trust == "kept"
        try:
            text = path.read_text(encoding="utf-8")
            yaml_load(text)  # as a run reads it: a key given twice is refused here too
            body = rewrite_family(text, _HEADER, owned, IMPORT_MCP)
        except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
            raise McpImportError(f"{path}: the family file this import wrote before is no longer valid YAML, so "
                                 f"its other keys cannot be kept: {' '.join(str(exc).split())}") from None
    if body is None:
        body = yaml.safe_dump({**family, **owned}, sort_keys=False, allow_unicode=True, width=110)
    # each file replaced whole (a symbolic link by the new file, its target left as it was)
    write_text(out / "tools.json", json.dumps(tools, indent=2, ensure_ascii=False) + "\n")
    how = shlex.join(source.command) if source.command is not None else without_password(source.url or "")
    classes: Counter[str] = Counter(hint_class(ToolSpec.model_validate(t)) for t in tools)
    unannotated = sum(1 for t in tools if not any(k in t.get("annotations", {}) for k in HINT_KEYS[1:]))
    read_as = ", ".join(f"{c} {classes.get(c, 0)}" for c in HINT_CLASSES)
    ignored = ignored_hints(catalog.tools)
    said = "" if not ignored else (f"{_HEADER[3]}, read as not declared: "
                                   f"{shown('; '.join(ignored), limit=500)}.\n")
    write_text(path, f"{_HEADER[0]} from "
               f"{shown(f'{catalog.server.name} {catalog.server.version} ({how})', limit=500)}.\n"
               f"{_HEADER[1]} tools.json and the mcp: block and keeps the other keys and comments.\n"
               f"{_HEADER[2]}, an absent hint at MCP's default (not read-only, destructive, not "
               f"idempotent, open world): {read_as}; {unannotated} of {len(tools)} declare no hint.\n" + said + body)
    declared = {k: sum(1 for t in tools if k in t.get("annotations", {})) for k in HINT_KEYS[1:]}
    return {"server": catalog.server.model_dump(), "tools": len(tools), "pages": catalog.pages, "trust": trust,
            "renamed": sum(1 for t in tools if "mcp_name" in t), "declared": declared,
            "unannotated": unannotated, "classes": {c: classes.get(c, 0) for c in HINT_CLASSES},
            "ignored_hints": ignored}
