"""Trace sampling throughput and peak memory as the input grows (100 MB and 1 GB).

Generates τ-bench-format trajectory files (one JSON array, as the shipped
``gpt-4o-airline.json``) of about 100 MB and 1 GB by repeating the real trajectories under new
run ids, runs ``tooleffect sample`` on each in a child process, and prints the throughput
(MB/s) and the child's peak resident memory (``ru_maxrss`` from ``os.wait4``), then the ratio
of peak memory at 1 GB to peak memory at 100 MB (target ≤ 1.2: the sampler streams).

Run on demand (not in CI): ``.venv/bin/python bench/sampling.py [--sizes-mb 100 1000] [--tmp DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import emit  # bench/results.py: this folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared")) / \
    "datasets/tau-bench/historical_trajectories/gpt-4o-airline.json"


def make_file(path: Path, size_mb: int) -> int:
    runs = json.loads(SOURCE.read_text())
    target = size_mb * 1_000_000
    written = 0
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        while written < target:
            for run in runs:
                doc = dict(run, task_id=n, trial=0)
                text = ("" if n == 0 else ",\n") + json.dumps(doc)
                fh.write(text)
                written += len(text)
                n += 1
                if written >= target:
                    break
        fh.write("\n]\n")
    return n


def run_sampler(path: Path, out: Path) -> tuple[float, int]:
    cmd = [sys.executable, "-m", "pytest_tooleffect.cli", "sample", str(path), "--out", str(out),
           "--quota", "first=200,middle=200,last=200", "--format", "tau-bench"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"sampler failed on {path} (status {status})")
    return seconds, usage.ru_maxrss  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--tmp", default=None, help="folder for the generated files (needs ~1.1 GB)")
    args = ap.parse_args()
    peaks = {}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for size in args.sizes_mb:
            path = Path(tmp) / f"traj-{size}mb.json"
            runs = make_file(path, size)
            actual_mb = path.stat().st_size / 1e6
            seconds, peak_kib = run_sampler(path, Path(tmp) / f"out-{size}")
            peaks[size] = peak_kib
            print(f"{actual_mb:7.0f} MB, {runs} runs: {seconds:6.1f} s, {actual_mb / seconds:6.1f} MB/s, "
                  f"peak RSS {peak_kib / 1024:6.1f} MiB")
            path.unlink()
    if len(peaks) >= 2:
        small, large = min(peaks), max(peaks)
        print(f"peak memory ratio {large} MB / {small} MB: {peaks[large] / peaks[small]:.2f} (target <= 1.2)")
        emit(f"trace sampling peak memory, {large} MB input", f"the same at {small} MB", peaks[large] / peaks[small],
             "<= 1.2", f"{peaks[large] / 1024:.0f} MiB against {peaks[small] / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
