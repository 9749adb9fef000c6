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

Across hosts (shards on several machines, pods) the same algorithm runs in Redis
(:class:`RedisRateLimit`, ini ``tooleffect_rate_backend = redis://HOST:PORT/DB``): one Lua script
per admission and per settlement, which Redis runs atomically, with the Redis server's clock
(``TIME``) as the one clock of every client.  No limiter library was used: the Redis limiters on
the registry (``limits``' moving window, ``pyrate-limiter``, ``throttled-py``,
``redis-rate-limiters``) admit a fixed cost per hit and cannot move a request's arrival or
replace its token estimate once the answer is back, which is what keeps the window honest here.

A run without a shared file keeps its limiter in a private folder it removes at its end
(:func:`private_state_dir`); the folders of runs killed outright are removed by the next run.

A limiter whose backend fails (Redis unreachable or gone mid-run, a state file SQLite cannot use)
raises :class:`RateLimiterError`: the decision it was admitting is an error of the rate limiter's,
never a provider's.  What can be checked before a run starts is checked at configure time
(:func:`redis_url_problem`, :func:`state_file_problem`): a usage error, not a failure per decision.

Example::

    limit = RateLimit(Path("/tmp/run/limiter.sqlite"), rpm=500, tpm=200_000)
    slot, wait_s = limit.try_acquire(tokens=1_200, flight_s=61)  # (row id, 0.0) or (None, seconds to wait)
    ...                                                             # the call, bounded by 61 s
    limit.settle(slot, tokens=1_350)                                # it ended; the usage it reported
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Protocol

from pytest_tooleffect.util.exceptions import described, exception_text
from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.processes import is_running
from pytest_tooleffect.util.urls import without_password

__all__ = ["PRIVATE_PREFIX", "SQLITE_HEADER", "Limiter", "RateLimit", "RateLimitTooSmall", "RateLimiterError",
           "RedisRateLimit", "private_state_dir", "redis_url_problem", "state_file_problem"]

#: the name of a run's private limiter folder in the temporary folder: this prefix, the pid of the
#: process that made it, ``-`` and mkdtemp's random part
PRIVATE_PREFIX = "tooleffect-rate-"
#: the whole name of such a folder: the prefix, the pid, ``-`` and mkdtemp's 8 random characters
_PRIVATE_NAME = re.compile(re.escape(PRIVATE_PREFIX) + r"([0-9]{1,10})-[a-z0-9_]{8}")


def private_state_dir() -> Path:
    """A new folder for one run's limiter file (``<tmp>/tooleffect-rate-<pid>-<random>``), made
    after removing the ones that runs now gone left behind.

    The run removes its folder at its end; a run killed outright (SIGKILL, OOM) cannot, so the
    next run does: a folder of this user whose process (the pid in its name) is not running.
    Folders of running processes, of other users, links, files, and names that are not exactly
    ``tooleffect-rate-<pid>-`` with mkdtemp's 8 random characters are left alone.

    Returns:
        The new, empty folder.

    Raises:
        OSError: the temporary folder cannot hold a new folder.
    """
    root = Path(tempfile.gettempdir())
    uid = os.getuid() if hasattr(os, "getuid") else None
    for old in root.glob(PRIVATE_PREFIX + "*"):
        named = _PRIVATE_NAME.fullmatch(old.name)  # ASCII digits, then mkdtemp's 8 characters: nothing else
        pid = int(named[1]) if named else 0
        if pid <= 0:
            continue
        try:
            info = old.lstat()  # a symbolic link is never followed, so never removed through
        except OSError:
            continue
        mine = uid is None or info.st_uid == uid
        if mine and stat.S_ISDIR(info.st_mode) and not is_running(pid):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-"))

#: the first 16 bytes of every SQLite database file
SQLITE_HEADER = b"SQLite format 3\x00"
_TABLE = "admitted"
_COLUMNS = ("id", "t", "tokens", "done")
_SCHEMA = ("CREATE TABLE IF NOT EXISTS admitted (id INTEGER PRIMARY KEY, t REAL NOT NULL, tokens INTEGER NOT NULL, "
           "done INTEGER NOT NULL)")


class Limiter(Protocol):
    """What a model turn needs of a run-wide limit: :class:`RateLimit` (SQLite) or :class:`RedisRateLimit`."""

    def try_acquire(self, tokens: int = 0, flight_s: float = 0.0, now: float | None = None
                    ) -> tuple[int | None, float]: ...

    def settle(self, slot: int, tokens: int | None = None, now: float | None = None) -> None: ...

    def close(self) -> None: ...


class RateLimitTooSmall(ValueError):
    """A single request needs more tokens than the limit allows in a whole window."""


class RateLimiterError(Exception):
    """The rate limiter's backend failed (Redis could not be reached or answered an error, SQLite
    could not use the state file): no request could be admitted, so none was made.

    Args:
        message: one line naming the backend (a URL without its password, or the state file) and
            what failed.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _one_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line, at most 300 characters."""
    return described(exc, 300) if exception_text(exc).strip() else f"{type(exc).__name__}: no message"


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
            try:
                conn.execute(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _failed(self, exc: BaseException) -> RateLimiterError:
        return RateLimiterError(f"the rate limiter's state file {self.path}: {_one_line(exc)}")

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
            RateLimiterError: SQLite cannot use the state file.
        """
        if self.tpm is not None and tokens > self.tpm:
            raise RateLimitTooSmall(f"the request's estimated {tokens} tokens exceed the limit of {self.tpm} "
                                    f"tokens per {self.window_s:g} s")
        try:
            return self._try_acquire(tokens, flight_s, now)
        except (sqlite3.Error, OSError) as exc:
            raise self._failed(exc) from None

    def _try_acquire(self, tokens: int, flight_s: float, now: float | None) -> tuple[int | None, float]:
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
                if db.in_transaction:
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

        Raises:
            RateLimiterError: SQLite cannot use the state file.
        """
        t = time.monotonic() if now is None else now
        try:
            with self._lock:
                self._db().execute("UPDATE admitted SET t = MIN(t, ?), done = 1, tokens = COALESCE(?, tokens) "
                                   "WHERE id = ?", (t, None if tokens is None else int(tokens), slot))
        except (sqlite3.Error, OSError) as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        """Close this process's connection (the state file stays for the other processes)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# KEYS[1]: the hash of admitted requests (id -> "t tokens done"), KEYS[2]: the id counter.
# ARGV: rpm (-1: none), tpm (-1: none), window_s, tokens, flight_s.  The same rule as RateLimit.
_ACQUIRE = """
local rpm, tpm, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens, flight = tonumber(ARGV[4]), tonumber(ARGV[5])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
local all = redis.call('HGETALL', KEYS[1])
local rows = {}
for i = 1, #all, 2 do
  local t, spent, done = string.match(all[i + 1], '^(%S+) (%S+) (%S+)$')
  t, spent, done = tonumber(t), tonumber(spent), tonumber(done)
  if t <= now - window then
    redis.call('HDEL', KEYS[1], all[i])
  else
    if done == 0 and t > now then t = now end
    rows[#rows + 1] = {t, spent}
  end
end
table.sort(rows, function(a, b) if a[1] == b[1] then return a[2] < b[2] end return a[1] < b[1] end)
local wait = 0
if rpm >= 0 and #rows >= rpm then
  wait = math.max(wait, rows[#rows - rpm + 1][1] + window - now)
end
if tpm >= 0 then
  local total = 0
  for _, r in ipairs(rows) do total = total + r[2] end
  for _, r in ipairs(rows) do
    if total + tokens <= tpm then break end
    total = total - r[2]
    wait = math.max(wait, r[1] + window - now)
  end
end
if wait > 0 then return {0, tostring(wait + 1e-6)} end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], id, string.format('%.6f %d 0', now + flight, tokens))
redis.call('PEXPIRE', KEYS[1], math.ceil((window + flight) * 1000) + 1000)
redis.call('PEXPIRE', KEYS[2], math.ceil((window + flight) * 1000) + 1000)
return {id, '0'}
"""

# KEYS[1]: the hash; ARGV: id, tokens ('' keeps the estimate).
_SETTLE = """
local row = redis.call('HGET', KEYS[1], ARGV[1])
if not row then return 0 end
local t, spent = string.match(row, '^(%S+) (%S+) %S+$')
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
t = math.min(tonumber(t), now)
if ARGV[2] ~= '' then spent = ARGV[2] end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.6f %d 1', t, tonumber(spent)))
return 1
"""


class RedisRateLimit:
    """The run-wide limit of :class:`RateLimit` kept in Redis: one limit for every process on
    every host that names the same URL (shards, pods, xdist workers).

    The state is a hash of admitted requests under ``tooleffect:rate:NAME`` (``NAME`` from the
    URL's fragment, ``default`` without one), each ``t tokens done``, expiring a window after
    its last use; the admission rule is :class:`RateLimit`'s, run as a Lua script so the check
    and the insert are one atomic step, on the Redis server's clock.

    Args:
        url: ``redis://HOST:PORT/DB[#NAME]`` (``rediss://``, ``unix://`` too), as redis-py's
            ``Redis.from_url`` reads it.
        rpm: requests per window, or ``None``.
        tpm: tokens per window, or ``None``.
        window_s: the window in seconds.

    Raises:
        ValueError: a limit below 1, or a window that is not positive.
    """

    def __init__(self, url: str, rpm: int | None = None, tpm: int | None = None, window_s: float = 60.0) -> None:
        if (rpm is not None and rpm < 1) or (tpm is not None and tpm < 1):
            raise ValueError("rate limits are whole numbers >= 1")
        if not window_s > 0:
            raise ValueError("the rate window must be positive")
        require("redis", "a rate limit kept in Redis (ini tooleffect_rate_backend)")
        import redis

        base, _, name = url.partition("#")
        self.url = base
        self.shown = without_password(url)
        self.rpm, self.tpm, self.window_s = rpm, tpm, float(window_s)
        self.key = f"tooleffect:rate:{name or 'default'}"
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(base, socket_timeout=30, socket_connect_timeout=10)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._settle = self._client.register_script(_SETTLE)

    def _failed(self, exc: BaseException) -> RateLimiterError:
        return RateLimiterError(f"the rate limiter's Redis at {self.shown}: {_one_line(exc)}")

    def try_acquire(self, tokens: int = 0, flight_s: float = 0.0, now: float | None = None
                    ) -> tuple[int | None, float]:
        """Admit one request now, or say how long to wait (as :meth:`RateLimit.try_acquire`).

        ``now`` is not used: the Redis server's clock is the one clock of all hosts.

        Raises:
            RateLimitTooSmall: ``tokens`` exceeds ``tpm``.
            RateLimiterError: the server cannot be reached, or answered an error (no request was admitted).
        """
        if self.tpm is not None and tokens > self.tpm:
            raise RateLimitTooSmall(f"the request's estimated {tokens} tokens exceed the limit of {self.tpm} "
                                    f"tokens per {self.window_s:g} s")
        try:
            slot, wait = self._acquire(keys=[self.key, self.key + ":id"],
                                       args=[-1 if self.rpm is None else self.rpm,
                                             -1 if self.tpm is None else self.tpm,
                                             self.window_s, int(tokens), float(flight_s)])
            return (int(slot), 0.0) if int(slot) else (None, float(wait))
        except self._errors as exc:
            raise self._failed(exc) from None
        except (TypeError, ValueError) as exc:  # an answer that is not the script's (another program's key)
            raise self._failed(exc) from None

    def settle(self, slot: int, tokens: int | None = None, now: float | None = None) -> None:
        """Close a request: it ended now; replace its estimate with the tokens it used, when known.

        Raises:
            RateLimiterError: the server cannot be reached, or answered an error.
        """
        try:
            self._settle(keys=[self.key], args=[slot, "" if tokens is None else int(tokens)])
        except self._errors as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        """Close this process's connections (the state stays in Redis for the others)."""
        self._client.close()


def redis_url_problem(url: str) -> str | None:
    """What is wrong with a rate-limit URL before any connection is tried, or ``None``.

    ``redis://`` and ``rediss://`` need a host, a port (when given) in 1…65535 and a database
    (when given) that is a whole number; ``unix://`` needs a socket path.  What redis-py itself
    refuses (its query parameters) is refused too.  redis-py alone would accept ``/abc`` as
    database 0 and a missing host as ``localhost``, so a typo would limit another database or host.

    Args:
        url: ``redis://HOST:PORT/DB[#NAME]``, ``rediss://…`` or ``unix://PATH[?db=DB][#NAME]``.

    Returns:
        One line (never the URL's password), or ``None`` for a URL the limiter can use.
    """
    from urllib.parse import urlsplit

    base, _, _name = url.partition("#")
    try:
        parts = urlsplit(base)
        port = parts.port
    except ValueError as exc:  # an unclosed [ of an IPv6 host, a port that is no number or out of range
        return f"not a URL redis can use ({exc})"
    if parts.scheme in ("redis", "rediss"):
        if not parts.hostname:
            return "no host (redis://HOST:PORT/DB)"
        if port is not None and not 1 <= port <= 65535:
            return f"port {port} is not in 1-65535"
        db = parts.path.strip("/")
        if db and not (db.isascii() and db.isdigit()):
            return f"the database {parts.path!r} is not a whole number (redis://HOST:PORT/0)"
    elif parts.scheme == "unix":
        if not parts.path:
            return "no socket path (unix:///PATH/TO/redis.sock)"
    else:
        return "not a redis://, rediss:// or unix:// URL"
    require("redis", "a rate limit kept in Redis (ini tooleffect_rate_backend)")
    import redis

    try:
        redis.Redis.from_url(base).close()  # reads the URL and its query; connects to nothing
    except (ValueError, TypeError) as exc:
        return " ".join(exception_text(exc).split())[:200] or type(exc).__name__
    return None


def state_file_problem(path: Path) -> str | None:
    """What keeps ``path`` from being a limiter state file, or ``None``.

    A state file is a regular file that is empty or a SQLite database holding the limiter's table
    alone (a missing file is created, in a folder that can be made).  A folder, a device such as
    ``/dev/null``, a FIFO, a file that is not SQLite (a YAML file) or another program's database
    is refused: SQLite would fail on each decision, or (``/dev/null``) wait on a lock it never gets.

    Args:
        path: the file ``tooleffect_rate_file`` names.

    Returns:
        One line, or ``None`` for a path the limiter can use.
    """
    try:
        info = path.stat()  # a link is followed: what it points to is what SQLite opens
    except FileNotFoundError:
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    return f"{parent} is not a folder"
                return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot create files in {parent}"
        return None
    except OSError as exc:
        return _one_line(exc)
    if stat.S_ISDIR(info.st_mode):
        return "a folder, not a file"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a device, a FIFO or a socket)"
    if not os.access(path, os.R_OK | os.W_OK):
        return "not readable and writable by this user"
    if info.st_size == 0:
        return None
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        return _one_line(exc)
    if head != SQLITE_HEADER:
        return "not a SQLite database (the limiter's state file is one, created when missing)"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        try:
            tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({_TABLE})"))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return f"an unreadable SQLite database ({_one_line(exc)})"
    if tables and (tables != [_TABLE] or columns != _COLUMNS):
        return f"a SQLite database of something else (tables: {', '.join(tables)[:200]}), not the limiter's"
    return None
