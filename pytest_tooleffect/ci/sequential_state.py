"""Where a run's sequential gates keep their running tallies, shared by every process that scores.

A sequential gate (:mod:`.sequential_gate`) is decided as paired decisions complete; under
``pytest -n W`` they complete on several workers, and with shards on several hosts.  Each process
adds what it scored to one tally per family × policy (:meth:`SettleStore.add`, one atomic step),
asks the test on the totals it got back, and records the first verdict (:meth:`SettleStore.settle`:
set once, never replaced, so the stopping time is the first one any process saw); before an item's
model turn each process reads whether its block is settled (:meth:`SettleStore.read`).

Two stores, as the rate limit has (:mod:`pytest_tooleffect.decide.ratelimit`):

- :class:`SqliteSettleStore`: one SQLite file the controller creates in a private folder and hands
  to its workers (``workerinput``); ``BEGIN IMMEDIATE`` makes each update one atomic step across
  processes.
- :class:`RedisSettleStore`: a hash in the run's shared Redis (ini ``tooleffect_rate_backend``),
  under ``tooleffect:settle:NAME:KEY`` (``NAME`` from the URL's fragment, ``KEY`` the run's
  ``--tooleffect-settle-key``, which every shard of one run gives), updated by one Lua script per
  decision; it expires :data:`REDIS_TTL_S` after its last update.

A store that fails (Redis gone, a state file SQLite cannot use) raises :class:`SettleStoreError`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.urls import without_password

__all__ = ["REDIS_TTL_S", "RedisSettleStore", "SettleStore", "SettleStoreError", "SqliteSettleStore", "Tally"]

#: a Redis tally expires this long after its last update (seconds: a week)
REDIS_TTL_S = 7 * 24 * 3600


class SettleStoreError(Exception):
    """The sequential gates' shared store failed (its Redis, or its state file)."""


@dataclass
class Tally:
    """One family × policy's running counts, and its verdict once settled.

    Attributes:
        decisions: decisions made (scored or error): each one's model turn was paid for.
        pairs: scored decisions paired with the baseline (the same record id scored in both).
        regressions: pairs that passed in the baseline and fail now.
        improvements: pairs that failed in the baseline and pass now.
        cost_usd: the decisions' known cost, USD.
        tokens: their input plus output tokens.
        verdict: ``regression``, ``no_regression`` or ``not_settled`` once set; ``None`` before.
        at: the counts when the verdict was set (``decisions``, ``pairs``, ``regressions``,
            ``improvements``, ``cost_usd``, ``tokens``), empty before.
    """

    decisions: int = 0
    pairs: int = 0
    regressions: int = 0
    improvements: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    verdict: str | None = None
    at: dict[str, float] = field(default_factory=dict)

    def counts(self) -> dict[str, float]:
        """The counts alone (what :attr:`at` keeps)."""
        out = asdict(self)
        del out["verdict"], out["at"]
        return out


class SettleStore(Protocol):
    """What the sequential gates need of a shared store."""

    def add(self, block: str, *, pair: str | None, cost_usd: float, tokens: int) -> Tally:
        """Count one decision of ``block`` (``pair``: ``regression``, ``improvement``, ``same`` or
        ``None`` when not paired) and return the totals with it.
        """

    def settle(self, block: str, verdict: str, at: Tally) -> Tally:
        """Set ``block``'s verdict with the counts ``at`` it was reached, unless one is set; return the
        block's tally (its first verdict).
        """

    def read(self, block: str) -> Tally:
        """The block's tally now."""

    def close(self) -> None:
        """Let the store's connection go."""


_SCHEMA = ("CREATE TABLE IF NOT EXISTS tally (block TEXT PRIMARY KEY, decisions INTEGER NOT NULL, "
           "pairs INTEGER NOT NULL, regressions INTEGER NOT NULL, improvements INTEGER NOT NULL, "
           "cost_usd REAL NOT NULL, tokens INTEGER NOT NULL, verdict TEXT, at TEXT)")

_SELECT = ("SELECT decisions, pairs, regressions, improvements, cost_usd, tokens, verdict, at FROM tally "
           "WHERE block = ?")


def _deltas(pair: str | None, cost_usd: float, tokens: int) -> tuple[int, int, int, int, float, int]:
    if pair not in (None, "regression", "improvement", "same"):
        raise ValueError(f"pair {pair!r}: regression, improvement, same or None")
    return (1, int(pair is not None), int(pair == "regression"), int(pair == "improvement"), float(cost_usd),
            int(tokens))


