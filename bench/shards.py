"""Sharded runs at scale, simulated on one machine: N shard processes against one fixed-latency
local OpenAI-compatible server, one rate limit shared through Redis, then the shards' record
logs merged and compared with the unsharded run's report.

Starts its own ``redis-server`` (Debian's package: ``scripts/ensure-redis``) on a free port of
127.0.0.1 and a scripted server that answers every request after ``--delay`` seconds (a tool call
or a text reply, chosen from the request's own content, so every run gets the same answers).
The shipped ``tau-airline`` family (its first ``--cases`` decisions) runs with a live policy
pointed at that server:

1. unsharded, under the shared limit (the reference report);
2. as ``--shards`` processes ``--tooleffect-shard I/N`` started at once, each under the same
   Redis limit (``tooleffect_rate_backend = redis://…``), each writing its record log;
3. ``tooleffect report`` over the folder of logs.

Prints the time from the first request to the last answer against the limit the rate limit sets
(the provider's physical limit: ``(⌈cases ÷ rpm⌉ − 1) × window`` plus one answer's delay), and
the wall time with pytest's start-up, for the shards together and the unsharded run; each
shard's item count and wall time (the spread), the most requests that arrived at the server in
any window (never above ``rpm``), and whether the merged report is complete and equal to the
unsharded one.  Default size (120 decisions, 4 shards, 10 requests per second: an 11.2 s
limit) takes one to two minutes here, most of it the five pytest start-ups.

    python bench/shards.py [--shards 4] [--cases 120] [--rpm 10] [--window 1.0] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_tooleffect.report import Report  # noqa: E402
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer  # noqa: E402

FAMILY = "tau-airline"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server of its own (no persistence) and its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed: run scripts/ensure-redis (Debian's redis-server package)")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not answer on its port")


def answer(delay_s: float) -> Any:
    """The server's script: a call to get_user_details for about half the states, else a text reply."""

    def reply(body: dict[str, Any]) -> Reply:
        last = json.dumps(body.get("messages", [])[-1:], sort_keys=True)
        if sum(last.encode()) % 2:
            return Reply(tool_calls=[("get_user_details", {"user_id": "mia_li_3668"})], prompt_tokens=900,
                         completion_tokens=20, delay_s=delay_s)
        return Reply(text="Could you tell me your user id?", prompt_tokens=900, completion_tokens=12,
                     delay_s=delay_s)

    return reply


