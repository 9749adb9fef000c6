"""A run-wide rate limit on model requests and tokens, shared by every process of a run.

Providers limit requests per minute (RPM) and tokens per minute (TPM) per account, so under
``pytest -n W`` the limit must hold for the sum over the workers, not for each one.  The
limiter is a **sliding-window log** kept in one SQLite file that the controller creates and
hands to the workers (``workerinput``): each admitted request is a row ``(t, tokens)``, and a
request is admitted at time ``now`` only when the rows that may fall in the last ``window_s``
seconds, with it, stay within both limits.  SQLite's own file locking (``BEGIN IMMEDIATE``)
makes the check and the insert one atomic step across processes, so no lock file or service
is needed.

The provider counts a request when it *arrives*, some time after admission (the client may
still be connecting).  So a row's ``t`` is the latest time the request can have arrived: while
it is in flight, admission plus the call's wall-clock bound (``flight_s``); once the answer is
back, the moment it came (:meth:`RateLimit.settle`).  A row leaves the window ``window_s`` after
its ``t``.  With arrivals counted that way, no window of ``window_s`` seconds at the provider
can hold more than the limit: the last request admitted into such a window saw every other one
still inside its own.

A sliding window, not a token bucket: a bucket of capacity ``rpm`` refilled at ``rpm / 60``
per second admits up to twice ``rpm`` in some 60-second windows, which a provider counting
per minute would reject.

Tokens are estimated before the call (the request's input tokens) and the row is corrected to
the provider's reported usage afterwards (:meth:`RateLimit.settle`), so later admissions count
what was really spent.  Times are ``time.monotonic()`` readings, which on Linux, macOS and
Windows are one clock for every process of the machine.

Example::

    limit = RateLimit(Path("/tmp/run/limiter.sqlite"), rpm=500, tpm=200_000)
    slot, wait_s = limit.try_acquire(tokens=1_200, flight_s=61)  # (row id, 0.0) or (None, seconds to wait)
    ...                                                             # the call, bounded by 61 s
    limit.settle(slot, tokens=1_350)                                # it ended; the usage it reported
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["RateLimit", "RateLimitTooSmall"]

_SCHEMA = ("CREATE TABLE IF NOT EXISTS admitted (id INTEGER PRIMARY KEY, t REAL NOT NULL, tokens INTEGER NOT NULL, "
           "done INTEGER NOT NULL)")


class RateLimitTooSmall(ValueError):
    """A single request needs more tokens than the limit allows in a whole window."""


class RateLimit:
    """Requests and tokens admitted in any ``window_s`` seconds, counted over all processes that
    open the same ``path``.

    Args:
        path: the SQLite state file (created when missing; its folder must exist).
        rpm: requests per window, or ``None`` for no request limit.
        tpm: tokens per window, or ``None`` for no token limit.
        window_s: the window in seconds (60 for per-minute limits; a shorter one scales a limit
            down, e.g. for tests).

    Raises:
        ValueError: a limit below 1, or a window that is not positive.
    """

    def __init__(self, path: Path, rpm: int | None = None, tpm: int | None = None, window_s: float = 60.0) -> None:
        if (rpm is not None and rpm < 1) or (tpm is not None and tpm < 1):
            raise ValueError("rate limits are whole numbers >= 1")
        if not window_s > 0:
            raise ValueError("the rate window must be positive")
        self.path = Path(path)
        self.rpm = rpm
        self.tpm = tpm
        self.window_s = float(window_s)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            conn.execute(_SCHEMA)
            self._conn = conn
        return self._conn

    def try_acquire(self, tokens: int = 0, flight_s: float = 0.0, now: float | None = None
                    ) -> tuple[int | None, float]:
        """Admit one request of ``tokens`` (estimated) tokens now, or say how long to wait.

        Args:
            tokens: the request's estimated tokens (counted against ``tpm``).
            flight_s: seconds the request may take at most (its arrival at the provider is
                counted as late as that until :meth:`settle` says when it ended).
            now: a ``time.monotonic()`` reading (default: read the clock).

        Returns:
            ``(slot, 0.0)`` when admitted (``slot`` identifies the row for :meth:`settle`), else
            ``(None, seconds)``: the earliest time, from now, at which the request could fit
            (a lower bound while requests are in flight: ask again then).

        Raises:
            RateLimitTooSmall: ``tokens`` exceeds ``tpm``: no window can ever admit it.
        """
        if self.tpm is not None and tokens > self.tpm:
            raise RateLimitTooSmall(f"the request's estimated {tokens} tokens exceed the limit of {self.tpm} "
                                    f"tokens per {self.window_s:g} s")
        with self._lock:
            db = self._db()
            db.execute("BEGIN IMMEDIATE")  # one writer at a time across processes
            try:
                t = time.monotonic() if now is None else now
                db.execute("DELETE FROM admitted WHERE t <= ?", (t - self.window_s,))
                # the earliest each row can leave: a request in flight ends no sooner than now
                rows = sorted((min(r_t, t) if not done else r_t, spent)
                              for r_t, spent, done in db.execute("SELECT t, tokens, done FROM admitted"))
                wait = self._wait(rows, tokens, t)
                if wait > 0:
                    db.execute("COMMIT")
                    return None, wait
                cur = db.execute("INSERT INTO admitted (t, tokens, done) VALUES (?, ?, 0)", (t + flight_s, tokens))
                db.execute("COMMIT")
                return cur.lastrowid, 0.0
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _wait(self, rows: list[tuple[float, int]], tokens: int, now: float) -> float:
        """Seconds until ``rows`` (``(t, tokens)``, oldest first) leave room for one more."""
        wait = 0.0
        if self.rpm is not None and len(rows) >= self.rpm:
            # the oldest len - rpm + 1 rows must leave the window
            wait = max(wait, rows[len(rows) - self.rpm][0] + self.window_s - now)
        if self.tpm is not None:
            total = sum(r[1] for r in rows)
            for t, spent in rows:
                if total + tokens <= self.tpm:
                    break
                total -= spent
                wait = max(wait, t + self.window_s - now)
        return max(wait, 0.0) + (1e-6 if wait > 0 else 0.0)

    def settle(self, slot: int, tokens: int | None = None, now: float | None = None) -> None:
        """Close a request: it ended now (answer or failure); replace its estimated tokens with
        the tokens it really used, when known.

        Args:
            slot: the id :meth:`try_acquire` returned.
            tokens: input plus output tokens the provider reported (``None``: keep the estimate).
            now: a ``time.monotonic()`` reading (default: read the clock).
        """
        t = time.monotonic() if now is None else now
        with self._lock:
            self._db().execute("UPDATE admitted SET t = MIN(t, ?), done = 1, tokens = COALESCE(?, tokens) WHERE id = ?",
                               (t, None if tokens is None else int(tokens), slot))

    def close(self) -> None:
        """Close this process's connection (the state file stays for the other processes)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