class SqliteSettleStore:
    """The tallies in one SQLite file, shared by the processes of one host (a run and its xdist workers).

    Args:
        path: the file (created with its table when absent).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
                conn.execute("PRAGMA synchronous=OFF")  # a run's scratch file: no fsync per decision
                conn.execute(_SCHEMA)
            except sqlite3.Error as exc:
                raise SettleStoreError(f"the sequential gates' state file {self.path}: {exc}") from None
            self._conn = conn
        return self._conn

    def _tx(self, block: str, update: Any) -> Tally:
        with self._lock:
            db = self._db()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    row = db.execute(_SELECT, (block,)).fetchone()
                    tally = _tally(row)
                    if update(tally):
                        db.execute("INSERT OR REPLACE INTO tally VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                   (block, tally.decisions, tally.pairs, tally.regressions, tally.improvements,
                                    tally.cost_usd, tally.tokens, tally.verdict,
                                    json.dumps(tally.at) if tally.at else None))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise SettleStoreError(f"the sequential gates' state file {self.path}: {exc}") from None
            return tally

    def add(self, block: str, *, pair: str | None, cost_usd: float, tokens: int) -> Tally:
        d = _deltas(pair, cost_usd, tokens)

        def update(t: Tally) -> bool:
            t.decisions += d[0]
            t.pairs += d[1]
            t.regressions += d[2]
            t.improvements += d[3]
            t.cost_usd += d[4]
            t.tokens += d[5]
            return True

        return self._tx(block, update)

    def settle(self, block: str, verdict: str, at: Tally) -> Tally:
        def update(t: Tally) -> bool:
            if t.verdict is not None:
                return False
            t.verdict, t.at = verdict, at.counts()
            return True

        return self._tx(block, update)

    def read(self, block: str) -> Tally:
        with self._lock:
            try:
                return _tally(self._db().execute(_SELECT, (block,)).fetchone())
            except sqlite3.Error as exc:
                raise SettleStoreError(f"the sequential gates' state file {self.path}: {exc}") from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _tally(row: Any) -> Tally:
    if row is None:
        return Tally()
    decisions, pairs, regressions, improvements, cost_usd, tokens, verdict, at = row
    return Tally(int(decisions), int(pairs), int(regressions), int(improvements), float(cost_usd), int(tokens),
                 verdict, json.loads(at) if at else {})


_ADD = """
local f = ARGV[1]
redis.call('HINCRBY', KEYS[1], f .. '|decisions', ARGV[2])
redis.call('HINCRBY', KEYS[1], f .. '|pairs', ARGV[3])
redis.call('HINCRBY', KEYS[1], f .. '|regressions', ARGV[4])
redis.call('HINCRBY', KEYS[1], f .. '|improvements', ARGV[5])
redis.call('HINCRBYFLOAT', KEYS[1], f .. '|cost_usd', ARGV[6])
redis.call('HINCRBY', KEYS[1], f .. '|tokens', ARGV[7])
redis.call('EXPIRE', KEYS[1], ARGV[8])
return redis.call('HMGET', KEYS[1], f .. '|decisions', f .. '|pairs', f .. '|regressions', f .. '|improvements',
                  f .. '|cost_usd', f .. '|tokens', f .. '|verdict', f .. '|at')
"""
_SETTLE = """
local f = ARGV[1]
if redis.call('HSETNX', KEYS[1], f .. '|verdict', ARGV[2]) == 1 then
  redis.call('HSET', KEYS[1], f .. '|at', ARGV[3])
end
return redis.call('HMGET', KEYS[1], f .. '|decisions', f .. '|pairs', f .. '|regressions', f .. '|improvements',
                  f .. '|cost_usd', f .. '|tokens', f .. '|verdict', f .. '|at')
"""


class RedisSettleStore:
    """The tallies in Redis: one store for every process on every host that names the same URL and key.

    Args:
        url: ``redis://HOST:PORT/DB[#NAME]`` (the run's ``tooleffect_rate_backend``).
        key: the run's settle key (``--tooleffect-settle-key``): every shard of one run gives the same,
            and no other run gives it.
    """

    def __init__(self, url: str, key: str) -> None:
        require("redis", "sequential gates shared through Redis (ini tooleffect_rate_backend)")
        import redis

        base, _, name = url.partition("#")
        self.shown = without_password(url)
        self.key = f"tooleffect:settle:{name or 'default'}:{key}"
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(base, socket_timeout=30, socket_connect_timeout=10)
        self._add = self._client.register_script(_ADD)
        self._settle = self._client.register_script(_SETTLE)

    def _run(self, script: Any, args: list[Any]) -> Tally:
        try:
            row = script(keys=[self.key], args=args)
        except self._errors as exc:
            raise SettleStoreError(f"the sequential gates' Redis {self.shown}: {type(exc).__name__}: {exc}") from None
        return _redis_tally(row)

    def add(self, block: str, *, pair: str | None, cost_usd: float, tokens: int) -> Tally:
        d = _deltas(pair, cost_usd, tokens)
        return self._run(self._add, [block, *d[:4], repr(d[4]), d[5], REDIS_TTL_S])

    def settle(self, block: str, verdict: str, at: Tally) -> Tally:
        return self._run(self._settle, [block, verdict, json.dumps(at.counts())])

    def read(self, block: str) -> Tally:
        try:
            fields = ("decisions", "pairs", "regressions", "improvements", "cost_usd", "tokens", "verdict", "at")
            row = self._client.hmget(self.key, [f"{block}|{f}" for f in fields])
        except self._errors as exc:
            raise SettleStoreError(f"the sequential gates' Redis {self.shown}: {type(exc).__name__}: {exc}") from None
        return _redis_tally(row)

    @property
    def client(self) -> Any:
        """The ``redis.Redis`` client (the run's claim of its key is written with it: :mod:`.settle_claim`)."""
        return self._client

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """What the client raises when Redis fails."""
        return self._errors

    def close(self) -> None:
        self._client.close()


def _redis_tally(row: Any) -> Tally:
    def text(v: Any) -> str | None:
        return None if v is None else v.decode() if isinstance(v, bytes) else str(v)

    vals = [text(v) for v in row]
    return Tally(int(vals[0] or 0), int(vals[1] or 0), int(vals[2] or 0), int(vals[3] or 0), float(vals[4] or 0.0),
                 int(vals[5] or 0), vals[6], json.loads(vals[7]) if vals[7] else {})
