"""The sandbox service: a family's tools over a world state in SQLite, JSON lines on a unix socket.

Runs inside the sandbox container (``python3 -I service.py --socket @NAME --state DIR --lease S``)
and, for fast unit tests, in-process through the local provider.  Standard library only.

In the container the socket is abstract (``@NAME``: no file; the container's own network
namespace keeps it private), and the client reaches it through ``service.py --relay @NAME``
started by ``docker exec -i``: the relay copies its stdin to the socket and the socket to its
stdout, so nothing on the engine's host file system is needed.  ``--lease S`` ends the service
when no request has come for S seconds (its client's heartbeat keeps it alive), unless a
``keep`` request arrived: a sandbox whose controller vanished ends itself.

The world is a SQLite file under ``--state`` (a tmpfs in the container).  ``reset`` replaces it
with a world's seed rows in a few milliseconds, so a warm container serves item after item;
``call`` runs one tool call, applying the fault declared for that tool if any; ``snapshot``
returns every row.  See README.md in this folder for the protocol.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import socketserver
import sqlite3
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo

HERE = Path(__file__).resolve().parent
WORLDS = HERE / "worlds"

# column types a world may declare; DATETIME is stored as UTC ISO 8601, JSON as JSON text
COLUMN_TYPES = {"TEXT": "TEXT", "INTEGER": "INTEGER", "REAL": "REAL", "JSON": "TEXT", "DATETIME": "TEXT"}
FAULT_KINDS = ("status", "timeout", "malformed", "slow")


class ToolError(Exception):
    """A tool refused its arguments; the agent sees ``{"error": {"status": ..., "message": ...}}``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class RequestError(Exception):
    """A request the service cannot serve (unknown op, table, column or world)."""


