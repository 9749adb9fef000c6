"""Sandbox provisioning per item: a warm pooled container reset over its stream (``docker exec -i``
of the service's relay, through the engine's API), against a fresh container per item (the peer),
in one run against the real Docker engine; the pooled run is repeated with the engine reached as a
remote one is (its API on a TCP port of 127.0.0.1, ``scripts/docker-tcp``).

Per item we time what an item waits for before its first tool call (``item_init``: take a
container and reset its world to the case's seed rows) and what it costs after (``item_cleanup``:
back to the pool, or remove the container).  A ``docker exec`` of ``true`` in a running
container is timed too, as the floor of any reset done from outside the service.

Target (issue #4): pooled p50 at least 10x faster than fresh, and under 20 ms.

The MCP world (issue #44) is measured the same way on the shipped mcp-git family's states:
pooled, a reset restores the state's snapshot of the generated repository in the warm container
(mcp-server-git keeps running); fresh, each item starts a container, the server, and builds the
repository.  Target: pooled p50 under 20 ms.

    python bench/sandbox.py [--items 60] [--fresh-items 20] [--no-tcp] [--no-mcp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402
from results import emit  # noqa: E402 - bench/results.py: this folder is on sys.path

from pytest_tooleffect.sandbox.docker import DockerProvider  # noqa: E402
from pytest_tooleffect.sandbox.environment import World  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def quantile(values: list[float], q: float) -> float:
    """The q-quantile, q in hundredths (statistics.quantiles, inclusive: numpy's default method)."""
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def worlds() -> list[World]:
    """The shipped scheduling cases' worlds (their seed rows and time zones)."""
    cases = yaml.safe_load((REPO / "cases" / "scheduling" / "cases.yaml").read_text())
    return [World("scheduling", c["world"], {}, c.get("timezone")) for c in cases]


def mcp_worlds() -> list[World]:
    """The shipped mcp-git cases' worlds (the family's generated repository and each case's steps)."""
    from pytest_tooleffect.formats import Family
    from pytest_tooleffect.sandbox.mcp_world import world_rows

    family = Family.model_validate(yaml.safe_load((REPO / "cases" / "mcp-git" / "family.yaml").read_text()))
    assert family.sandbox is not None and family.sandbox.mcp is not None
    cases = yaml.safe_load((REPO / "cases" / "mcp-git" / "cases.yaml").read_text())
    return [World("mcp", world_rows(family.sandbox.mcp, c["world"])) for c in cases]


def first_call(world: World) -> tuple[str, dict[str, object]]:
    """A read-only call that fits the world (a scheduling thread read, or git_status)."""
    if world.name == "mcp":
        return "git_status", {"repo_path": "/repo"}
    return "read_thread", {"thread_id": world.rows["threads"][0]["thread_id"]}


def run(provider: DockerProvider, items: list[World]) -> tuple[list[float], list[float]]:
    """Provision, use and release one sandbox per item; returns init and cleanup times (ms)."""
    init, cleanup = [], []
    for n, world in enumerate(items):
        t0 = time.perf_counter()
        box = provider.item_init(world, f"item-{n}")
        t1 = time.perf_counter()
        box.call(*first_call(world))
        t2 = time.perf_counter()
        provider.item_cleanup(box, interrupted=False, keep=False)
        t3 = time.perf_counter()
        init.append((t1 - t0) * 1000)
        cleanup.append((t3 - t2) * 1000)
    return init, cleanup


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=60, help="items through the pooled provider")
    parser.add_argument("--fresh-items", type=int, default=20, help="items through fresh containers")
    parser.add_argument("--no-tcp", action="store_true", help="skip the pooled run over the TCP endpoint")
    parser.add_argument("--no-mcp", action="store_true", help="skip the MCP world (mcp-git) runs")
    parser.add_argument("--mcp-fresh-items", type=int, default=5, help="MCP items through fresh containers")
    args = parser.parse_args()
    available = worlds()
    pooled_items = [available[i % len(available)] for i in range(args.items)]
    fresh_items = [available[i % len(available)] for i in range(args.fresh_items)]

    pooled = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=True)
    pooled.session_init()
    warm = pooled.item_init(pooled_items[0], "warm-up")  # the pool's first start is not per-item cost
    pooled.item_cleanup(warm, interrupted=False, keep=False)
    try:
        p_init, p_clean = run(pooled, pooled_items)
        container = pooled.client.containers.get(pooled.containers()[0])
        execs = []
        for _ in range(10):
            t0 = time.perf_counter()
            container.exec_run(["true"])
            execs.append((time.perf_counter() - t0) * 1000)
    finally:
        pooled.session_cleanup()
    fresh = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=False)
    fresh.session_init()
    try:
        f_init, f_clean = run(fresh, fresh_items)
    finally:
        fresh.session_cleanup()
    t_init: list[float] = []
    if not args.no_tcp:
        endpoint = subprocess.Popen([sys.executable, str(REPO / "scripts" / "docker-tcp")], stdout=subprocess.PIPE,
                                    text=True)
        assert endpoint.stdout is not None
        os.environ["DOCKER_HOST"] = endpoint.stdout.readline().strip()
        remote = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=True)
        try:
            remote.session_init()
            warm = remote.item_init(pooled_items[0], "warm-up")
            remote.item_cleanup(warm, interrupted=False, keep=False)
            t_init, _ = run(remote, pooled_items)
        finally:
            remote.session_cleanup()
            del os.environ["DOCKER_HOST"]
            endpoint.terminate()
            endpoint.wait()

    print(f"sandbox provisioning per item, {len(p_init)} pooled items and {len(f_init)} fresh-container items "
          f"(scheduling worlds, Docker {pooled.client.version()['Version']}):")
    print(f"{'':30}{'p50 ms':>10}{'p95 ms':>10}")
    for label, values in (("pooled: take + reset", p_init), ("pooled: give back", p_clean),
                          ("fresh: start + ready + reset", f_init), ("fresh: remove", f_clean),
                          ("docker exec true", execs),
                          *([("pooled over tcp: take + reset", t_init)] if t_init else [])):
        print(f"{label:30}{quantile(values, 0.5):>10.1f}{quantile(values, 0.95):>10.1f}")
    ratio = statistics.median(f_init) / statistics.median(p_init)
    total = (statistics.median(f_init) + statistics.median(f_clean)) / (statistics.median(p_init)
                                                                          + statistics.median(p_clean))
    print(f"ratio fresh / pooled p50 (provisioning): {ratio:.0f}x (target >= 10x); with cleanup: {total:.0f}x")
    print(f"pooled p50 {statistics.median(p_init):.1f} ms (target < 20 ms)")
    if t_init:
        print(f"ratio fresh / pooled-over-tcp p50: {statistics.median(f_init) / statistics.median(t_init):.0f}x; "
              f"pooled over tcp p50 {statistics.median(t_init):.1f} ms")
    emit("sandbox provisioning per item (p50)", "a fresh container per item (p50)", ratio, ">= 10",
         f"fresh / pooled; pooled p50 {statistics.median(p_init):.1f} ms")
    emit("sandbox provisioning per item, pooled p50 (ms)", "limit 20 ms", statistics.median(p_init) / 20, "< 1",
         f"{statistics.median(p_init):.1f} ms")
    if not args.no_mcp:
        mcp_rows(args.items, args.mcp_fresh_items)
    return 0


