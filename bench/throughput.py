"""Harness throughput against a fixed-latency local OpenAI-compatible endpoint.

Starts a scripted server on 127.0.0.1 that answers every request after a fixed delay with a tool
call, imports BFCL (simple + multiple) into a scratch folder, and runs N cases through the
plugin at concurrency C, then the same N requests through a bare asyncio + litellm loop with a
semaphore of C, then through inspect-ai (its own environment, ``.venv-inspect``: see
bench/inspect_throughput.py) with ``max_connections`` C, all in the same run against the same
server.  Prints:

* our wall time over the physical limit (N × delay ÷ C), start-up reported apart: the longer of
  pytest's own (imports and collection: a ``--collect-only`` run, which starts no model-turn
  process) and a bare ``import litellm`` (the run's child process imports it beside collection);
* our wall time over inspect-ai's, in all and without start-up on both sides;
* CPU time per decision for the harness, the bare loop and inspect-ai (target: the harness at
  most 1.2× the bare loop's), each side counted from the moment it can send its first request to
  its end: the bare loop after ``import litellm`` in its own process, the harness after
  collection and its model-turn child's import (bench/cpu_after_start.py, a pytest plugin the
  harness run loads), pytest's process and the child together.

Run: ``make bench-throughput`` (1,000 cases, 2 s delay, concurrency 32: a 62.5 s limit), or
``.venv/bin/python bench/throughput.py [--cases 1000] [--delay 2.0] [--concurrency 32]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))

from results import emit  # noqa: E402 - bench/results.py: this folder is on sys.path

# requests in flight at most: each is held `delay` seconds from its arrival, so the most arrivals
# in any window of that length
from shards import max_in_window  # noqa: E402

from pytest_tooleffect.servers.scripted import Reply, ScriptedServer  # noqa: E402


def run_child(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system) of a child process, and its output tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out[-600:]


def run_inspect(python: Path, requests: Path, base_url: str, concurrency: int, cwd: Path
                ) -> tuple[float, float, dict] | str:
    """inspect-ai's run: child wall seconds, child CPU seconds and its JSON line, or why it could not run."""
    if not python.is_file():
        return f"no {python} (run `make bench-throughput`, which builds it)"
    cmd = [str(python.absolute()), str(REPO / "bench" / "inspect_throughput.py"), str(requests), "--base-url", base_url,
           "--concurrency", str(concurrency)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return f"inspect-ai exited {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout.strip().splitlines()[-1])


async def bare_loop(base_url: str, requests: list[dict], concurrency: int) -> float:
    import litellm

    sem = asyncio.Semaphore(concurrency)

    async def one(req: dict) -> None:
        async with sem:
            await litellm.acompletion(model="openai/bench", api_base=base_url, api_key="x", **req)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - t0


def bare_child(requests: Path, base_url: str, concurrency: int) -> dict:
    """The bare loop in a process of its own, as the harness runs: ``{"wall_s", "cpu_s"}`` of the
    loop alone, counted after litellm's import (the server's threads are this process's, not its)."""
    code = ("import asyncio, json, sys, time; sys.path.insert(0, sys.argv[1]); import litellm; "
            "from throughput import bare_loop; reqs = json.load(open(sys.argv[2])); c0 = time.process_time(); "
            "wall = asyncio.run(bare_loop(sys.argv[3], reqs, int(sys.argv[4]))); "
            "print(json.dumps({'wall_s': wall, 'cpu_s': time.process_time() - c0}))")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "bench"), str(requests), base_url, str(concurrency)],
                         capture_output=True, text=True, check=True)
    doc: dict = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--inspect-python", type=Path, default=REPO / ".venv-inspect" / "bin" / "python",
                    help="the interpreter of the environment with inspect-ai installed")
    args = ap.parse_args()
    limit = args.cases * args.delay / args.concurrency
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "import", "bfcl", "--shared", str(SHARED),
                        "--out", str(root / "bfcl"), "--category", "simple", "--category", "multiple",
                        "--category", "live_multiple"], check=True, stdout=subprocess.DEVNULL)
        # keep the first N cases across the families
        kept = 0
        for fam in sorted((root / "bfcl").iterdir()):
            lines = (fam / "cases.jsonl").read_text().splitlines()
            take = lines[: max(0, args.cases - kept)]
            kept += len(take)
            if take:
                (fam / "cases.jsonl").write_text("\n".join(take) + "\n")
            else:  # a family with no case left is an error item ("holds no case"), not a decision
                shutil.rmtree(fam)
        requests = []
        for fam in sorted((root / "bfcl").iterdir()):
            for line in (fam / "cases.jsonl").read_text().splitlines():
                c = json.loads(line)
                tools = [{"type": "function", "function": {"name": t["name"].replace(".", "_"),
                                                           "parameters": t["parameters"]}} for t in c["tools"]]
                requests.append({"messages": c["messages"], "tools": tools})
        (root / "requests.json").write_text(json.dumps(requests))
        reply = Reply(tool_calls=[("calculate_triangle_area", '{"base": 10, "height": 5}')], delay_s=args.delay)
        with ScriptedServer([reply]) as srv:
            common = [sys.executable, "-m", "pytest", "bfcl", "-q", "-p", "no:cacheprovider", "--tooleffect-records=",
                      "--tooleffect-no-summary", "--tooleffect-model=openai/bench",
                      f"--tooleffect-api-base={srv.base_url}", f"--tooleffect-concurrency={args.concurrency}",
                      "--tooleffect-retries=0", "--tb=no", "-rN",
                      # the dev extra's hypothesis plugin imports hypothesis at the terminal summary (0.6 s of
                      # CPU): a plugin of this checkout's environment, not of a user's
                      "-p", "no:hypothesispytest"]
            # pytest's own start-up (a --collect-only run starts no child process) and litellm's
            # import, which the run's child process makes beside it
            collect_wall, _, _ = run_child([*common, "--collect-only"], root)
            import_wall, _, _ = run_child([sys.executable, "-c", "import litellm"], root)
            startup_wall = max(collect_wall, import_wall)
            cpu_out = root / "cpu.json"  # bench/cpu_after_start.py: the run's CPU once ready to send
            env = {**os.environ, "TOOLEFFECT_BENCH_CPU_OUT": str(cpu_out),
                   "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "bench"), os.environ.get("PYTHONPATH")) if p)}
            wall, _, tail = run_child([*common, "-p", "cpu_after_start"], root, env)
            after_start = json.loads(cpu_out.read_text()) if cpu_out.is_file() else None
            served = len(srv.requests)
            peak = max_in_window([r["_received"] for r in srv.requests], args.delay)
            bare = bare_child(root / "requests.json", srv.base_url, args.concurrency)
            bare_wall, bare_cpu = bare["wall_s"], bare["cpu_s"]
            before = len(srv.requests)
            inspect = run_inspect(args.inspect_python, root / "requests.json", srv.base_url, args.concurrency, root)
            inspect_served = len(srv.requests) - before
            # -n 2, as a user types it (docs/scale-out.md): each worker prefetches the chunks it is handed at the same
            # concurrency, so twice as many in flight
            before = len(srv.requests)
            wall2, _, tail2 = run_child([*common, "-n", "2"], root)
            served2 = len(srv.requests) - before
            peak2 = max_in_window([r["_received"] for r in srv.requests[before:]], args.delay)
    n = len(requests)
    print(f"{n} cases, delay {args.delay} s, concurrency {args.concurrency}: physical limit {limit:.1f} s")
    print(f"pytest-tooleffect: wall {wall:.1f} s (start-up {startup_wall:.1f} s of it: the longer of pytest's "
          f"imports and collection, {collect_wall:.1f} s, and litellm's import in the child, {import_wall:.1f} s), "
          f"{served} requests served; {tail.strip().splitlines()[-1] if tail.strip() else ''}")
    print(f"  wall / limit: {wall / limit:.2f}   (wall - start-up) / limit: {(wall - startup_wall) / limit:.2f}"
          "   (target <= 1.2)")
    print(f"bare asyncio + litellm loop: wall {bare_wall:.1f} s, wall / limit {bare_wall / limit:.2f}")
    if after_start is None:
        raise SystemExit(f"the harness run wrote no CPU figures (bench/cpu_after_start.py): {tail}")
    # from the moment each side can send its first request to its end, imports left out on both
    parent_per = after_start["parent_cpu_s"] / n * 1000
    child_per = after_start["child_cpu_s"] / n * 1000
    ours_per = parent_per + child_per
    bare_per = bare_cpu / n * 1000
    print(f"CPU per decision, once ready to send (imports and collection left out), the server in another "
          f"process: harness {ours_per:.1f} ms (pytest's process {parent_per:.1f} ms: items, scoring, records, "
          f"report; its model-turn child {child_per:.1f} ms), bare loop {bare_per:.1f} ms, "
          f"ratio {ours_per / bare_per:.2f} (target <= 1.2)")
    print(f"in flight at most: {peak} at -n 0 (concurrency {args.concurrency}); {peak2} at -n 2 "
          f"({served2} requests served, wall {wall2:.1f} s, wall / limit at twice the concurrency "
          f"{wall2 / (limit / 2):.2f}; {tail2.strip().splitlines()[-1] if tail2.strip() else ''})")
    emit(f"live, {n} cases at concurrency {args.concurrency}: wall with start-up",
         f"physical limit {limit:.1f} s (N x delay / C)", wall / limit, "<= 1.2", f"{wall:.1f} s")
    emit("live: harness CPU per decision", "bare asyncio + litellm loop (own process, after import)",
         ours_per / bare_per, "<= 1.2", f"{ours_per:.1f} ms against {bare_per:.1f} ms")
    emit(f"live -n 2: requests in flight at most, concurrency {args.concurrency} per worker",
         f"2 workers x {args.concurrency}", peak2 / (2 * args.concurrency), ">= 0.95", f"{peak2} (at -n 0: {peak})")
    if isinstance(inspect, str):
        print(f"inspect-ai: not run: {inspect}")
        return
    i_wall, _, doc = inspect
    i_eval = doc["eval_wall_s"]
    print(f"inspect-ai: wall {i_wall:.1f} s (start-up {i_wall - i_eval:.1f} s of it: imports, dataset, log), "
          f"{inspect_served} requests served, {doc['samples']} samples, {doc['errors']} errors, "
          f"{doc['tool_calls']} with a tool call; wall / limit {i_wall / limit:.2f}, "
          f"eval() / limit {i_eval / limit:.2f}")
    print(f"  ours / inspect-ai: wall {wall / i_wall:.2f}   without start-up "
          f"{(wall - startup_wall) / i_eval:.2f}   (target < 1)")
    print(f"  CPU per decision: inspect-ai {doc['eval_cpu_s'] / n * 1000:.1f} ms (its eval() only)")
    emit(f"live, {n} cases: wall with start-up", "inspect-ai on the same cases, endpoint and concurrency",
         wall / i_wall, "<= 0.8", f"{wall:.1f} s against {i_wall:.1f} s")


if __name__ == "__main__":
    main()