def load_world(name: str) -> ModuleType:
    """Import ``worlds/<name>.py`` (``TABLES`` and ``TOOLS``).

    Raises:
        RequestError: no such world.
    """
    if not name.isidentifier():
        raise RequestError(f"unknown world {name!r}")
    path = WORLDS / f"{name}.py"
    if not path.is_file():
        raise RequestError(f"unknown world {name!r} (no {path.name} in the sandbox image)")
    spec = importlib.util.spec_from_file_location(f"tooleffect_world_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.bind(sys.modules[__name__])
    return module


def parse_instant(value: Any, zone: str) -> datetime:
    """An ISO 8601 date-time as an aware datetime; a naive one is read in ``zone``.

    Raises:
        ToolError: not an ISO 8601 date-time.
    """
    if not isinstance(value, str):
        raise ToolError(f"expected an ISO 8601 date-time, got {type(value).__name__}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ToolError(f"not an ISO 8601 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=ZoneInfo(zone))
    return parsed


def utc_text(instant: datetime) -> str:
    """``instant`` in UTC, ISO 8601 with ``+00:00`` (how DATETIME columns are stored)."""
    return instant.astimezone(UTC).isoformat()


class World:
    """One world state in a SQLite file under ``state_dir``."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.db: sqlite3.Connection | None = None
        self.module: ModuleType | None = None
        self.modules: dict[str, ModuleType] = {}
        self.faults: dict[str, dict[str, Any]] = {}
        self.fired: dict[str, int] = {}
        self.timezone = "UTC"
        self.objects: Any = None  # a world of Python objects (its module defines ObjectWorld)
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ reset / snapshot

    def reset(self, world: str, rows: dict[str, list[dict[str, Any]]], faults: dict[str, Any],
              zone: str | None) -> dict[str, int]:
        if world not in self.modules:
            self.modules[world] = load_world(world)
        module = self.modules[world]
        zone = zone or "UTC"
        try:
            ZoneInfo(zone)
        except Exception:
            raise RequestError(f"unknown time zone {zone!r}") from None
        objects = None
        if hasattr(module, "ObjectWorld"):  # a world that keeps files asks for the state directory
            extra = {"state_dir": self.state_dir} if getattr(module, "USES_STATE_DIR", False) else {}
            objects = module.ObjectWorld(rows or {}, **extra)
        tools = objects.tools if objects is not None else module.TOOLS
        for tool, fault in (faults or {}).items():
            if tool not in tools:
                raise RequestError(f"fault for unknown tool {tool!r}")
            if not isinstance(fault, dict) or fault.get("kind") not in FAULT_KINDS:
                raise RequestError(f"fault for {tool!r} must have kind one of {', '.join(FAULT_KINDS)}")
        if self.db is not None:
            self.db.close()
            self.db = None
        if objects is not None:
            self.module, self.objects, self.timezone = module, objects, zone
            self.faults = {k: dict(v) for k, v in (faults or {}).items()}
            self.fired = {}
            return {table: len((rows or {}).get(table, [])) for table in module.SEED_TABLES}
        self.objects = None
        path = self.state_dir / "world.db"
        for suffix in ("", "-journal"):
            try:
                os.unlink(f"{path}{suffix}")
            except FileNotFoundError:
                pass
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=MEMORY")
        db.execute("PRAGMA synchronous=OFF")
        counts: dict[str, int] = {}
        db.execute("BEGIN")
        for table, spec in module.TABLES.items():
            cols = ", ".join(f'"{c}" {COLUMN_TYPES[t]}' for c, t in spec["columns"].items())
            db.execute(f'CREATE TABLE "{table}" ({cols}, PRIMARY KEY ("{spec["key"]}"))')
        for table, table_rows in (rows or {}).items():
            if table not in module.TABLES:
                db.execute("ROLLBACK")
                raise RequestError(f"world {world!r} has no table {table!r}")
            columns = module.TABLES[table]["columns"]
            for row in table_rows:
                unknown = sorted(set(row) - set(columns))
                if unknown:
                    db.execute("ROLLBACK")
                    raise RequestError(f"table {table!r} has no column {unknown[0]!r}")
                values = [encode(columns[c], row[c], zone) for c in row]
                marks = ", ".join("?" for _ in row)
                names = ", ".join(f'"{c}"' for c in row)
                try:
                    db.execute(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', values)
                except sqlite3.IntegrityError as exc:
                    db.execute("ROLLBACK")
                    raise RequestError(f"table {table!r}: {exc}") from None
            counts[table] = len(table_rows)
        db.execute("COMMIT")
        self.db, self.module, self.timezone = db, module, zone
        self.faults = {k: dict(v) for k, v in (faults or {}).items()}
        self.fired = {}
        return counts

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        if self.objects is not None:
            return self.objects.snapshot()  # type: ignore[no-any-return]
        db, module = self._ready()
        out: dict[str, list[dict[str, Any]]] = {}
        for table, spec in module.TABLES.items():
            columns = list(spec["columns"])
            names = ", ".join(f'"{c}"' for c in columns)
            cursor = db.execute(f'SELECT {names} FROM "{table}" ORDER BY rowid')
            out[table] = [
                {c: decode(spec["columns"][c], v) for c, v in zip(columns, row, strict=True)} for row in cursor
            ]
        return out

    def _ready(self) -> tuple[sqlite3.Connection, ModuleType]:
        if self.db is None or self.module is None:
            raise RequestError("no world loaded: send reset first")
        return self.db, self.module

    # ------------------------------------------------------------------ tool calls

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run one tool call; the answer's ``content`` is the text the agent reads back."""
        tool: Any = None
        if self.objects is None:
            db, module = self._ready()
            tool = module.TOOLS.get(name)
        elif name in self.objects.tools:
            tool = self.objects.call  # the object world runs the call below
        if tool is None:
            return {"ok": True, "content": json.dumps({"error": {"status": 404, "message": f"unknown tool {name}"}}),
                    "error": True, "fault": None}
        fault = self.faults.get(name)
        kind = None
        if fault is not None and self.fired.get(name, 0) < int(fault.get("times", 1)):
            self.fired[name] = self.fired.get(name, 0) + 1
            kind = fault["kind"]
            if kind == "status":
                status = int(fault.get("status", 503))
                message = fault.get("message") or ("Service Unavailable" if status == 503 else "upstream error")
                return {"ok": True, "content": json.dumps({"error": {"status": status, "message": message}}),
                        "error": True, "fault": "status"}
            if kind == "timeout":
                after = float(fault.get("after_ms", 200))
                time.sleep(after / 1000)
                return {"ok": True, "content": json.dumps({"error": {"type": "timeout",
                        "message": f"the tool did not answer within {after:g} ms"}}), "error": True, "fault": "timeout"}
            if kind == "slow":
                time.sleep(float(fault.get("ms", 200)) / 1000)
        if not isinstance(arguments, dict):
            refusal = {"error": {"status": 400, "message": "arguments must be an object"}}
            return {"ok": True, "content": json.dumps(refusal), "error": True, "fault": kind}
        if self.objects is not None:
            content, error, *more = self.objects.call(name, arguments)
            if kind == "malformed":
                content = content[: max(1, len(content) // 2)]
            answer = {"ok": True, "content": content, "error": error, "fault": kind}
            if more:  # an object world's own facts about the call (an MCP world's structured content, diff)
                answer["extras"] = more[0]
            return answer
        db.execute("BEGIN")
        try:
            result = tool(db, arguments, self.timezone)
        except ToolError as exc:
            db.execute("ROLLBACK")
            return {"ok": True, "content": json.dumps({"error": {"status": exc.status, "message": str(exc)}}),
                    "error": True, "fault": kind}
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            db.execute("ROLLBACK")
            refusal = {"error": {"status": 400, "message": f"bad arguments: {exc}"}}
            return {"ok": True, "content": json.dumps(refusal), "error": True, "fault": kind}
        except Exception as exc:  # the tool failed on these arguments (a full disk, say): its answer, not a crash
            if db.in_transaction:
                db.execute("ROLLBACK")
            failure = {"error": {"status": 500, "message": f"{type(exc).__name__}: {exc}"[:500]}}
            return {"ok": True, "content": json.dumps(failure), "error": True, "fault": kind}
        db.execute("COMMIT")
        content = json.dumps(result, ensure_ascii=False)
        if kind == "malformed":
            # the call ran (its effect is in the world) but its answer arrives cut short
            content = content[: max(1, len(content) // 2)]
        return {"ok": True, "content": content, "error": False, "fault": kind}


def encode(column_type: str, value: Any, zone: str) -> Any:
    """A seed or tool value as stored in a column of ``column_type``."""
    if value is None:
        return None
    if column_type == "JSON":
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if column_type == "DATETIME":
        try:
            return utc_text(parse_instant(value, zone))
        except ToolError as exc:
            raise RequestError(str(exc)) from None
    return value


def decode(column_type: str, value: Any) -> Any:
    """A stored value as the snapshot reports it (JSON columns decoded)."""
    if column_type == "JSON" and value is not None:
        return json.loads(value)
    return value


def handle(world: World, request: Any) -> dict[str, Any]:
    """Answer one request (a decoded JSON object)."""
    if not isinstance(request, dict):
        raise RequestError("a request is a JSON object")
    op = request.get("op")
    if op == "ping":
        return {"ok": True, "pid": os.getpid(), "uid": os.getuid()}
    if op == "reset":
        counts = world.reset(str(request.get("world")), request.get("rows") or {}, request.get("faults") or {},
                             request.get("timezone"))
        return {"ok": True, "rows": counts}
    if op == "call":
        return world.call(str(request.get("name")), request.get("arguments"))
    if op == "snapshot":
        return {"ok": True, "tables": world.snapshot()}
    raise RequestError(f"unknown op {op!r}")


class Handler(socketserver.StreamRequestHandler):
    """One connection: a JSON request per line, a JSON answer per line, until EOF."""

    server: Server

    def handle(self) -> None:
        for line in self.rfile:
            self.server.touch()
            try:
                request = json.loads(line)
                if isinstance(request, dict) and request.get("op") == "keep":
                    self.server.kept = True  # kept for inspection: the lease no longer ends it
                    answer = {"ok": True, "kept": True}
                else:
                    with self.server.world.lock:
                        answer = handle(self.server.world, request)
            except (RequestError, json.JSONDecodeError, sqlite3.Error) as exc:
                answer = {"ok": False, "error": f"{exc}"}
            except Exception as exc:  # never let one request take the connection down
                answer = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"[:500]}
            # ASCII-escaped JSON: a lone surrogate in an argument stays representable
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()
            self.server.touch()


def socket_address(path: str) -> str:
    """The address to bind: ``@NAME`` is Linux's abstract namespace (no file), else a path."""
    return "\0" + path[1:] if path.startswith("@") else path


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The service on a unix socket; connections are served one thread each (calls are serialised).

    Args:
        path: a socket path, or ``@NAME`` for an abstract socket.
        world: the world state.
        lease_s: end :meth:`serve_forever` after this many seconds without a request (``None``:
            never), unless a ``keep`` request arrived.
    """

    daemon_threads = True

    def __init__(self, path: str, world: World, lease_s: float | None = None) -> None:
        address = socket_address(path)
        if not address.startswith("\0"):
            if os.path.exists(address):
                os.unlink(address)
        super().__init__(address, Handler)
        if not address.startswith("\0"):
            os.chmod(address, 0o666)
        self.world = world
        self.lease_s = lease_s
        self.kept = False
        self.expired = False
        self.last = time.monotonic()
        if lease_s is not None:
            threading.Thread(target=self._watch, daemon=True).start()

    def touch(self) -> None:
        """Record a request now (the liveness the lease is counted from)."""
        self.last = time.monotonic()

    def _watch(self) -> None:
        assert self.lease_s is not None
        while True:
            time.sleep(min(1.0, self.lease_s / 4))
            if not self.kept and time.monotonic() - self.last > self.lease_s:
                self.expired = True
                self.shutdown()
                return


def relay(path: str, deadline_s: float = 30.0) -> int:
    """Copy stdin to the service's socket and its answers to stdout until either side ends.

    Waits up to ``deadline_s`` seconds for the service to listen (a container just started).
    Returns the exit status: 0, or 1 when the service never answered.
    """
    end = time.monotonic() + deadline_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(socket_address(path))
            break
        except OSError as exc:
            sock.close()
            if time.monotonic() > end:
                sys.stderr.write(f"relay: no service on {path}: {exc}\n")
                return 1
            time.sleep(0.005)

    def answers() -> None:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(1, view):]

    upstream = threading.Thread(target=answers, daemon=True)
    upstream.start()
    while True:
        data = os.read(0, 65536)
        if not data:  # the client's stream ended: end the connection (the service lives on)
            break
        sock.sendall(data)
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    upstream.join(5.0)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted or the lease ends (``--socket PATH --state DIR [--lease S]``), or
    relay stdio to a running service (``--relay PATH``).
    """
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket", help="unix socket path to listen on (@NAME: abstract)")
    parser.add_argument("--state", help="directory for the world's SQLite file")
    parser.add_argument("--lease", type=float, default=None,
                        help="end after this many seconds without a request (unless kept)")
    parser.add_argument("--relay", metavar="PATH", help="copy stdin/stdout to the service at PATH")
    args = parser.parse_args(argv)
    if args.relay:
        return relay(args.relay)
    if not args.socket or not args.state:
        parser.error("--socket and --state are required (or --relay)")
    server = Server(args.socket, World(Path(args.state)), args.lease)
    sys.stderr.write(f"listening on {args.socket}\n")
    sys.stderr.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    if server.expired:
        sys.stderr.write(f"no request for {args.lease:g} s: the lease ended\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
