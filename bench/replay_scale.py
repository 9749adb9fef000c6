"""Offline replay as the set grows: the plugin against plain pytest's floor, from files to the report.

The τ-airline cases the repository ships are copied to N decisions (new case ids, the same
messages, labels and recorded turns) in a scratch project.  Two variants: ``half`` takes every
other case from the cases whose recorded decision fails (half the decisions fail), ``pass`` takes
only cases whose recorded decision passes.  Each runs as a user runs it: ``pytest cases -q`` with
the JSON report and the record log written, pytest's default failure output and short summary
(``-rfE``).  The floor is plain pytest running N trivial parametrised tests in the same run, with
the same ``-n`` as the plugin's runs.  The half-failing variant is also set beside plain pytest
with half of its trivial tests failing (``assert i % 2 == 0``): what pytest's own failure output
costs (the failures section, the short summary), which the passing floor does not pay.

Prints per N and variant: wall seconds, the floor's, their ratio (target ≤ 2×), the same for CPU
seconds (user + system of the child: on a shared machine the steadier of the two), milliseconds per
decision (it must not grow with N), peak resident memory per decision (KiB) and its ratio to the
floor's (target ≤ 3×), and for each N the ratio of the half-failing run to the all-passing one.
The floor runs right before each of the plugin's runs, so both meet the same load.  Sizes up to
10,000 run three times in turn (floor, plugin, floor, plugin, ...) and each side's least wall, CPU
and peak memory are reported: a run of a few seconds on a shared machine varies by more than the
gap being measured (the same code gave 1.46× and 2.03× at 1,000 decisions in two runs).

Run: ``.venv/bin/python bench/replay_scale.py [--sizes 1000,10000,50000] [--workers 0] [--repeat 3]``
(the default sizes are 1k, 10k and 50k; ``make bench`` runs 1k and 10k, ``BENCH_FULL=1`` adds 50k).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from results import emit  # bench/results.py: this folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
FAMILY = REPO / "cases" / "tau-airline"

FLOOR = """\
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_decision(i):
    {body}
"""


@dataclass
class Run:
    """One child run: wall seconds, CPU seconds (user + system), peak resident set (KiB), exit code, output tail."""

    wall: float
    cpu: float
    peak_kib: int
    code: int
    tail: str


def run(cmd: list[str], cwd: Path, out: Path) -> Run:
    """Run ``cmd`` with its output to ``out``; wall time and the child's own peak RSS (``wait4``)."""
    env = {**os.environ, "PYTEST_ADDOPTS": "-p no:langsmith_plugin"}
    env.pop("PYTEST_XDIST_WORKER", None)
    # as on a user's machine: bytecode (and pytest's rewritten plugin modules) cached between runs
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with open(out, "w") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = out.read_text(errors="replace")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode, text[-1500:])


def least(runs: list[Run]) -> Run:
    """The least wall, CPU and peak memory of repeated runs of one command, each taken apart (as
    ``timeit`` takes the least of its repeats: what the load on a shared machine adds is never
    less than nothing); the exit code and output of the last run."""
    return Run(min(r.wall for r in runs), min(r.cpu for r in runs), min(r.peak_kib for r in runs),
               runs[-1].code, runs[-1].tail)


def classify(root: Path) -> tuple[list[dict], list[dict]]:
    """The shipped cases split into those whose recorded decision passes and those that fail."""
    records = root / "classify.jsonl"
    res = run([sys.executable, "-m", "pytest", "cases", "-q", "-p", "no:cacheprovider", "--tb=no",
               "--tooleffect-records", str(records)], root, root / "classify.out")
    if res.code not in (0, 1):
        raise SystemExit(f"classification run failed:\n{res.tail}")
    failing = {r["case_id"] for r in map(json.loads, records.read_text().splitlines())
               if r["outcome"] == "scored" and not (r["verdict"]["name_args_ok"])}
    cases = [json.loads(line) for line in (FAMILY / "cases.jsonl").read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("label") and c.get("recorded")]
    return [c for c in cases if c["id"] not in failing], [c for c in cases if c["id"] in failing]


