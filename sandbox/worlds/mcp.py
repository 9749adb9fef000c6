"""The MCP world: a team's MCP server, run in the sandbox over stdio, acting on a directory.

A family's ``sandbox: {world: mcp, mcp: {command, probe, ...}}`` names the server's command line
(inside the sandbox: ``python3 -m mcp_server_git --repository {root}``), the state probe
(``git`` or ``files``, ``sandbox/mcp_probes.py``) and the path the agent is told (``root_alias``).
The client sends it as the seed table ``server`` (one row) beside the case's ``setup`` rows.

Reset is pooled: the directory a seed builds is kept as a snapshot the first time, and every
later reset to that seed copies the snapshot back (no container, no server started); the server
process keeps running across resets and is started again only after it failed.  A call is sent
as ``tools/call``; its answer carries the text content, ``isError``, the ``structuredContent``
(checked against the tool's ``outputSchema``), the tool's annotations as the server lists them,
the probe's diff over the call and what the call removed for good.  A server that crashes,
hangs, answers malformed JSON-RPC, breaks its own ``outputSchema`` or lists other tools after a
call is refused with the kind and the server's standard error (``McpServerFault: ...``): the
item is an error, never a verdict.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _sibling(name: str) -> Any:
    key = f"tooleffect_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE.parent / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


probes = _sibling("mcp_probes")
stdio = _sibling("mcp_stdio")

#: the third-party packages the image carries for MCP servers (``sandbox/mcp-requirements.txt``)
SITE = HERE.parent / "mcp-site"
TABLES: dict[str, dict[str, Any]] = {
    "setup": {"key": "step", "columns": {"step": "INTEGER", "op": "TEXT", "name": "TEXT", "path": "TEXT",
                                         "content": "TEXT", "args": "JSON"}},
    "server": {"key": "name", "columns": {"name": "TEXT", "command": "JSON", "probe": "TEXT", "timeout_s": "REAL",
                                          "root_alias": "TEXT", "env": "JSON"}},
    **probes.TABLES,
}
SEED_TABLES = ("setup", "server")
TOOLS: dict[str, Any] = {}  # the server's own, listed at run time
#: the service hands ObjectWorld its state directory (``--state``)
USES_STATE_DIR = True
#: the longest wait for a server to start and list its tools, seconds
START_S = 20.0
#: the most repository snapshots a sandbox keeps (one per seed state)
MAX_SNAPSHOTS = 64
#: the longest diff a call's answer carries, lines
DIFF_LINES = 20

RequestError: Any = None


def bind(service: Any) -> None:
    """Take the service's ``RequestError`` (called on load)."""
    global RequestError
    RequestError = service.RequestError


class Pool:
    """The process's MCP server, its snapshots and its directory (one per service process)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "world"
        self.home = base / "home"
        self.home.mkdir(exist_ok=True)
        self.server: Any = None
        self.config_key = ""
        self.tools: dict[str, dict[str, Any]] = {}
        self.listing = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TZ", "SYSTEMROOT")}
        env.setdefault("PATH", "/usr/bin:/bin")
        if SITE.is_dir():
            env["PYTHONPATH"] = str(SITE)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return probes.git_env(env, str(self.home))

    def restore(self, setup: list[dict[str, Any]]) -> None:
        digest = hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:16]
        snapshot = self.base / f"snap-{digest}"
        if not snapshot.is_dir():
            building = self.base / f"build-{digest}"
            shutil.rmtree(building, ignore_errors=True)
            try:
                probes.build(building, setup, self.env(), str(self.home))
            except (ValueError, RuntimeError, OSError) as exc:
                shutil.rmtree(building, ignore_errors=True)
                raise RequestError(f"building the MCP world: {exc}") from None
            building.rename(snapshot)
            kept = sorted(self.base.glob("snap-*"), key=lambda p: p.stat().st_mtime)
            for old in kept[:-MAX_SNAPSHOTS]:  # the states least recently built go first
                shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.copytree(snapshot, self.root, symlinks=True)

    def ensure_server(self, config: dict[str, Any]) -> None:
        key = json.dumps(config, sort_keys=True)
        if self.server is not None and self.config_key == key and self.server.alive():
            return
        self.stop()
        command = [str(part).replace("{root}", str(self.root)) for part in config["command"]]
        env = {**self.env(), **{str(k): str(v) for k, v in (config.get("env") or {}).items()}}
        server = stdio.StdioServer(command, env, str(self.base), float(config.get("timeout_s") or 10.0))
        try:
            server.timeout_s = max(server.timeout_s, START_S)  # importing a server's SDK takes a while
            server.initialize()
            tools = server.list_tools()
            server.timeout_s = float(config.get("timeout_s") or 10.0)
        except stdio.ServerFault as exc:
            server.stop()
            raise fault_error(exc, "starting the server") from None
        except OSError as exc:
            raise RequestError(f"McpServerFault: crash: starting {command[0]!r}: {exc}") from None
        self.server, self.config_key = server, key
        self.tools = {t["name"]: t for t in tools}
        self.listing = _listing(tools)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        self.server = None


def _listing(tools: list[dict[str, Any]]) -> str:
    return json.dumps(sorted(tools, key=lambda t: t["name"]), sort_keys=True)


def fault_error(exc: Any, doing: str) -> Exception:
    """The service's refusal for a :class:`~mcp_stdio.ServerFault` (kind, message, stderr)."""
    payload = json.dumps({"kind": exc.kind, "message": f"{doing}: {exc}", "stderr": exc.stderr})
    return RequestError(f"McpServerFault: {payload}")  # type: ignore[no-any-return]


