"""A whole BFCL multi-turn conversation in the pooled sandbox against BFCL executing the same
ground truth in-process, in one run.

For each conversation (the first ``--per-category`` of base, miss_param, miss_func and
long_context) one round times:

* **BFCL, in-process** (the peer): ``execute_multi_turn_func_call`` turn by turn, as BFCL's
  multi-turn checker executes the ground truth: its instances made from ``initial_config`` at
  the first turn (BFCL's reset) and kept between turns, then freed;
* **the bfcl world, in-process**: ``sandbox/worlds/bfcl.py`` on the same back-end classes
  (instances made from the seed, calls with keyword arguments, results as text), a snapshot of
  the instances' public state after every turn (what the state check compares);
* **the pooled Docker sandbox**: the same world in a warm container: reset over its unix socket
  to the seed, every call a request, a snapshot after every turn.

The figure is the median over rounds of each conversation's time, summed over conversations,
and the ratio sandbox / BFCL; the split (world in-process / BFCL, sandbox / world in-process)
says what the world's own bookkeeping costs and what isolation (a container behind a socket)
costs on top.  Runs in ``.venv-bfcl`` (``make bench-bfcl-multi-turn``), or with ``--cached``
with BFCL's files from the pinned wheel's cache.

    python bench/bfcl_multi_turn_speed.py [--per-category 10] [--rounds 5] [--cached]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(REPO))
if __name__ == "__main__" and "--cached" in sys.argv:  # BFCL's files from the pinned wheel
    from pytest_tooleffect.sandbox.bfcl_source import activate

    sys.path.insert(0, str(activate()))

from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402

from pytest_tooleffect.data.importers.bfcl_multi_turn import MULTI_TURN, parse_call  # noqa: E402
from pytest_tooleffect.sandbox.docker import DockerProvider  # noqa: E402
from pytest_tooleffect.sandbox.environment import World  # noqa: E402
from pytest_tooleffect.sandbox.local import load_service  # noqa: E402

Conversation = tuple[str, str, dict[str, Any], list[list[str]], list[list[tuple[str, dict[str, Any]]]]]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def conversations(per_category: int, world: Any) -> list[Conversation]:
    """``(category, id, entry, ground truth as strings, ground truth as (name, arguments))`` each."""
    out: list[Conversation] = []
    source = SHARED / "datasets" / "bfcl"
    for category, (data_file, answer_file) in MULTI_TURN.items():
        answers = {a["id"]: a["ground_truth"] for a in _jsonl(source / answer_file)}
        for n, entry in enumerate(_jsonl(source / data_file)):
            if n >= per_category:
                break
            signatures = {m: inspect.signature(f) for c in entry["involved_classes"]
                          for m, f in world.methods(world.load_class(c)).items()}
            truth = answers[entry["id"]]
            out.append((category, entry["id"], entry, truth,
                        [[parse_call(c, signatures) for c in turn] for turn in truth]))
    return out


def seed(category: str, entry: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The bfcl world's seed rows of an entry (as the importer writes them)."""
    config = entry.get("initial_config") or {}
    classes = [{"class": c, "config": config.get(c, {})} for c in entry["involved_classes"]]
    if "long_context" in category:
        classes.append({"class": "$long_context", "config": True})
    return {"classes": classes, "history": []}


def bfcl_run(conv: Conversation, n: int) -> None:
    """BFCL's executor on the ground truth, turn by turn (its instances freed after)."""
    category, cid, entry, truth, _ = conv
    model = f"speed{n}_"
    try:
        for turn in truth:
            multi_turn_utils.execute_multi_turn_func_call(turn, entry.get("initial_config") or {},
                                                          entry["involved_classes"], model, cid,
                                                          long_context="long_context" in category, is_evaL_run=True)
    finally:
        for name in [k for k in vars(multi_turn_utils) if k.startswith(model)]:
            delattr(multi_turn_utils, name)


def world_run(conv: Conversation, world: Any) -> None:
    """The bfcl world in-process: instances from the seed, the calls, a snapshot per turn."""
    category, _, entry, _, calls = conv
    state = world.ObjectWorld(seed(category, entry))
    for turn in calls:
        for name, args in turn:
            state.call(name, dict(args))
        state.snapshot()


def sandbox_run(conv: Conversation, box: Any) -> None:
    """The pooled sandbox: reset to the seed over the socket, the calls, a snapshot per turn."""
    category, _, entry, _, calls = conv
    box.reset(World("bfcl", seed(category, entry), {}, None))
    for turn in calls:
        for name, args in turn:
            box.call(name, dict(args))
        box.snapshot()


def timed(fn: Callable[..., None], *args: Any) -> float:
    """Wall time of ``fn(*args)`` in milliseconds."""
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    """Time every conversation three ways per round; print the medians and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-category", type=int, default=10, help="conversations per category")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the median of each conversation's times)")
    parser.add_argument("--cached", action="store_true", help="BFCL's files from the pinned wheel's cache")
    args = parser.parse_args()
    world = load_service().load_world("bfcl")
    convs = conversations(args.per_category, world)
    provider = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=True)
    provider.session_init()
    times: dict[str, list[list[float]]] = {k: [[] for _ in convs] for k in ("bfcl", "world", "sandbox")}
    try:
        box = provider.item_init(World("bfcl", seed(convs[0][0], convs[0][2]), {}, None), "bench")
        for i, conv in enumerate(convs):  # warm-up: imports, the long-context data, the container's caches
            bfcl_run(conv, -1 - i)
            world_run(conv, world)
            sandbox_run(conv, box)
        for r in range(args.rounds):
            for i, conv in enumerate(convs):  # the three take turns on each conversation
                times["bfcl"][i].append(timed(bfcl_run, conv, r * len(convs) + i))
                times["world"][i].append(timed(world_run, conv, world))
                times["sandbox"][i].append(timed(sandbox_run, conv, box))
        calls = sum(len(t) for c in convs for t in c[4])
        turns = sum(len(c[4]) for c in convs)
        provider.item_cleanup(box, interrupted=False, keep=False)
    finally:
        provider.session_cleanup()
    total = {k: sum(statistics.median(per) for per in v) for k, v in times.items()}
    print(f"BFCL multi-turn, {len(convs)} conversations ({args.per_category} per category; {turns} turns, "
          f"{calls} ground-truth calls), median of {args.rounds} rounds per conversation, summed:")
    labels = {"bfcl": "BFCL in-process (execute_multi_turn_func_call)",
              "world": "bfcl world in-process (+ snapshot per turn)",
              "sandbox": "pooled Docker sandbox (reset + calls + snapshots)"}
    print(f"{'':52}{'total ms':>10}{'ms/conv':>10}{'ms/call':>10}")
    for key, label in labels.items():
        print(f"{label:52}{total[key]:>10.1f}{total[key] / len(convs):>10.2f}{total[key] / calls:>10.3f}")
    by_category: dict[str, list[float]] = {}
    for i, conv in enumerate(convs):
        by_category.setdefault(conv[0], []).append(statistics.median(times["sandbox"][i])
                                                   / statistics.median(times["bfcl"][i]))
    print("sandbox / BFCL per conversation, median by category: "
          + ", ".join(f"{c.removeprefix('multi_turn_')} {statistics.median(v):.1f}x" for c, v in by_category.items()))
    print(f"ratio sandbox / BFCL: {total['sandbox'] / total['bfcl']:.1f}x (the world's own bookkeeping: "
          f"{total['world'] / total['bfcl']:.1f}x; isolation on top of it: {total['sandbox'] / total['world']:.1f}x, "
          f"{(total['sandbox'] - total['world']) / len(convs):.1f} ms a conversation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
