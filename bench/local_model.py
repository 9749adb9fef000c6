"""The harness against a real model: llama.cpp's ``llama-server`` with Qwen2.5-Coder-0.5B-Instruct.

Against the server ``tooleffect model serve`` started (``make bench-local`` starts it), on the
first N cases of the shipped ``scheduling`` and ``tau-airline`` families, in one run:

* **the server alone** (its physical limit here): the same N requests sent one after another
  with a bare HTTP client, no harness;
* **the harness**: ``pytest`` with a policy pointing at the server (collection, decisions,
  scoring, records and report included);
* **inspect-ai** (its own environment, ``.venv-inspect``) through its OpenAI-compatible
  provider: the same N requests as samples (bench/inspect_throughput.py);
* **the prefix cache**: decisions per minute when the cases are ordered so that consecutive
  requests share their prefix (family by family: one system prompt and tool list) against
  interleaved families (every request's prefix differs from the one before), the server alone.

Every request carries the same ``max_tokens`` cap and ``temperature 0``, so the three paths ask
for the same work.  Printed: wall seconds, decisions per minute, ours / server-alone and
inspect-ai / server-alone, and grouped / interleaved for the prefix cache.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from results import emit  # noqa: E402 - bench/results.py: this folder is on sys.path

from pytest_tooleffect.collect.cases import load_case_file  # noqa: E402
from pytest_tooleffect.collect.family import is_case_file, load_family  # noqa: E402
from pytest_tooleffect.decide.model_turn import build_request  # noqa: E402
from pytest_tooleffect.formats import Policy  # noqa: E402
from pytest_tooleffect.servers import local_model as localmodel  # noqa: E402


def load_family_cases(directory: Path) -> tuple[Any, list[Any]]:
    """A family and its cases, in file order."""
    family = load_family(directory)
    referenced = family.referenced_files
    cases: list[Any] = []
    for path in sorted(directory.iterdir()):
        if path.is_file() and is_case_file(path, referenced):
            cases += load_case_file(path, family)[0]
    return family, cases


def _requests(families: list[str], n: int, model: str, max_tokens: int) -> list[tuple[str, dict[str, Any]]]:
    """The first ``n`` cases of each family as OpenAI chat bodies: ``(family, body)``."""
    out = []
    policy = Policy(name="bench", model=f"openai/{model}", temperature=0.0, max_tokens=max_tokens)
    for name in families:
        family, cases = load_family_cases(REPO / "cases" / name)
        for case in cases[:n]:
            kwargs, _ = build_request(case, family.tools, family.system_prompt, policy)
            body = {k: v for k, v in kwargs.items() if k in ("messages", "tools", "temperature", "max_tokens")}
            out.append((name, {"model": model, **body}))
    return out


def _post(base: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(f"{base}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as resp:  # noqa: S310 - 127.0.0.1 only
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


def alone(base: str, bodies: list[dict[str, Any]]) -> float:
    """Wall seconds for the bodies sent one after another, no harness."""
    t0 = time.perf_counter()
    for body in bodies:
        _post(base, body)
    return time.perf_counter() - t0


def _interleave(reqs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    by_family: dict[str, list[dict[str, Any]]] = {}
    for fam, body in reqs:
        by_family.setdefault(fam, []).append(body)
    lists = list(by_family.values())
    return [lst[i] for i in range(max(map(len, lists))) for lst in lists if i < len(lst)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=4, help="cases per family (default 4)")
    ap.add_argument("--max-tokens", type=int, default=384,
                    help="the output cap of every request (default 384, the local-qwen policy's)")
    ap.add_argument("--inspect-python", type=Path, default=REPO / ".venv-inspect" / "bin" / "python")
    args = ap.parse_args()
    server = localmodel.running()
    if server is None:
        sys.exit("no local model server is running: `tooleffect model serve --detach` (make bench-local does it)")
    families = ["scheduling", "tau-airline"]
    reqs = _requests(families, args.cases, server.model, args.max_tokens)
    n = len(reqs)
    grouped = [b for _, b in reqs]
    _post(server.api_base, grouped[0])  # warm: weights paged in, the first prefix cached

    t_grouped = alone(server.api_base, grouped)
    t_mixed = alone(server.api_base, _interleave(reqs))

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for fam in families:
            src = REPO / "cases" / fam
            dst = root / "cases" / fam
            dst.mkdir(parents=True)
            for f in src.iterdir():
                if f.is_file():
                    (dst / f.name).write_bytes(f.read_bytes())
        (root / "pyproject.toml").write_text(
            f'[tool.tooleffect.policies.local-qwen]\nmodel = "openai/{server.model}"\n'
            f'api_base = "{server.api_base}"\ntemperature = 0.0\nmax_tokens = {args.max_tokens}\n'
            "timeout_s = 1800\n")
        # the repo's conftest registers the scheduling rules' callable predicate (working_hours):
        # without it the family is refused at load
        (root / "conftest.py").write_bytes((REPO / "conftest.py").read_bytes())
        for oracle in (REPO / "oracle").glob("*.yaml"):
            (root / "oracle").mkdir(exist_ok=True)
            (root / "oracle" / oracle.name).write_bytes(oracle.read_bytes())
        ids = [f"cases/{fam}" for fam in families]
        keep = " or ".join(body_id for body_id in _ids(families, args.cases))
        t0 = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "pytest", *ids, "-q", "-p", "no:cacheprovider", "-k", keep,
                              "--tooleffect-policy=local-qwen", "--tooleffect-sandbox=off", "--tooleffect-records=",
                              "--tb=no", "-rN"], cwd=root, capture_output=True, text=True, check=False)
        t_ours = time.perf_counter() - t0
        outcomes = _outcomes(run.stdout)
        decided = sum(outcomes.get(k, 0) for k in ("passed", "failed", "xfailed", "xpassed"))
        if decided != n or outcomes.get("errors") or outcomes.get("error"):
            sys.exit(f"the harness made {decided} decisions of {n} ({outcomes}): the comparison would be void\n"
                     f"{run.stdout[-2000:]}{run.stderr[-2000:]}")
        (root / "requests.json").write_text(json.dumps(grouped))
        inspect: tuple[float, str] | str
        if args.inspect_python.is_file():
            t0 = time.perf_counter()
            proc = subprocess.run([str(args.inspect_python), str(REPO / "bench" / "inspect_throughput.py"),
                                   str(root / "requests.json"), "--base-url", server.api_base, "--concurrency", "1",
                                   "--timeout", "1800", "--max-tokens", str(args.max_tokens), "--model",
                                   server.model], capture_output=True, text=True, check=False)
            inspect = (time.perf_counter() - t0, proc.stdout.strip()[-300:]) if proc.returncode == 0 else \
                f"exited {proc.returncode}: {proc.stderr[-500:]}"
            if not isinstance(inspect, str):
                done = json.loads(proc.stdout.strip().splitlines()[-1])
                if done.get("samples") != n or done.get("errors"):
                    inspect = f"inspect-ai completed {done.get('samples')} samples of {n}, errors {done.get('errors')}"
        else:
            inspect = f"{args.inspect_python} not found (make bench-local installs it)"

    def per_min(t: float) -> float:
        return n / t * 60

    print(f"{n} decisions ({args.cases} per family: {', '.join(families)}), max_tokens {args.max_tokens}, "
          f"{server.model} on llama-server pid {server.pid}")
    print(f"server alone (grouped):   {t_grouped:7.1f} s  {per_min(t_grouped):6.2f} decisions/min  (the limit)")
    print(f"harness (pytest):         {t_ours:7.1f} s  {per_min(t_ours):6.2f} decisions/min  "
          f"ours / limit {t_ours / t_grouped:.2f}")
    if isinstance(inspect, str):
        print(f"inspect-ai: not run: {inspect}")
    else:
        print(f"inspect-ai:               {inspect[0]:7.1f} s  {per_min(inspect[0]):6.2f} decisions/min  "
              f"inspect-ai / limit {inspect[0] / t_grouped:.2f}   ours / inspect-ai {t_ours / inspect[0]:.2f}")
    emit(f"local model, {n} decisions: harness wall", "llama-server alone (grouped requests)", t_ours / t_grouped,
         "<= 1.2", f"{t_ours:.1f} s against {t_grouped:.1f} s")
    if not isinstance(inspect, str):
        emit(f"local model, {n} decisions: harness wall", "inspect-ai on the same server and cases",
             t_ours / inspect[0], "<= 1", f"{t_ours:.1f} s against {inspect[0]:.1f} s")
    print(f"prefix cache: interleaved {t_mixed:7.1f} s  {per_min(t_mixed):6.2f} decisions/min; grouped / interleaved "
          f"decisions per minute {t_mixed / t_grouped:.2f}")


def _outcomes(stdout: str) -> dict[str, int]:
    """pytest's closing counts (``3 failed, 5 passed in 9.1s`` → ``{"failed": 3, "passed": 5}``)."""
    last = next((line for line in reversed(stdout.splitlines()) if " in " in line and line.strip()), "")
    return {word: int(count) for count, word in re.findall(r"(\d+) (\w+)", last.split(" in ")[0])}


def _ids(families: list[str], n: int) -> list[str]:
    out = []
    for name in families:
        _, cases = load_family_cases(REPO / "cases" / name)
        out += [c.id for c in cases[:n]]
    return out


if __name__ == "__main__":
    main()
