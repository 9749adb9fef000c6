"""The sequential gate live against the real local model: a planted 10-point regression stopped early,
an unchanged agent passed early on the margin, and the full runs' fixed-n verdicts beside them.

Run from the repository root (llama-server with Qwen2.5-Coder-0.5B-Instruct on 127.0.0.1:8089, started
here when none is running and stopped at the end only then)::

    python examples/sequential_local/demo.py --out reports/sequential-local --count 120

What it does, each step a pytest run of its own in ``--out`` (a step whose report is already there is
read, not run again, so an interrupted demonstration resumes):

1. writes the family ``mail`` (``--count`` short cases: two in three ask to read a thread, the rest
   need no tool) and runs the local model on it through :func:`examples.sequential_local.agent.decide`
   (policy ``qwen``): the **baseline**, saved with ``tooleffect baseline save``;
2. runs the same agent again without a sequential gate (**unchanged, full run**): an A/A run, from which
   ``tooleffect plan`` measures the model's own run-to-run discordance ``D``;
3. with ``sequential = {alpha, margin, effect, discordance = D}``: the agent with the planted regression
   (:func:`~examples.sequential_local.agent.regressed`, planted on ``--regression`` × the cases, chosen
   among the baseline's passing ones: every planted decision is one more pass→fail), then the
   unchanged agent;
4. the regressed agent's full run (no sequential gate);

and prints, per candidate, the decisions the sequential run used, its verdict, the tokens and dollars it
saved (tokens as the model reported them, priced at an illustrative $2.50 / $10 per million input /
output tokens), and the full run's fixed-n exact McNemar test at the same alpha.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
POLICY = "qwen"
SYSTEM = ("You are an email assistant. Call read_thread only when the user asks about a thread; otherwise answer "
          "briefly without a tool.")
FAMILY = f"""\
name: mail
description: Short requests to an email assistant, for the sequential gate's live demonstration (generated).
system_prompt: {json.dumps(SYSTEM)}
tools:
  - name: read_thread
    description: Read an email thread by its id.
    parameters: {{type: object, properties: {{thread_id: {{type: string}}}}, required: [thread_id]}}
    annotations: {{readOnlyHint: true}}
"""
ASKS = ["Please read thread th-{t} and summarise it.", "What does thread th-{t} say?", "Open thread th-{t} for me.",
        "Can you check email thread th-{t}?", "I need the gist of thread th-{t}, please."]
CLOSINGS = ["Thanks, that is all for today.", "Great, thank you!", "No need to do anything, goodbye!",
            "Perfect, talk to you tomorrow.", "That answers my question, thanks.", "Nothing else for now, {name}."]
NAMES = ["Ana", "Jonas", "Mei", "Omar", "Lena", "Raj", "Sofia", "Tom"]
ALPHA = 0.05
PRICE_IN, PRICE_OUT = 2.5, 10.0  # USD per million tokens, illustrative (the local model costs nothing)


def cases(count: int) -> list[dict[str, Any]]:
    """``count`` cases: case ``n`` asks to read thread ``th-<n>`` when ``n % 3`` is not 0, else needs no tool."""
    out = []
    for n in range(count):
        action: dict[str, Any]
        if n % 3:
            text = ASKS[n % len(ASKS)].format(t=f"{n:03d}")
            action = {"tool": "read_thread", "args": {"thread_id": f"th-{n:03d}"}}
        else:
            text = CLOSINGS[(n // 3) % len(CLOSINGS)].format(name=NAMES[n % len(NAMES)])
            action = {"tool": None, "reason": "the user only closes the conversation"}
        out.append({"id": f"mail-{n:04d}", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                    "messages": [{"role": "user", "content": text}], "label": {"valid_actions": [action]},
                    "source": "authored"})
    return out


def write_project(out: Path, count: int, gate: str | None) -> None:
    """The family under ``out/cases/mail`` and ``out/pyproject.toml`` (with the sequential gate ``gate``, or none)."""
    fam = out / "cases" / "mail"
    fam.mkdir(parents=True, exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY)
    (fam / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases(count)))
    table = f'[tool.tooleffect.gates."*"]\nsequential = {gate}\n' if gate else ""
    (out / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\n\n{table}")


def run(out: Path, name: str, agent: str, env: dict[str, str], *extra: str) -> tuple[dict[str, Any], float, str]:
    """One pytest run of ``agent`` (``decide`` or ``regressed``) as policy ``qwen``: its report, its wall
    seconds, its output (read back when the run's report and output are already in ``out``).
    """
    report = out / f"{name}.json"
    log = out / f"{name}.out"
    if report.exists() and log.exists():
        said = log.read_text()
        return json.loads(report.read_text()), float(said.split("\n", 1)[0].split()[-1]), said
    cmd = [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin",
           f"--tooleffect-agent={POLICY}=examples.sequential_local.agent:{agent}", "--tooleffect-concurrency=1",
           f"--tooleffect-records={name}.jsonl", f"--tooleffect-report={name}.json", *extra]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if not report.exists():
        raise SystemExit(f"{name}: no report written (exit {done.returncode}):\n{done.stdout[-3000:]}"
                         f"{done.stderr[-3000:]}")
    log.write_text(f"wall seconds {wall:.1f}\n{done.stdout}")
    return json.loads(report.read_text()), wall, done.stdout


def tooleffect(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """One ``tooleffect`` command in ``cwd``."""
    return subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def mcnemar_line(report: dict[str, Any]) -> str:
    """The fixed-n exact McNemar test on every pair of a full run, one-sided at ``alpha``: the shipped
    two-sided test at ``2 alpha`` with more regressions than improvements (docs/sequential.md).
    """
    m = report["baseline"]["blocks"][0]["mcnemar"]
    said = "regression" if m["b"] > m["c"] and m["p_value"] <= 2 * ALPHA else "no regression shown"
    return (f"fixed-n exact McNemar on all {sum(map(sum, m['table']))} pairs: two-sided p = {m['p_value']:.3g} "
            f"(pass->fail {m['b']}, fail->pass {m['c']}): {said} at one-sided alpha {ALPHA}")


def main(argv: list[str] | None = None) -> int:
    """The demonstration (exit 0 once every step is printed)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="reports/sequential-local", help="folder for the runs (resumed when present)")
    p.add_argument("--count", type=int, default=120, help="cases in the family (default 120)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--margin", type=float, default=0.05)
    p.add_argument("--effect", type=float, default=0.05)
    p.add_argument("--regression", type=float, default=0.10, help="the planted regression, in pass rate (0.10)")
    p.add_argument("--skip-full-regressed", action="store_true", help="leave out the regressed agent's full run")
    args = p.parse_args(argv)
    global ALPHA
    ALPHA = args.alpha
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from pytest_tooleffect.servers import local_model

    started = local_model.running() is None
    if started:
        local_model.serve(port=8089)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TOOLEFFECT_LOCAL_PRICE_IN": str(PRICE_IN), "TOOLEFFECT_LOCAL_PRICE_OUT": str(PRICE_OUT)}
    try:
        return _demo(args, out, env)
    finally:
        if started:
            local_model.stop()