_POOLS: dict[str, Pool] = {}


def pool(state_dir: Path) -> Pool:
    """The pool of the service whose state directory is ``state_dir`` (made at first use)."""
    base = Path(state_dir) / "mcp"
    if str(base) not in _POOLS:
        base.mkdir(parents=True, exist_ok=True)
        _POOLS[str(base)] = Pool(base)
    return _POOLS[str(base)]


def _validator(schema: dict[str, Any]) -> Any:
    """A JSON Schema validator (the ``jsonschema`` package, from the image's MCP site if need be)."""
    try:
        import jsonschema
    except ImportError:
        if SITE.is_dir() and str(SITE) not in sys.path:
            sys.path.append(str(SITE))
        import jsonschema
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def diff_lines(before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]) -> list[str]:
    """``+ table key``, ``- table key`` and ``~ table key: column old → new`` lines, in table order."""
    out: list[str] = []
    for table, spec in probes.TABLES.items():
        key = spec["key"]
        old = {r[key]: r for r in before.get(table, [])}
        new = {r[key]: r for r in after.get(table, [])}
        for k in sorted(set(old) | set(new), key=str):
            if k not in old:
                out.append(f"+ {table} {k}")
            elif k not in new:
                out.append(f"- {table} {k}")
            elif old[k] != new[k]:
                changes = ", ".join(f"{c}: {_short(old[k].get(c))} → {_short(new[k].get(c))}"
                                    for c in spec["columns"] if old[k].get(c) != new[k].get(c))
                out.append(f"~ {table} {k}: {changes}")
    return out


def _short(value: Any) -> str:
    text = str(value)
    return text[:7] if len(text) == 40 and all(ch in "0123456789abcdef" for ch in text) else text[:60]


