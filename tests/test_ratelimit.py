"""The run-wide rate limit: the sliding window, token reconciliation, and sharing across processes."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from pytest_tooleffect.decide.ratelimit import (
    PRIVATE_PREFIX,
    RateLimit,
    RateLimiterError,
    RateLimitTooSmall,
    private_state_dir,
    state_file_problem,
)
from pytest_tooleffect.options import INI_RATE_FILE, OPT_API_BASE, OPT_MODEL, OPT_RPM


def _max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for u in times if t <= u < t + window) for t in times)


def _call(limit: RateLimit, now: float, tokens: int = 0) -> int | None:
    """One request admitted at ``now`` and answered at once (settled at ``now``)."""
    slot, _ = limit.try_acquire(tokens, now=now)
    if slot is not None:
        limit.settle(slot, now=now)
    return slot


def test_requests_per_window_and_the_wait_it_names(tmp_path: Path) -> None:
    limit = RateLimit(tmp_path / "s.sqlite", rpm=3, window_s=10.0)
    assert [_call(limit, t) is not None for t in (0.0, 1.0, 2.0)] == [True, True, True]
    slot, wait = limit.try_acquire(now=3.0)
    assert slot is None and wait == pytest.approx(7.0, abs=1e-3)  # the request at 0 leaves the window at 10
    assert limit.try_acquire(now=9.9)[0] is None
    assert _call(limit, 10.0) is not None
    slot, wait = limit.try_acquire(now=10.5)
    assert slot is None and wait == pytest.approx(0.5, abs=1e-3)  # next to leave: the request at 1


def test_a_request_in_flight_counts_until_it_ends(tmp_path: Path) -> None:
    """The provider may see a request as late as its answer: it stays in the window till then."""
    limit = RateLimit(tmp_path / "s.sqlite", rpm=1, window_s=1.0)
    slot, _ = limit.try_acquire(flight_s=5.0, now=0.0)
    assert slot is not None
    assert limit.try_acquire(now=3.0) == (None, pytest.approx(1.0, abs=1e-3))  # ends no sooner than now
    limit.settle(slot, now=3.5)
    assert limit.try_acquire(now=4.0) == (None, pytest.approx(0.5, abs=1e-3))
    assert limit.try_acquire(now=4.5)[0] is not None
    limit2 = RateLimit(tmp_path / "t.sqlite", rpm=1, window_s=1.0)
    assert limit2.try_acquire(flight_s=5.0, now=0.0)[0] is not None  # never settled (a crashed worker)
    assert limit2.try_acquire(now=5.9)[0] is None
    assert limit2.try_acquire(now=6.0)[0] is not None  # it expires a window after its bound


def test_tokens_are_estimated_then_settled(tmp_path: Path) -> None:
    limit = RateLimit(tmp_path / "s.sqlite", tpm=100, window_s=10.0)
    first, _ = limit.try_acquire(40, now=0.0)
    assert first is not None and _call(limit, 1.0, 40) is not None
    limit.settle(first, now=0.0)
    slot, wait = limit.try_acquire(40, now=2.0)
    assert slot is None and wait == pytest.approx(8.0, abs=1e-3)  # 40 + 40 + 40 > 100 until the first leaves
    limit.settle(first, 10, now=0.0)  # the first request really used 10 tokens
    assert limit.try_acquire(40, now=2.0)[0] is not None  # 10 + 40 + 40 <= 100
    with pytest.raises(RateLimitTooSmall, match="exceed the limit of 100 tokens per 10 s"):
        limit.try_acquire(101, now=3.0)


def test_both_limits_wait_for_the_later_of_the_two(tmp_path: Path) -> None:
    limit = RateLimit(tmp_path / "s.sqlite", rpm=2, tpm=100, window_s=10.0)
    assert _call(limit, 0.0, 90) is not None  # tokens full until 10
    slot, wait = limit.try_acquire(20, now=1.0)
    assert slot is None and wait == pytest.approx(9.0, abs=1e-3)
    assert _call(limit, 2.0, 5) is not None
    slot, wait = limit.try_acquire(5, now=3.0)  # two requests in the window: the rpm limit binds
    assert slot is None and wait == pytest.approx(7.0, abs=1e-3)


@pytest.mark.parametrize("kwargs", [{"rpm": 0}, {"tpm": -1}, {"rpm": 1, "window_s": 0.0}])
def test_invalid_limits_are_refused(tmp_path: Path, kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RateLimit(tmp_path / "s.sqlite", **kwargs)  # type: ignore[arg-type]


def _hammer(path: str, n: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    limit = RateLimit(Path(path), rpm=4, window_s=0.5)
    admitted = []
    while len(admitted) < n:
        slot, wait = limit.try_acquire(flight_s=1.0)
        if slot is None:
            time.sleep(wait)
        else:
            admitted.append(time.monotonic())
            limit.settle(slot)
    out.put(admitted)


def test_the_limit_holds_over_processes(tmp_path: Path) -> None:
    """Three processes, six requests each, 4 per 0.5 s in all: never more than 4 in any 0.5 s."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path / "s.sqlite"), 6, out)) for _ in range(3)]
    for p in procs:
        p.start()
    times = [t for _ in procs for t in out.get(timeout=60)]
    for p in procs:
        p.join(timeout=10)
    assert len(times) == 18
    # each time is read just after admission, a little late: allow the lateness of a loaded machine
    assert _max_in_window(times, 0.5 - 0.1) <= 4
    assert max(times) - min(times) >= 2.0  # 18 requests at 4 per window need four more windows