def _demo(args: argparse.Namespace, out: Path, env: dict[str, str]) -> int:
    write_project(out, args.count, None)
    _, wall, _ = run(out, "baseline-run", "decide", env)
    if not (out / "baseline.json").exists():
        done = tooleffect("baseline", "save", "baseline-run.jsonl", "--out", "baseline.json", env=env, cwd=out)
        if done.returncode:
            raise SystemExit(done.stderr)
    baseline = json.loads((out / "baseline.json").read_text())
    verdicts = [d["passed"] for d in baseline["decisions"].values() if d.get("passed") is not None]
    rate = sum(verdicts) / len(verdicts)
    print(f"baseline: {len(verdicts)} decisions of the local model, {sum(verdicts)} passed ({rate:.1%}), "
          f"{wall:.0f} s")
    passing = sorted((d["case_id"] for d in baseline["decisions"].values() if d.get("passed")),
                     key=lambda c: hashlib.sha256(c.encode()).hexdigest())  # agent.case_hash
    chosen = passing[:round(args.regression * len(verdicts))]
    (out / "planted.txt").write_text("".join(f"{c}\n" for c in chosen))
    env = {**env, "TOOLEFFECT_PLANTED_CASES": str(out / "planted.txt")}
    on = ("--tooleffect-baseline=baseline.json",)
    full_u, wall_u, _ = run(out, "full-unchanged", "decide", env, *on)
    plan = tooleffect("plan", "baseline.json", "--repeats", "full-unchanged.jsonl", "--json", env=env, cwd=out)
    rows = json.loads(plan.stdout) if plan.returncode == 0 else []
    row: dict[str, Any] = next((r for r in rows if r.get("label_class") == "all"), {})
    d = (row.get("measured") or {}).get("rate")
    discordance = round(float(d), 4) if isinstance(d, (int, float)) else 0.0
    print(f"unchanged agent, full run: {mcnemar_line(full_u)}; {wall_u:.0f} s; tooleffect plan measures "
          f"D = {discordance} (the model's own run-to-run discordance)")
    gate = (f"{{alpha = {args.alpha}, margin = {args.margin}, effect = {args.effect}, "
            f"discordance = {discordance}}}")
    write_project(out, args.count, gate)
    print(f"gate: sequential = {gate}; planted: {len(chosen)} of the baseline's {sum(verdicts)} passing cases "
          f"(smallest SHA-256 of the case id), a {len(chosen) / len(verdicts):.1%} regression (planted.txt)")
    for agent, name in (("regressed", "seq-regressed"), ("decide", "seq-unchanged")):
        report, wall_s, said = run(out, name, agent, env, *on)
        for line in said.splitlines():
            if line.startswith(f"mail/{POLICY}: "):
                print(f"{name}: {line}")
        b = report["sequential"]["blocks"][0]
        print(f"{name}: {b['decisions_run']} decisions made of {args.count}, verdict {b['verdict']}, "
              f"{wall_s:.0f} s")
    write_project(out, args.count, None)
    if not args.skip_full_regressed:
        full_r, wall_r, _ = run(out, "full-regressed", "regressed", env, *on)
        print(f"regressed agent, full run: {mcnemar_line(full_r)}; {wall_r:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
