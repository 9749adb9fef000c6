"""The sandbox service: a family's tools over a world state in SQLite, JSON lines on a unix socket.

Runs inside the sandbox container (``python3 -I service.py --socket PATH --state DIR``) and, for
fast unit tests, in-process through the local provider.  Standard library only.

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
        objects = module.ObjectWorld(rows or {}) if hasattr(module, "ObjectWorld") else None
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
            content, error = self.objects.call(name, arguments)
            if kind == "malformed":
                content = content[: max(1, len(content) // 2)]
            return {"ok": True, "content": content, "error": error, "fault": kind}
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
            try:
                with self.server.world.lock:
                    answer = handle(self.server.world, json.loads(line))
            except (RequestError, json.JSONDecodeError, sqlite3.Error) as exc:
                answer = {"ok": False, "error": f"{exc}"}
            except Exception as exc:  # never let one request take the connection down
                answer = {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"[:500]}
            # ASCII-escaped JSON: a lone surrogate in an argument stays representable
            self.wfile.write(json.dumps(answer).encode() + b"\n")
            self.wfile.flush()


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The service on a unix socket; connections are served one thread each (calls are serialised)."""

    daemon_threads = True

    def __init__(self, path: str, world: World) -> None:
        if os.path.exists(path):
            os.unlink(path)
        super().__init__(path, Handler)
        os.chmod(path, 0o666)
        self.world = world


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted (``--socket PATH --state DIR``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--state", required=True, help="directory for the world's SQLite file")
    args = parser.parse_args(argv)
    server = Server(args.socket, World(Path(args.state)))
    sys.stdout.write(f"listening on {args.socket}\n")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