def mcp_rows(items: int, fresh_items: int) -> None:
    """The MCP world's pooled reset (a snapshot restored) against a fresh container per item."""
    available = mcp_worlds()
    pooled = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=True)
    pooled.session_init()
    try:
        warm = pooled.item_init(available[0], "warm-up")  # the container and the server start once
        pooled.item_cleanup(warm, interrupted=False, keep=False)
        seeds = {repr(w.rows["setup"]): w for w in available}
        t0 = time.perf_counter()
        for n, world in enumerate(seeds.values()):  # each state's snapshot is built once per container
            box = pooled.item_init(world, f"snapshot-{n}")
            pooled.item_cleanup(box, interrupted=False, keep=False)
        built = (time.perf_counter() - t0) * 1000 / len(seeds)
        p_init, p_clean = run(pooled, [available[i % len(available)] for i in range(items)])
    finally:
        pooled.session_cleanup()
    fresh = DockerProvider(uuid.uuid4().hex, os.getpid(), "bench", pool=False)
    fresh.session_init()
    try:
        f_init, f_clean = run(fresh, [available[i % len(available)] for i in range(fresh_items)])
    finally:
        fresh.session_cleanup()
    print(f"MCP world (mcp-server-git over the mcp-git family's {len(seeds)} repository states), {len(p_init)} "
          f"pooled items and {len(f_init)} fresh-container items:")
    print(f"{'':42}{'p50 ms':>10}{'p95 ms':>10}")
    for label, values in (("mcp pooled: take + reset (snapshot)", p_init), ("mcp pooled: give back", p_clean),
                          ("mcp fresh: start + server + build", f_init), ("mcp fresh: remove", f_clean)):
        print(f"{label:42}{quantile(values, 0.5):>10.1f}{quantile(values, 0.95):>10.1f}")
    print(f"a state's snapshot built once per container: {built:.0f} ms on average")
    ratio = statistics.median(f_init) / statistics.median(p_init)
    print(f"ratio fresh / pooled p50 (MCP world): {ratio:.0f}x; pooled p50 {statistics.median(p_init):.1f} ms "
          "(target <= 20 ms)")
    emit("MCP world reset per item (p50)", "a fresh container + server per item (p50)", ratio, ">= 10",
         f"fresh / pooled; pooled p50 {statistics.median(p_init):.1f} ms")
    emit("MCP world reset per item, pooled p50 (ms)", "limit 20 ms", statistics.median(p_init) / 20, "<= 1",
         f"{statistics.median(p_init):.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