def test_a_new_private_folder_removes_only_what_ended_runs_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder named for a pid that is not running goes; one of a running process, ones named
    otherwise (even with digits), a file with the prefix, and a link named for an ended run (and
    what it points to) stay."""
    import os
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    dead = tmp_path / f"{PRIVATE_PREFIX}{ended.stdout.strip()}-abc_1234"
    alive = tmp_path / f"{PRIVATE_PREFIX}{os.getppid()}-def_1234"
    other = tmp_path / f"{PRIVATE_PREFIX}notapid-ghi_1234"
    a_file = tmp_path / f"{PRIVATE_PREFIX}1-jkl_1234"
    # named like a run's folder but not as mkdtemp names one: a user's own folder, digits that
    # int() would read (or refuse), pid 0, no random part
    not_ours = [tmp_path / f"{PRIVATE_PREFIX}{name}" for name in (
        f"{ended.stdout.strip()}-shared", "\u00b2-abcdefgh", "\u0661\u0662\u0663\u0664\u0665-abcdefgh",
        "0-abcdefgh", ended.stdout.strip())]
    for d in (dead, alive, other, *not_ours):
        d.mkdir()
        (d / "limiter.sqlite").write_text("x")
    a_file.write_text("x")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "data").write_text("x")
    link = tmp_path / f"{PRIVATE_PREFIX}{ended.stdout.strip()}-lnk_1234"  # a link named for an ended run
    link.symlink_to(kept, target_is_directory=True)
    new = private_state_dir()
    assert new.is_dir() and new.parent == tmp_path and new.name.startswith(f"{PRIVATE_PREFIX}{os.getpid()}-")
    assert not dead.exists()
    assert alive.is_dir() and other.is_dir() and a_file.is_file()
    assert all((d / "limiter.sqlite").is_file() for d in not_ours)
    assert link.is_symlink() and (kept / "data").is_file()


def _not_a_state_file(tmp_path: Path, kind: str) -> str:
    """A ``tooleffect_rate_file`` value that names no limiter state file, made under ``tmp_path``."""
    if kind == "folder":
        (tmp_path / "state").mkdir()
        return "state"
    if kind == "yaml":
        (tmp_path / "limits.yaml").write_text("rpm: 500\ntpm: 200000\n")
        return "limits.yaml"
    if kind == "other database":
        import sqlite3

        conn = sqlite3.connect(tmp_path / "app.db")
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.commit()
        conn.close()
        return "app.db"
    if kind == "under a file":
        (tmp_path / "notes.txt").write_text("x")
        return "notes.txt/limit.db"
    assert kind == "/dev/null"
    return "/dev/null"


@pytest.mark.parametrize("kind", ["folder", "yaml", "/dev/null", "other database", "under a file"])
def test_a_rate_file_that_is_no_state_file_is_a_usage_error_at_configure(pytester: pytest.Pytester, kind: str) -> None:
    """A folder, a YAML file, /dev/null, another program's SQLite database, a path under a file: each
    refused before any item runs, naming the ini key and the value (not a sqlite3 traceback per
    decision, and for /dev/null not a first decision stuck on a lock for 100 s).
    """
    value = _not_a_state_file(pytester.path, kind)
    (pytester.path / "test_nothing.py").write_text("def test_x():\n    pass\n")
    started = time.monotonic()
    result = pytester.runpytest("-o", f"{INI_RATE_FILE}={value}", f"{OPT_MODEL}=openai/local-test",
                                f"{OPT_API_BASE}=http://127.0.0.1:9/v1", f"{OPT_RPM}=10")
    assert time.monotonic() - started < 30
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert f"ini {INI_RATE_FILE} = {value} " in err, err
    assert "INTERNALERROR" not in result.stdout.str() + err and "sqlite3." not in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1  # one line
    if kind == "other database":
        assert "users" in err  # whose tables they are


def test_what_a_state_file_may_be(tmp_path: Path) -> None:
    """A missing file in a folder that can be made, an empty file, and the limiter's own database are state files."""
    assert state_file_problem(tmp_path / "new" / "deeper" / "limit.db") is None
    (tmp_path / "empty.db").touch()
    assert state_file_problem(tmp_path / "empty.db") is None
    used = RateLimit(tmp_path / "used.db", rpm=2)
    assert used.try_acquire()[0] is not None
    used.close()
    assert state_file_problem(tmp_path / "used.db") is None
    (tmp_path / "link.db").symlink_to(tmp_path / "used.db")
    assert state_file_problem(tmp_path / "link.db") is None
    assert state_file_problem(Path("/dev/null")) == "not a regular file (a device, a FIFO or a socket)"


def test_a_state_file_sqlite_cannot_use_is_the_rate_limiters_error(tmp_path: Path) -> None:
    """At run time (the file replaced after configure), SQLite's failure is a RateLimiterError naming the file."""
    (tmp_path / "gone").mkdir()
    limit = RateLimit(tmp_path / "gone", rpm=2)
    with pytest.raises(RateLimiterError, match=r"^the rate limiter's state file .*gone: OperationalError: ") as info:
        limit.try_acquire()
    assert "\n" not in info.value.message
    path = tmp_path / "s.sqlite"
    limit = RateLimit(path, rpm=2)
    slot, _ = limit.try_acquire()
    assert slot is not None
    limit.close()
    path.unlink()
    path.write_text("rpm: 500\n" * 100)  # another program wrote over it
    with pytest.raises(RateLimiterError, match="DatabaseError: file is not a database"):
        limit.settle(slot)