def max_in_window(times: list[float], window: float) -> int:
    """The most arrivals in any half-open window of ``window`` seconds."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - window:
            start += 1
        best = max(best, end - start + 1)
    return best


#: report fields that are clock readings of a live run (no two runs share them, sharded or not)
TIMINGS = ("latency_ms_p50", "latency_ms_p95")


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a report measures: everything but the notes on where it came from (shard, shards, the
    merge's selection, judge) and the latency percentiles (clock readings: they differ between any
    two live runs)."""
    return _untimed({k: report[k] for k in Report.model_fields
                     if k in report and k not in ("judge", "shard", "shards", "selection")})


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where two JSON values differ (at most the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += differences(a.get(key), b.get(key), f"{path}.{key}")
        return out[:8]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")][:8]
    return [] if a == b else [path or "."]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=4, help="shard processes started at once")
    parser.add_argument("--cases", type=int, default=120, help="decisions of the tau-airline family (at most 210)")
    parser.add_argument("--rpm", type=int, default=10, help="requests per window, over every shard")
    parser.add_argument("--window", type=float, default=1.0, help="seconds the limit counts over")
    parser.add_argument("--delay", type=float, default=0.2, help="the server's answer time, seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="model calls in flight per shard")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tooleffect-shards-") as tmp:
        root = Path(tmp)
        shutil.copytree(REPO / "cases" / FAMILY, root / "cases" / FAMILY)
        lines = (root / "cases" / FAMILY / "cases.jsonl").read_text().splitlines()[: args.cases]
        (root / "cases" / FAMILY / "cases.jsonl").write_text("\n".join(lines) + "\n")
        (root / "oracle").mkdir()
        if (REPO / "oracle" / f"{FAMILY}.yaml").is_file():
            shutil.copy(REPO / "oracle" / f"{FAMILY}.yaml", root / "oracle" / f"{FAMILY}.yaml")
        shutil.copy(REPO / "conftest.py", root / "conftest.py")
        (root / "logs").mkdir()
        n = len(lines)
        redis_proc, redis_url = start_redis(root)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        try:
            with ScriptedServer(answer(args.delay)) as srv:
                def command(name: str, *extra: str) -> list[str]:
                    return [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", "-p",
                            "no:randomly", "--tb=no", "-rN", "--tooleffect-model=openai/bench",
                            f"--tooleffect-api-base={srv.base_url}", f"--tooleffect-rpm={args.rpm}",
                            "--tooleffect-tpm=100000000", f"--tooleffect-concurrency={args.concurrency}",
                            "--tooleffect-retries=0", "-o", f"tooleffect_rate_window={args.window}",
                            "-o", f"tooleffect_rate_backend={redis_url}#{name}", *extra]

                t0 = time.perf_counter()
                whole = subprocess.run(command("whole", f"--tooleffect-report={root / 'whole.json'}",
                                               f"--tooleffect-records={root / 'whole.jsonl'}"),
                                       cwd=root, env=env, capture_output=True, text=True)
                whole_wall = time.perf_counter() - t0
                whole_arrivals = [r["_received"] for r in srv.requests]
                if whole.returncode not in (0, 1):
                    raise SystemExit(f"the unsharded run failed ({whole.returncode}): {whole.stdout[-2000:]}")
                mark = len(srv.requests)

                t0 = time.perf_counter()
                procs = [subprocess.Popen(command("shards", f"--tooleffect-shard={i}/{args.shards}",
                                                  f"--tooleffect-records={root / 'logs' / f'shard{i}.jsonl'}"),
                                          cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True) for i in range(1, args.shards + 1)]
                walls: dict[int, float] = {}
                outs: dict[int, str] = {}
                while len(walls) < len(procs):
                    for i, proc in enumerate(procs, 1):
                        if i not in walls and proc.poll() is not None:
                            walls[i] = time.perf_counter() - t0
                            outs[i] = proc.stdout.read() if proc.stdout else ""
                    time.sleep(0.02)
                sharded_wall = time.perf_counter() - t0
                arrivals = [r["_received"] for r in srv.requests[mark:]]
        finally:
            redis_proc.terminate()
            redis_proc.wait(10)
        for i, proc in enumerate(procs, 1):
            if proc.returncode not in (0, 1):
                raise SystemExit(f"shard {i} failed ({proc.returncode}): {outs[i][-2000:]}")
        merged = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(root / "logs"),
                                 "--json"], cwd=root, env=env, capture_output=True, text=True)
        if merged.returncode != 0:
            raise SystemExit(f"tooleffect report failed: {merged.stderr[-2000:]}")
        data = json.loads(merged.stdout)
        reference = json.loads((root / "whole.json").read_text())

        per_shard = {i: len((root / "logs" / f"shard{i}.jsonl").read_text().splitlines())
                     for i in range(1, args.shards + 1)}

    windows = -(-n // args.rpm) - 1  # after the first window's burst, each window admits rpm more
    limit = windows * args.window + args.delay
    print(f"{n} decisions of {FAMILY}, server answer {args.delay:g} s, rate limit {args.rpm} requests per "
          f"{args.window:g} s through Redis, concurrency {args.concurrency} per shard")
    print(f"limit set by the rate limit (first request to last answer): ({n} / {args.rpm} rounded up - 1) x "
          f"{args.window:g} s + {args.delay:g} s = {limit:.1f} s")

    def line(label: str, wall: float, times: list[float]) -> None:
        span = max(times) - min(times) + args.delay
        print(f"{label:<20} first request to last answer {span:.1f} s, span / limit {span / limit:.2f}; "
              f"wall {wall:.1f} s with pytest's start-up; {len(times)} requests, at most "
              f"{max_in_window(times, args.window)} in any {args.window:g} s (limit {args.rpm})")

    line(f"{args.shards} shards at once:", sharded_wall, arrivals)
    line("unsharded:", whole_wall, whole_arrivals)
    print(f"{'shard':>6}{'items':>8}{'wall s':>9}")
    for i in range(1, args.shards + 1):
        print(f"{i:>6}{per_shard[i]:>8}{walls[i]:>9.1f}")
    counts = list(per_shard.values())
    first, last = min(walls.values()), max(walls.values())
    print(f"spread: items {min(counts)}..{max(counts)} (mean {n / args.shards:.1f}), wall {first:.1f}..{last:.1f} s "
          f"(last - first {last - first:.1f} s)")
    diff = differences(figures(data), figures(reference))
    equal = not diff
    print(f"merged report: status {data['status']}, shards merged {data['shards']['merged']}, missing "
          f"{data['shards']['missing']}, {sum(counts)} records; equal to the unsharded run (latency percentiles "
          f"aside): {'yes' if equal else 'NO, at ' + ', '.join(diff)}")
    return 0 if equal and data["status"] == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())
