"""The scheduling world: email threads, the user's calendar, attendees' busy times and replies.

The tools are those of ``cases/scheduling/family.yaml``.  Times: DATETIME columns hold UTC; a
naive time in a seed row or in a call's arguments is read in the case's time zone, and answers
show times in that zone.  The calendar belongs to one user (the organiser of every event), so her
events count as busy in ``list_availability``.

Each tool is ``tool(db, arguments, zone) -> result`` and raises ``ToolError`` to refuse.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

# the service's helpers, handed over by bind() when service.py loads this world
ToolError: Any = None
parse_instant: Any = None
utc_text: Any = None

TABLES: dict[str, dict[str, Any]] = {
    "threads": {"key": "thread_id",
                "columns": {"thread_id": "TEXT", "subject": "TEXT", "participants": "JSON", "messages": "JSON"}},
    "events": {"key": "event_id",
               "columns": {"event_id": "TEXT", "thread_id": "TEXT", "title": "TEXT", "start": "DATETIME",
                           "duration_minutes": "INTEGER", "attendees": "JSON"}},
    "busy": {"key": "busy_id",
             "columns": {"busy_id": "TEXT", "email": "TEXT", "start": "DATETIME", "end": "DATETIME"}},
    "replies": {"key": "reply_id",
                "columns": {"reply_id": "TEXT", "thread_id": "TEXT", "kind": "TEXT", "body": "TEXT"}},
}

REPLY_KINDS = ("ack", "question", "proposal", "decline")


def bind(service: Any) -> None:
    """Take the service's ``ToolError``, ``parse_instant`` and ``utc_text`` (called on load)."""
    global ToolError, parse_instant, utc_text
    ToolError, parse_instant, utc_text = service.ToolError, service.parse_instant, service.utc_text


def _required(arguments: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    if name not in arguments:
        raise ToolError(f"missing required argument {name!r}")
    value = arguments[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ToolError(f"argument {name!r} has the wrong type")
    return value


def _thread(db: sqlite3.Connection, thread_id: str) -> tuple[Any, ...]:
    row = db.execute("SELECT thread_id, subject, participants, messages FROM threads WHERE thread_id = ?",
                     (thread_id,)).fetchone()
    if row is None:
        raise ToolError(f"no thread {thread_id!r}", status=404)
    return tuple(row)


def _new_id(db: sqlite3.Connection, table: str, key: str, prefix: str, first: int) -> str:
    """The first ``prefix<n>`` (n from ``first`` + the row count) not yet taken in ``table``."""
    (n,) = db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()
    n += first
    while db.execute(f'SELECT 1 FROM "{table}" WHERE "{key}" = ?', (f"{prefix}{n}",)).fetchone():
        n += 1
    return f"{prefix}{n}"


def _local(instant_utc: str, zone: str) -> str:
    return datetime.fromisoformat(instant_utc).astimezone(ZoneInfo(zone)).isoformat()


def read_thread(db: sqlite3.Connection, arguments: dict[str, Any], zone: str) -> dict[str, Any]:
    """The thread: subject, participants and messages; 404 when there is none."""
    thread_id, subject, participants, messages = _thread(db, _required(arguments, "thread_id", str))
    return {"thread_id": thread_id, "subject": subject, "participants": json.loads(participants or "[]"),
            "messages": json.loads(messages or "[]")}


def list_availability(db: sqlite3.Connection, arguments: dict[str, Any], zone: str) -> dict[str, Any]:
    """The common free slots inside the window, given busy rows and the user's events."""
    attendees = _required(arguments, "attendees", list)
    if not attendees or not all(isinstance(a, str) for a in attendees):
        raise ToolError("attendees must be a non-empty list of email addresses")
    start = parse_instant(_required(arguments, "window_start", str), zone)
    end = parse_instant(_required(arguments, "window_end", str), zone)
    if end <= start:
        raise ToolError("window_end must be after window_start")
    emails = [a.strip().lower() for a in attendees]
    intervals: list[tuple[datetime, datetime]] = []
    marks = ", ".join("?" for _ in emails)
    for s, e in db.execute(f"SELECT start, end FROM busy WHERE lower(email) IN ({marks})", emails):
        intervals.append((datetime.fromisoformat(s), datetime.fromisoformat(e)))
    for s, minutes in db.execute("SELECT start, duration_minutes FROM events"):
        begin = datetime.fromisoformat(s)
        intervals.append((begin, begin + timedelta(minutes=minutes or 30)))
    free: list[dict[str, str]] = []
    cursor = start
    for s, e in sorted(intervals):
        if e <= cursor or s >= end:
            continue
        if s > cursor:
            free.append({"start": cursor, "end": s})  # type: ignore[dict-item]
        cursor = max(cursor, e)
    if cursor < end:
        free.append({"start": cursor, "end": end})  # type: ignore[dict-item]
    tz = ZoneInfo(zone)
    return {"time_zone": zone,
            "common_free": [{"start": f["start"].astimezone(tz).isoformat(),  # type: ignore[attr-defined]
                             "end": f["end"].astimezone(tz).isoformat()} for f in free]}  # type: ignore[attr-defined]


def create_event(db: sqlite3.Connection, arguments: dict[str, Any], zone: str) -> dict[str, Any]:
    """Insert an event (start stored in UTC); duplicates are not refused, as in a real calendar."""
    thread_id = _required(arguments, "thread_id", str)
    _thread(db, thread_id)
    title = _required(arguments, "title", str)
    start = parse_instant(_required(arguments, "start", str), zone)
    attendees = _required(arguments, "attendees", list)
    if not all(isinstance(a, str) for a in attendees):
        raise ToolError("attendees must be email addresses")
    minutes = arguments.get("duration_minutes", 30)
    if not isinstance(minutes, int) or isinstance(minutes, bool) or not 5 <= minutes <= 480:
        raise ToolError("duration_minutes must be a whole number from 5 to 480")
    unknown = sorted(set(arguments) - {"thread_id", "title", "start", "attendees", "duration_minutes"})
    if unknown:
        raise ToolError(f"unknown argument {unknown[0]!r}")
    event_id = _new_id(db, "events", "event_id", "ev-", 50001)
    db.execute("INSERT INTO events (event_id, thread_id, title, start, duration_minutes, attendees) "
               "VALUES (?, ?, ?, ?, ?, ?)",
               (event_id, thread_id, title, utc_text(start), minutes, json.dumps(attendees, sort_keys=True)))
    return {"status": "created", "event_id": event_id, "title": title,
            "start": start.astimezone(ZoneInfo(zone)).isoformat(), "duration_minutes": minutes}


def reply(db: sqlite3.Connection, arguments: dict[str, Any], zone: str) -> dict[str, Any]:
    """Record a reply on an existing thread."""
    thread_id = _required(arguments, "thread_id", str)
    _thread(db, thread_id)
    kind = _required(arguments, "kind", str)
    if kind not in REPLY_KINDS:
        raise ToolError(f"kind must be one of {', '.join(REPLY_KINDS)}")
    body = arguments.get("body")
    if body is not None and not isinstance(body, str):
        raise ToolError("body must be text")
    reply_id = _new_id(db, "replies", "reply_id", "re-", 70001)
    db.execute("INSERT INTO replies (reply_id, thread_id, kind, body) VALUES (?, ?, ?, ?)",
               (reply_id, thread_id, kind, body))
    return {"status": "sent", "reply_id": reply_id}


TOOLS = {
    "read_thread": read_thread,
    "list_availability": list_availability,
    "calendar.create_event": create_event,
    "mail.reply": reply,
}
