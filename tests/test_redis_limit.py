"""The run-wide rate limit in Redis (``tooleffect_rate_backend = redis://…``): one limit over
processes, shards and their xdist workers, against a real ``redis-server`` (Debian's package,
installed by ``scripts/ensure-redis``) started here on a free loopback port.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_tooleffect.decide.ratelimit import RateLimiterError, RateLimitTooSmall, RedisRateLimit, redis_url_problem
from pytest_tooleffect.options import (
    INI_RATE_BACKEND,
    INI_RATE_WINDOW,
    OPT_API_BASE,
    OPT_CONCURRENCY,
    OPT_MODEL,
    OPT_RECORDS,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_RPM,
    OPT_SHARD,
    OPT_TPM,
)
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.demo_family import FAMILY, RULES

NULL = {"tool": None}


def _case(cid: str) -> dict[str, object]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": {"valid_actions": [NULL]},
            "recorded": {"tool_calls": []}, "source": "authored"}


def _family(root: Path, cases: list[dict[str, object]]) -> None:
    (root / "cases" / "demo").mkdir(parents=True)
    (root / "oracle").mkdir()
    (root / "cases" / "demo" / "family.yaml").write_text(FAMILY)
    (root / "oracle" / "demo.yaml").write_text(RULES)
    (root / "cases" / "demo" / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(work: Path, password: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server of its own on a free port of 127.0.0.1 (no persistence), answering; and its URL
    (``redis://:PASSWORD@…`` when it demands ``password``, ``requirepass``).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run scripts/ensure-redis (Debian's redis-server package)")
    port = _free_port()
    auth = ["--requirepass", password] if password is not None else []
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             *auth, "--dir", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=password)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        else:
            proc.kill()
            pytest.fail("redis-server did not answer on its port")
    finally:
        client.close()
    return proc, f"redis://{f':{password}@' if password is not None else ''}127.0.0.1:{port}/0"


def _max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for u in times if t <= u < t + window) for t in times)


def test_requests_and_tokens_are_limited_and_settled(redis_url: str) -> None:
    limit = RedisRateLimit(redis_url + "#unit", rpm=2, tpm=1000, window_s=30.0)
    a, _ = limit.try_acquire(tokens=600, flight_s=5)
    assert a is not None
    slot, wait = limit.try_acquire(tokens=600, flight_s=5)
    assert slot is None and 0 < wait <= 30 + 5  # 1200 tokens would exceed 1000
    limit.settle(a, tokens=100)  # the answer came back: it used 100, not 600
    b, _ = limit.try_acquire(tokens=600, flight_s=5)
    assert b is not None  # 100 + 600 fit
    slot, wait = limit.try_acquire(tokens=1, flight_s=5)
    assert slot is None and 25 < wait <= 30.1  # the request limit (2 per window) holds now
    with pytest.raises(RateLimitTooSmall):
        limit.try_acquire(tokens=1001)
    other = RedisRateLimit(redis_url + "#another", rpm=2, window_s=30.0)
    assert other.try_acquire()[0] is not None  # a limit of another name is apart
    limit.close()
    other.close()


def _hammer(url: str, n: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    limit = RedisRateLimit(url, rpm=4, window_s=0.5)
    admitted: list[float] = []
    while len(admitted) < n:
        slot, wait = limit.try_acquire(flight_s=1.0)
        if slot is None:
            time.sleep(wait)
        else:
            admitted.append(time.time())
            limit.settle(slot)
    out.put(admitted)


def test_the_limit_holds_over_processes(redis_url: str) -> None:
    """Three processes, six requests each, 4 per 0.5 s in all: never more than 4 in any 0.5 s."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(redis_url + "#procs", 6, out)) for _ in range(3)]
    for p in procs:
        p.start()
    times = [t for _ in procs for t in out.get(timeout=60)]
    for p in procs:
        p.join(timeout=10)
    assert len(times) == 18
    assert _max_in_window(times, 0.5 - 0.1) <= 4
    assert max(times) - min(times) >= 2.0


