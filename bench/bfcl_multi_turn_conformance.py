"""Hold the multi-turn effect judgement against BFCL's own multi-turn checker: agreement matrix.

Runs in the environment that has bfcl-eval installed without its dependencies (``make
bfcl-multi-turn`` builds ``.venv-bfcl``; ``mpmath`` is added for BFCL's MathAPI), or, with
``--cached``, with BFCL's checker files kept from the same pinned wheel by
``pytest_tooleffect.sandbox.bfcl_source`` (what the test suite uses on a sample).  For every
multi-turn entry (base, miss_param, miss_func, long_context: 800 conversations) it generates
trajectories systematically: the ground truth itself (one call per step, and all of a turn's
calls in one step), then perturbations: a call dropped, a call added (the turn's last call
again), an argument changed, a turn's calls reordered, a call made at a turn whose ground truth
is ``[]``, the missing function called early (miss_func: the call BFCL's ground truth makes once
the function is offered, made at the turn before instead), and an extra read-only call.

Each trajectory is scored twice:

* by BFCL: ``multi_turn_checker`` (the check ``eval_runner`` applies to multi-turn entries), its
  instances made by BFCL's own executor from the call strings;
* by this project: the ``bfcl`` sandbox world (``sandbox/worlds/bfcl.py``, the same back-end
  classes, called with keyword arguments parsed from the strings), snapshots compared with the
  oracle's ``diff_worlds`` and the turns judged by ``oracle.conversation.judge_conversation``,
  once with ``no_tool_turns="bfcl"`` (must agree with BFCL everywhere) and once as the plugin
  scores (``"decision"``: a call at a ``[]`` turn fails; the deliberate difference, counted).

Prints the agreement matrix per perturbation and lists every unexplained disagreement (none is
the target).  Exit status 1 when any is unexplained.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(REPO))
from results import emit  # noqa: E402 - bench/results.py: this folder is on sys.path

if __name__ == "__main__" and "--cached" in sys.argv:  # BFCL's checker from the pinned wheel's files
    from pytest_tooleffect.sandbox.bfcl_source import activate

    sys.path.insert(0, str(activate()))

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402

from pytest_tooleffect.data.importers.bfcl_multi_turn import MULTI_TURN, parse_call  # noqa: E402
from pytest_tooleffect.oracle.conversation import TurnCheck, judge_conversation  # noqa: E402
from pytest_tooleffect.oracle.effects import diff_worlds  # noqa: E402
from pytest_tooleffect.sandbox.local import load_service  # noqa: E402

Trajectory = list[list[list[str]]]  # turn → step → call strings
READ_PREFIXES = ("get_", "view_", "list_", "display", "pwd", "check_", "search_")


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _steps(turns: list[list[str]]) -> Trajectory:
    return [[[c] for c in turn] for turn in turns]


def _first(turns: list[list[str]], at_least: int = 1) -> int | None:
    return next((i for i, t in enumerate(turns) if len(t) >= at_least), None)


def _changed_arg(call: str) -> str | None:
    import ast

    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call)
    for holder in [*node.keywords, *node.args]:
        value = holder.value if isinstance(holder, ast.keyword) else holder
        if isinstance(value, ast.Constant):
            if isinstance(value.value, bool):
                value.value = not value.value
            elif isinstance(value.value, int | float):
                value.value = value.value + 1
            elif isinstance(value.value, str):
                value.value = value.value + "_x"
            else:
                continue
            return ast.unparse(node)
    return None


def perturbations(entry: dict[str, Any], truth: list[list[str]], world: Any) -> dict[str, Trajectory]:
    """The trajectories of one entry, by perturbation name (a perturbation that does not apply
    to the entry is left out)."""
    out: dict[str, Trajectory] = {"ground_truth": _steps(truth),
                                  "ground_truth_one_step": [[list(t)] if t else [] for t in truth]}
    i = _first(truth)
    if i is not None:
        turns = copy.deepcopy(truth)
        turns[i] = turns[i][:-1]
        out["call_dropped"] = _steps(turns)
        turns = copy.deepcopy(truth)
        turns[i] = [*turns[i], turns[i][-1]]
        out["call_added"] = _steps(turns)
        for k, call in enumerate(truth[i]):
            changed = _changed_arg(call)
            if changed is not None:
                turns = copy.deepcopy(truth)
                turns[i][k] = changed
                out["argument_changed"] = _steps(turns)
                break
        reads = [m for c in entry["involved_classes"]
                 for m, f in world.methods(world.load_class(c)).items()
                 if m.startswith(READ_PREFIXES) and not [p for p in inspect.signature(f).parameters.values()
                                                        if p.name != "self" and p.default is inspect.Parameter.empty]]
        if reads:
            turns = copy.deepcopy(truth)
            turns[i] = [*turns[i], f"{sorted(reads)[0]}()"]
            out["extra_read"] = _steps(turns)
    j = _first(truth, 2)
    if j is not None:
        turns = copy.deepcopy(truth)
        turns[j] = list(reversed(turns[j]))
        out["calls_reordered"] = _steps(turns)
    empty = next((t for t, calls in enumerate(truth) if not calls), None)
    later = next((t for t in range(empty + 1, len(truth)) if truth[t]), None) if empty is not None else None
    if empty is not None and later is not None:
        turns = copy.deepcopy(truth)
        turns[empty] = [truth[later][0]]
        out["call_at_empty_turn"] = _steps(turns)
        if entry.get("missed_function"):
            missed = {n for names in entry["missed_function"].values() for n in names}
            k = next((k for k, c in enumerate(truth[later]) if c.split("(")[0].strip() in missed), None)
            if k is not None:
                turns = copy.deepcopy(truth)
                turns[empty] = [truth[later][k]]
                turns[later] = [c for n, c in enumerate(truth[later]) if n != k]
                out["missing_function_early"] = _steps(turns)
    return out


def bfcl_verdict(entry: dict[str, Any], truth: list[list[str]], trajectory: Trajectory, category: str,
                 model: str) -> bool:
    """BFCL's multi-turn checker on the decoded trajectory (its executor's instances freed after)."""
    try:
        return bool(multi_turn_checker(trajectory, truth, copy.deepcopy(entry), category, model)["valid"])
    finally:
        for name in [n for n in vars(multi_turn_utils) if n.startswith(model)]:
            delattr(multi_turn_utils, name)


def our_verdict(entry: dict[str, Any], truth: list[list[str]], trajectory: Trajectory, category: str,
                world: Any, mode: str) -> tuple[bool, str]:
    """The project's judgement: the bfcl world run on both trajectories, turns judged."""
    seed = [{"class": c, "config": (entry.get("initial_config") or {}).get(c, {})} for c in entry["involved_classes"]]
    if "long_context" in category:
        seed.append({"class": "$long_context", "config": True})
    agent = world.ObjectWorld({"classes": seed, "history": []})
    reference = world.ObjectWorld({"classes": seed, "history": []})
    signatures = {m: inspect.signature(f) for c in entry["involved_classes"]
                  for m, f in world.methods(world.load_class(c)).items()}
    layout = world.TABLES

    def run(target: Any, call: str) -> str:
        try:
            name, args = parse_call(call, signatures)
        except ValueError as exc:
            return f"Error during execution: {exc}"
        return str(target.call(name, args)[0])

    checks = []
    for turn, gt_calls in enumerate(truth):
        results = tuple(run(agent, c) for step in trajectory[turn] for c in step)
        expected = tuple(run(reference, c) for c in gt_calls)
        diff = diff_worlds(reference.snapshot(), agent.snapshot(), layout) if gt_calls else {}
        checks.append(TurnCheck(turn, expected, results, diff))
    verdict = judge_conversation(checks, no_tool_turns=mode)  # type: ignore[arg-type]
    return verdict.passed, verdict.kind