def write_cases(path: Path, n: int, passing: list[dict], failing: list[dict], variant: str) -> None:
    with open(path, "w") as fh:
        for i in range(n):
            pool = failing if variant == "half" and i % 2 else passing
            case = dict(pool[(i // 2) % len(pool)])
            case["id"] = f"d{i:06d}-{case['id']}"
            fh.write(json.dumps(case) + "\n")


def scaffold(root: Path) -> None:
    fam = root / "cases" / "tau-airline"
    fam.mkdir(parents=True)
    for name in ("system_prompt.md", "tools.json"):
        shutil.copy(FAMILY / name, fam / name)
    # the scaled family is not the sampled one: its quota and population (checked against the cases) go
    (fam / "family.yaml").write_text("".join(line for line in (FAMILY / "family.yaml").read_text().splitlines(True)
                                             if not line.startswith(("quota:", "population:"))))
    (root / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "tau-airline.yaml", root / "oracle" / "tau-airline.yaml")
    (root / "pytest.ini").write_text("[pytest]\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--variants", default="half,pass")
    ap.add_argument("--workers", type=int, default=0,
                    help="pytest-xdist workers (-n) for the plugin's runs and the floor's")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of the floor and of the plugin, taken in turn, for each size up to --repeat-up-to; "
                         "the least of each side is reported")
    ap.add_argument("--repeat-up-to", type=int, default=10000,
                    help="the largest size that is repeated (a larger one runs once: its runs take minutes)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    variants = args.variants.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="tooleffect-replay-"))
    rows = []
    try:
        base = tmp / "classify"
        base.mkdir()
        (base / "cases").mkdir()
        shutil.copytree(FAMILY, base / "cases" / "tau-airline")
        shutil.copytree(REPO / "oracle", base / "oracle")
        (base / "pytest.ini").write_text("[pytest]\n")
        passing, failing = classify(base)
        for n in sizes:
            floor_dir = tmp / f"floor-{n}"
            floor_dir.mkdir()
            (floor_dir / "pytest.ini").write_text("[pytest]\n")
            (floor_dir / "test_floor.py").write_text(FLOOR.format(n=n, body="pass"))
            (floor_dir / "test_floor_half.py").write_text(FLOOR.format(n=n, body="assert i % 2 == 0"))
            workers = ["-n", str(args.workers)] if args.workers else []
            by_variant = {}
            for variant in variants:
                root = tmp / f"{variant}-{n}"
                scaffold(root)
                write_cases(root / "cases" / "tau-airline" / "cases.jsonl", n, passing, failing, variant)
                cmd = [sys.executable, "-m", "pytest", "cases", "-q", "-p", "no:cacheprovider",
                       "--tooleffect-report", "report.json", "--tooleffect-records", "records.jsonl"]
                cmd += workers
                floors, half_floors, runs = [], [], []
                for _ in range(args.repeat if n <= args.repeat_up_to else 1):
                    floor = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_floor.py",
                                 *workers], floor_dir, floor_dir / "out.txt")
                    if floor.code != 0:
                        raise SystemExit(f"floor run failed:\n{floor.tail}")
                    floors.append(floor)
                    if variant == "half":  # the same failures in plain pytest: what pytest's own failure output costs
                        half_floor = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                          "test_floor_half.py", *workers], floor_dir, floor_dir / "out-half.txt")
                        if half_floor.code != 1:
                            raise SystemExit(f"half-failing floor run did not fail as written:\n{half_floor.tail}")
                        half_floors.append(half_floor)
                    runs.append(run(cmd, root, root / "out.txt"))
                floor, ours = least(floors), least(runs)
                report = json.loads((root / "report.json").read_text()) if (root / "report.json").is_file() else {}
                scored = sum(1 for _ in open(root / "records.jsonl")) if (root / "records.jsonl").is_file() else 0
                if ours.code not in (0, 1) or scored != n:
                    raise SystemExit(f"run {variant} N={n} failed (exit {ours.code}, {scored} records):\n{ours.tail}")
                by_variant[variant] = ours
                rows.append((n, variant, ours, floor, report.get("status")))
                print(f"N={n:>6} {variant:>4}: {ours.wall:8.1f} s  floor {floor.wall:7.1f} s  "
                      f"ratio {ours.wall / floor.wall:5.2f}x  CPU {ours.cpu:7.1f} s floor {floor.cpu:6.1f} s "
                      f"ratio {ours.cpu / floor.cpu:5.2f}x  {1000 * ours.wall / n:6.2f} ms/decision "
                      f"({1000 * ours.cpu / n:5.2f} ms CPU)  "
                      f"peak {ours.peak_kib / n:7.1f} KiB/decision (floor {floor.peak_kib / n:6.1f}, "
                      f"{ours.peak_kib / floor.peak_kib:5.2f}x)  exit {ours.code}", flush=True)
                what = f"replay N={n} {'half failing' if variant == 'half' else 'all passing'}"
                if args.workers:
                    what += f" -n {args.workers}"
                peer = f"plain pytest{' ' + ' '.join(workers) if workers else ''}, {n} trivial parametrised tests"
                emit(f"{what}: wall", peer, ours.wall / floor.wall, "<= 2", f"{ours.wall:.1f} s against "
                     f"{floor.wall:.1f} s; {1000 * ours.wall / n:.2f} ms per decision")
                emit(f"{what}: CPU", peer, ours.cpu / floor.cpu, "<= 2", f"{ours.cpu:.1f} s against {floor.cpu:.1f} s; "
                     f"{1000 * ours.cpu / n:.2f} ms per decision")
                emit(f"{what}: peak memory", peer, ours.peak_kib / floor.peak_kib, "<= 3",
                     f"{ours.peak_kib / n:.1f} KiB per decision against {floor.peak_kib / n:.1f}")
                if half_floors:
                    hf = least(half_floors)
                    print(f"N={n:>6} {variant:>4}: floor with half its tests failing {hf.wall:7.1f} s, "
                          f"ratio {ours.wall / hf.wall:5.2f}x", flush=True)
                    emit(f"{what}: wall, floor failing alike", f"{peer}, half of them failing",
                         ours.wall / hf.wall, "<= 2", f"{ours.wall:.1f} s against {hf.wall:.1f} s")
            if "half" in by_variant and "pass" in by_variant:
                print(f"N={n:>6} half failing / all passing: "
                      f"{by_variant['half'].wall / by_variant['pass'].wall:.2f}x", flush=True)
        print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(json.dumps({"replay_scale": [
            {"n": n, "variant": v, "wall_s": round(o.wall, 2), "floor_s": round(f.wall, 2),
             "ratio": round(o.wall / f.wall, 3), "cpu_s": round(o.cpu, 2), "floor_cpu_s": round(f.cpu, 2),
             "cpu_ratio": round(o.cpu / f.cpu, 3), "ms_per_decision": round(1000 * o.wall / n, 3),
             "peak_kib_per_decision": round(o.peak_kib / n, 2), "floor_peak_kib_per_decision": round(f.peak_kib / n, 2),
             "memory_ratio": round(o.peak_kib / f.peak_kib, 3), "workers": args.workers, "status": s}
            for n, v, o, f, s in rows], "loadavg": os.getloadavg()}))
    finally:
        if args.keep:
            print(f"scratch folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