def test_two_shards_with_workers_share_one_limit(redis_url: str, pytester: pytest.Pytester) -> None:
    """Two shards of one run, started at once, one under -n 2, at 4 requests per 1.5 s through Redis:
    the server's arrival log never holds more than 4 in any window, and each shard's turns waited.
    """
    window = 1.5
    cases = [_case(f"r{i:02d}") for i in range(16)]
    _family(pytester.path, cases)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    with ScriptedServer([Reply(text="fine", prompt_tokens=10, completion_tokens=2)]) as srv:
        procs = []
        for i in (1, 2):
            cmd = [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", f"{OPT_SHARD}={i}/2",
                   f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}", f"{OPT_RPM}=4",
                   f"{OPT_TPM}=100000", "-o", f"{INI_RATE_WINDOW}={window}",
                   "-o", f"{INI_RATE_BACKEND}={redis_url}#shards", f"{OPT_RECORDS}=reports/shard{i}.jsonl",
                   *(["-n", "2"] if i == 2 else [])]
            procs.append(subprocess.Popen(cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outs = [p.communicate(timeout=600)[0] for p in procs]
        arrivals = sorted(r["_received"] for r in srv.requests)
    for p, text in zip(procs, outs):
        assert p.returncode == 0, text[-3000:]
    assert len(arrivals) == 16
    slack = 0.2  # admission to arrival at the server: the local HTTP hop, on a shared machine
    assert _max_in_window(arrivals, window - slack) <= 4
    assert arrivals[-1] - arrivals[0] >= 3 * window - slack  # 16 at 4 per window need three more windows
    recs = [json.loads(x) for i in (1, 2) for x in (pytester.path / "reports" / f"shard{i}.jsonl").read_text().splitlines()]
    assert len(recs) == 16 and {r["shard"]["index"] for r in recs} == {1, 2}
    # 16 turns at 4 a window: at least the second window's had to wait, however staggered the shards' start
    assert sum(1 for r in recs if r["rate_wait_ms"] > 0) >= 4


def test_a_rate_backend_that_is_not_redis_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-o", f"{INI_RATE_BACKEND}=http://127.0.0.1:6379")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert INI_RATE_BACKEND in result.stderr.str()


@pytest.mark.parametrize(("url", "problem"), [
    ("redis://x:y:z/abc", "Port could not be cast to integer value as 'y:z'"),
    ("redis://127.0.0.1:99999/0", "Port out of range 0-65535"),
    ("redis://[::1", "Invalid IPv6 URL"),
    ("redis://:hunter2-secret@127.0.0.1:6379/abc", "the database '/abc' is not a whole number"),
    ("redis:///0", "no host"),
    ("redis://127.0.0.1:0/0", "port 0 is not in 1-65535"),
    ("redis://127.0.0.1:6379/0?socket_timeout=soon", "Invalid value for 'socket_timeout'"),
    ("unix://", "no socket path"),
])
def test_a_malformed_redis_url_is_a_usage_error_without_its_password(pytester: pytest.Pytester, url: str,
                                                                     problem: str) -> None:
    """At configure, before any turn: the ini key, the URL with its password hidden, what is wrong
    (not an INTERNALERROR from pytest_configure, nor a URL redis-py would read as another database).
    """
    (pytester.path / "test_nothing.py").write_text("def test_x():\n    pass\n")
    result = pytester.runpytest("-o", f"{INI_RATE_BACKEND}={url}#team", f"{OPT_MODEL}=openai/local-test",
                                f"{OPT_API_BASE}=http://127.0.0.1:9/v1", f"{OPT_RPM}=10")
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out + err
    assert "INTERNALERROR" not in out + err and "hunter2" not in out + err
    shown = url.replace(":hunter2-secret@", ":<redacted>@")
    assert f"ini {INI_RATE_BACKEND} = {shown}#team: " in err and problem in err, err


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0#name", "redis://127.0.0.1", "rediss://u:p@h.example:6380/1",
                                 "redis://[::1]:6379/15", "unix:///run/redis/redis.sock?db=2"])
def test_well_formed_redis_urls_are_accepted(url: str) -> None:
    assert redis_url_problem(url) is None


def test_a_redis_where_nothing_listens_is_the_rate_limiters_error(tmp_path: Path) -> None:
    """Unit level: the limiter's failure is its own type, one line, the URL's password hidden."""
    limit = RedisRateLimit(f"redis://:hunter2-secret@127.0.0.1:{_free_port()}/0#x", rpm=2)
    with pytest.raises(RateLimiterError) as info:
        limit.try_acquire()
    message = info.value.message
    assert message.startswith("the rate limiter's Redis at redis://:<redacted>@127.0.0.1:") and "hunter2" not in message
    assert "ConnectionError" in message and "\n" not in message
    limit.close()