def main(argv: list[str] | None = None) -> int:
    """Score every entry's trajectories both ways; print the agreement matrix."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=None, help="entries per category (default all)")
    parser.add_argument("--category", action="append", choices=list(MULTI_TURN))
    parser.add_argument("--cached", action="store_true",
                        help="import BFCL's checker from the pinned wheel's files in the cache (no .venv-bfcl)")
    args = parser.parse_args(argv)
    world = load_service().load_world("bfcl")
    source = SHARED / "datasets" / "bfcl"
    matrix: dict[str, Counter[str]] = defaultdict(Counter)
    deliberate: Counter[str] = Counter()
    unexplained: list[str] = []
    start = time.perf_counter()
    n = 0
    for category in args.category or list(MULTI_TURN):
        data_file, answer_file = MULTI_TURN[category]
        answers = {a["id"]: a["ground_truth"] for a in _jsonl(source / answer_file)}
        for count, entry in enumerate(_jsonl(source / data_file)):
            if args.limit is not None and count >= args.limit:
                break
            truth = answers[entry["id"]]
            for name, trajectory in perturbations(entry, truth, world).items():
                n += 1
                theirs = bfcl_verdict(entry, truth, trajectory, category, f"conf{n}_")
                ours, kind = our_verdict(entry, truth, trajectory, category, world, "bfcl")
                plugin, plugin_kind = our_verdict(entry, truth, trajectory, category, world, "decision")
                cell = {(True, True): "both pass", (False, False): "both fail",
                        (True, False): "BFCL pass, ours fail", (False, True): "BFCL fail, ours pass"}[(theirs, ours)]
                matrix[name][cell] += 1
                if theirs != ours:
                    unexplained.append(f"{entry['id']} {name}: BFCL {'pass' if theirs else 'fail'}, ours "
                                       f"{'pass' if ours else 'fail'} ({kind})")
                if plugin != ours:
                    deliberate[f"{name}: {plugin_kind}"] += 1
    cells = ["both pass", "both fail", "BFCL pass, ours fail", "BFCL fail, ours pass"]
    print(f"BFCL multi-turn conformance: {n} trajectories in {time.perf_counter() - start:.1f} s")
    print(f"{'perturbation':<24}" + "".join(f"{c:>22}" for c in cells))
    for name, counts in matrix.items():
        print(f"{name:<24}" + "".join(f"{counts[c]:>22}" for c in cells))
    total = Counter[str]()
    for counts in matrix.values():
        total.update(counts)
    agree = total["both pass"] + total["both fail"]
    print(f"{'all':<24}" + "".join(f"{total[c]:>22}" for c in cells))
    print(f"agreement (no_tool_turns=bfcl): {agree}/{n}; unexplained disagreements: {len(unexplained)}")
    print("deliberate difference, as the plugin scores (a call at a turn whose ground truth is [] fails): "
          f"{sum(deliberate.values())} trajectories BFCL passes")
    for key, count in sorted(deliberate.items()):
        print(f"  {key}: {count}")
    for line in unexplained[:40]:
        print("UNEXPLAINED", line)
    emit("BFCL multi-turn conformance: unexplained disagreements", f"BFCL's multi-turn checker, {n} trajectories",
         len(unexplained), "== 0", f"agreement {agree}/{n}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())

