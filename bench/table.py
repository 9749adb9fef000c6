"""Every benchmark, one after another, and one table of their results (``make bench``).

Each script in ``bench/`` prints ``BENCH-RESULT`` lines (:mod:`results`); this runs them at quick
sizes (``--full``: the sizes their docstrings name, the ones docs/benchmarks.md quotes) and prints, per
figure: the figure, the peer or limit it is held against (measured in the same run), the ratio,
the target, whether it is met, and the machine's 1-minute load average when that benchmark
ended.  A benchmark that cannot run here (no Docker engine, no BFCL or inspect-ai environment, no
local model server) is a row saying why, never left out.  The load averages at the start and the
end are printed under the table (the machine may be shared: read the ratios, not the seconds).

Run: ``.venv/bin/python bench/table.py [--full] [--only replay,startup] [--json reports/bench.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from results import parse  # bench/results.py: this folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BFCL_PY = str(REPO / ".venv-bfcl" / "bin" / "python")
INSPECT_PY = str(REPO / ".venv-inspect" / "bin" / "python")

# name: (quick command, full command, a file that must exist first or None)
BENCHES: dict[str, tuple[list[str], list[str], str | None]] = {
    "replay": ([PY, "bench/replay_scale.py", "--sizes", "1000,10000"],
               [PY, "bench/replay_scale.py", "--sizes", "1000,10000,50000"], None),
    "replay -n 2": ([PY, "bench/replay_scale.py", "--sizes", "10000", "--workers", "2"],
                    [PY, "bench/replay_scale.py", "--sizes", "10000,50000", "--workers", "2"], None),
    "startup": ([PY, "bench/startup.py", "--cases", "1000"], [PY, "bench/startup.py", "--cases", "10000"], None),
    "throughput": ([PY, "bench/throughput.py", "--cases", "300", "--delay", "1.0", "--concurrency", "32",
                    "--inspect-python", INSPECT_PY],
                   [PY, "bench/throughput.py", "--cases", "1000", "--delay", "2.0", "--concurrency", "32",
                    "--inspect-python", INSPECT_PY], None),
    "collection": ([PY, "bench/collection.py", "--cases", "10000", "--repeat", "1"],
                   [PY, "bench/collection.py", "--cases", "10000", "--repeat", "3"], None),
    "sampling": ([PY, "bench/sampling.py", "--sizes-mb", "20", "200"],
                 [PY, "bench/sampling.py", "--sizes-mb", "100", "1000"], None),
    "sandbox": ([PY, "bench/sandbox.py", "--items", "20", "--fresh-items", "5"], [PY, "bench/sandbox.py"], None),
    "html": ([PY, "bench/html_page.py", "--cases", "5000"], [PY, "bench/html_page.py"], None),
    "bfcl": ([BFCL_PY, "bench/bfcl_conformance.py", "--rounds", "1"], [BFCL_PY, "bench/bfcl_conformance.py"],
             BFCL_PY),
    "bfcl multi-turn": ([BFCL_PY, "bench/bfcl_multi_turn_conformance.py", "--limit", "10"],
                        [BFCL_PY, "bench/bfcl_multi_turn_conformance.py"], BFCL_PY),
    "local model": ([PY, "bench/local_model.py", "--cases", "2", "--inspect-python", INSPECT_PY],
                    [PY, "bench/local_model.py", "--inspect-python", INSPECT_PY], None),
}


def run(name: str, cmd: list[str], needs: str | None, timeout_s: float) -> list[dict[str, object]]:
    """The benchmark's results, or one row saying why it gave none."""
    load = os.getloadavg()[0]
    if needs is not None and not Path(needs).exists():
        return [{"figure": name, "peer": "", "ratio": None, "target": "", "met": None,
                 "note": f"not run: no {Path(needs).relative_to(REPO)} (make bench builds it)",
                 "load": load}]
    print(f"== {name}: {' '.join(Path(c).name if c.startswith('/') else c for c in cmd)}", flush=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(":")}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=env)
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = None
    print(f"   {time.perf_counter() - t0:.0f} s, exit {code}", flush=True)
    results = parse(out)
    load = os.getloadavg()[0]
    for r in results:
        r["load"] = load
    if not results:
        why = "timed out" if code is None else (out.strip().splitlines() or ["no output"])[-1][:160]
        results = [{"figure": name, "peer": "", "ratio": None, "target": "", "met": None,
                    "note": f"not run: {why}", "load": load}]
    return results


def table(rows: list[dict[str, object]]) -> str:
    """The rows as a Markdown table."""
    head = "| figure | peer or limit | ratio | target | met | load | measured |\n|---|---|---:|---|---|---:|---|\n"
    lines = []
    for r in rows:
        met = "" if r["met"] is None else "yes" if r["met"] else "NO"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['figure']} | {r['peer']} | {ratio} | {r['target']} | {met} | {r['load']:.2f} "
                     f"| {r['note']} |")
    return head + "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="the sizes the scripts' docstrings name (slow)")
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows and load averages here")
    args = ap.parse_args()
    chosen = [n for n in BENCHES if not args.only or n in args.only.split(",")]
    start = os.getloadavg()
    rows: list[dict[str, object]] = []
    for name in chosen:
        quick, full, needs = BENCHES[name]
        rows += run(name, full if args.full else quick, needs, args.timeout)
    end = os.getloadavg()
    print()
    print(table(rows))
    print(f"\nload average (1, 5, 15 min) at the start: {' '.join(f'{x:.2f}' for x in start)}; "
          f"at the end: {' '.join(f'{x:.2f}' for x in end)}; {os.cpu_count()} CPUs; "
          f"{'full' if args.full else 'quick'} sizes")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "loadavg_start": start, "loadavg_end": end,
                                         "cpus": os.cpu_count(), "full": args.full}, indent=1) + "\n")


if __name__ == "__main__":
    main()