def _limiter_errors(root: Path, records: str) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    rows = [json.loads(x) for x in (root / records).read_text().splitlines()]
    return [r for r in rows if r["outcome"] == "scored"], [r for r in rows if r["outcome"] == "error"]


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_every_decision_a_redis_where_nothing_listens_keeps_from_being_made_is_recorded_as_its_error(
        pytester: pytest.Pytester, workers: int) -> None:
    """Nothing listens on the Redis port: each decision is one line of its own error type (never the
    provider's ConnectionError with redis-py's traceback), no request reaches the model, and the
    report and its terminal account say the rate limiter failed and for how many decisions.
    """
    n = 6
    _family(pytester.path, [_case(f"q{i}") for i in range(n)])
    url = f"redis://:hunter2-secret@127.0.0.1:{_free_port()}/0"
    with ScriptedServer([Reply(text="fine", prompt_tokens=10, completion_tokens=2)]) as srv:
        result = pytester.runpytest_subprocess(
            "cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}", f"{OPT_RPM}=100",
            "-o", f"{INI_RATE_BACKEND}={url}", f"{OPT_REPORT}=r.json", "-n", str(workers), timeout=300)
        sent = len(srv.requests)
    out = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(errors=n)
    assert sent == 0
    assert "Traceback" not in out and "redis/connection.py" not in out and "hunter2" not in out
    assert "INTERNALERROR" not in out
    # One long-form line per decision (the short summary's lines repeat them, cut at the terminal's width).
    lines = [line for line in out.splitlines() if line.startswith("rate limiter error (not scored): RateLimiterError: ")]
    assert len(lines) == n, out[-3000:]
    scored, errors = _limiter_errors(pytester.path, "reports/tooleffect-records.jsonl")
    assert scored == [] and len(errors) == n
    for rec in errors:
        error = rec["error"]
        assert isinstance(error, dict) and error["type"] == "RateLimiterError" and "traceback" not in error
        assert str(error["message"]).startswith("the rate limiter's Redis at redis://:<redacted>@127.0.0.1:")
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["status"] == "incomplete"
    limiter = report["rate_limiter"]
    assert limiter["decisions"] == n and limiter["blocks"] == {"demo / openai/local-test": n}
    assert "ConnectionError" in limiter["first"]
    assert report["blocks"][0]["error_types"] == {"RateLimiterError": n}
    result.stdout.fnmatch_lines([f"the rate limiter failed: {n} decisions not made (demo / openai/local-test {n}; "
                                 "RateLimiterError, not a provider's error, no request sent): the rate limiter's "
                                 "Redis at redis://:<redacted>@127.0.0.1:*"])


@pytest.mark.subprocess
def test_redis_killed_mid_run_fails_the_decisions_after_as_the_rate_limiters_and_keeps_the_ones_before(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """redis-server killed after a few answers: the decisions made before are scored, every later one
    is a RateLimiterError record (never a provider's ConnectionError), and the report says how many.
    """
    n = 12
    _family(pytester.path, [_case(f"k{i:02d}") for i in range(n)])
    proc, url = start_redis(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    try:
        with ScriptedServer([Reply(text="fine", prompt_tokens=10, completion_tokens=2, delay_s=0.3)]) as srv:
            run = subprocess.Popen(
                [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
                 f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}", f"{OPT_RPM}=1000",
                 f"{OPT_CONCURRENCY}=1", f"{OPT_RETRIES}=0", "-o", f"{INI_RATE_BACKEND}={url}#killed",
                 f"{OPT_REPORT}=r.json"],
                cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            deadline = time.monotonic() + 240
            while len(srv.requests) < 3 and time.monotonic() < deadline and run.poll() is None:
                time.sleep(0.05)
            proc.kill()  # redis-server gone mid-run
            proc.wait(timeout=10)
            out = run.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert run.returncode == 1, out[-3000:]
    scored, errors = _limiter_errors(pytester.path, "reports/tooleffect-records.jsonl")
    assert len(scored) + len(errors) == n
    assert len(scored) >= 3 and len(errors) >= 1, out[-3000:]
    assert {e["error"]["type"] for e in errors} == {"RateLimiterError"}  # type: ignore[index]
    assert "Traceback" not in out and "redis/connection.py" not in out
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["rate_limiter"]["decisions"] == len(errors)
    assert f"the rate limiter failed: {len(errors)} decision" in out