class ObjectWorld:
    """One item's MCP world (the service's object-world interface)."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]], state_dir: Path) -> None:
        servers = rows.get("server") or []
        if len(servers) != 1 or not isinstance(servers[0].get("command"), list) or not servers[0]["command"]:
            raise RequestError("the mcp world needs one server row with a command (family.yaml: sandbox.mcp)")
        self.config = dict(servers[0])
        self.probe_name = str(self.config.get("probe") or "files")
        if self.probe_name not in probes.PROBES:
            raise RequestError(f"unknown MCP state probe {self.probe_name!r} (probes: {', '.join(probes.PROBES)})")
        self.seed = {"setup": list(rows.get("setup") or []), "server": servers}
        self.alias = self.config.get("root_alias") or None
        self.pool = pool(state_dir)
        self.pool.restore(self.seed["setup"])
        self.pool.ensure_server(self.config)
        self.calls: list[tuple[str, str, bool]] = []  # (tool, arguments as JSON, changed)

    @property
    def tools(self) -> frozenset[str]:
        """The tools the server listed."""
        return frozenset(self.pool.tools)

    def _probe(self, contents: dict[str, bytes] | None = None) -> dict[str, list[dict[str, Any]]]:
        try:
            rows: dict[str, list[dict[str, Any]]] = probes.PROBES[self.probe_name](self.pool.root, self.pool.env(),
                                                                                   contents)
        except (RuntimeError, OSError) as exc:
            raise RequestError(f"the {self.probe_name} probe failed: {exc}") from None
        return rows

    def _to_server(self, value: Any) -> Any:
        if self.alias is None:
            return value
        if isinstance(value, str) and (value == self.alias or value.startswith(self.alias.rstrip("/") + "/")):
            return str(self.pool.root) + value[len(self.alias.rstrip("/")):]
        if isinstance(value, list):
            return [self._to_server(v) for v in value]
        if isinstance(value, dict):
            return {k: self._to_server(v) for k, v in value.items()}
        return value

    def _from_server(self, text: str) -> str:
        return text.replace(str(self.pool.root), self.alias) if self.alias else text

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
        """Run one ``tools/call``; returns the text, whether it is an error, and the extras."""
        server = self.pool.server
        if server is None or not server.alive():
            raise fault_error(stdio.ServerFault("crash", "the server is not running", ""), f"tools/call {name}")
        contents: dict[str, bytes] = {}
        before = self._probe(contents)
        try:
            try:
                result = server.call(name, self._to_server(arguments))
            except stdio.RpcError as refused:  # an unknown tool, invalid arguments: the agent's to read
                error_text = json.dumps({"error": {"code": refused.code, "message": self._from_server(refused.text)}})
                result = {"content": [{"type": "text", "text": error_text}], "isError": True}
            listed = server.list_tools()
        except stdio.ServerFault as exc:
            self.pool.stop()
            raise fault_error(exc, f"tools/call {name}") from None
        if _listing(listed) != self.pool.listing:
            self.pool.stop()
            was, now = sorted(self.pool.tools), sorted(t["name"] for t in listed)
            raise fault_error(stdio.ServerFault("tools_changed", f"the tools listed changed after the call "
                                                f"(before: {', '.join(was)}; after: {', '.join(now)})",
                                                server.stderr_tail()), f"tools/call {name}")
        after = self._probe()
        tool = self.pool.tools.get(name, {})
        structured = result.get("structuredContent")
        error = bool(result.get("isError"))
        schema = tool.get("outputSchema")
        if isinstance(schema, dict) and not error:
            problem = None
            if structured is None:
                problem = "no structuredContent although the tool declares an outputSchema"
            else:
                errors = sorted(_validator(schema).iter_errors(structured), key=lambda e: list(e.path))
                if errors:
                    where = "/".join(str(p) for p in errors[0].path) or "(root)"
                    problem = f"structuredContent breaks the tool's outputSchema at {where}: {errors[0].message}"
            if problem is not None:
                self.pool.stop()
                raise fault_error(stdio.ServerFault("output_schema", problem, server.stderr_tail()),
                                  f"tools/call {name}")
        texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)
                 and c.get("type") == "text"]
        content = self._from_server("\n".join(texts)) if texts else json.dumps(structured)
        lines = diff_lines(before, after)
        args_key = json.dumps(arguments, sort_keys=True, default=str)
        repeat = bool(self.calls) and self.calls[-1][:2] == (name, args_key)  # the same call just before
        self.calls.append((name, args_key, bool(lines)))
        gone = probes.lost(self.probe_name, self.pool.root, self.pool.env(), before, after, contents) if lines else []
        extras = {"structured": structured, "annotations": tool.get("annotations") or {},
                  "changed": bool(lines), "diff": [self._from_server(x) for x in lines[:DIFF_LINES]],
                  "diff_lines": len(lines), "lost": [self._from_server(x) for x in gone[:DIFF_LINES]],
                  "repeat": repeat}
        return content, error, extras

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """The probe's tables, and the seed tables as given."""
        return {**{k: list(v) for k, v in self.seed.items()}, **self._probe()}
