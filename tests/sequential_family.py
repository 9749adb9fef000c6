"""A family of many small cases for the sequential gate's tests, and agents that answer them.

Each case asks either for ``read_thread`` (class ``single``) or for no call (class ``no_tool``).
An agent is a set of case numbers it gets wrong; :func:`answer` says what it emits on a case, so one
agent can be replayed (its answers written as the cases' ``recorded`` decisions) or served as a model
(the scripted server answers each request by the case number in its message).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.servers.scripted import Reply
from tests.demo_family import FAMILY, RULES

READ = {"tool": "read_thread", "args": {"thread_id": "th-1"}}
NULL = {"tool": None, "reason": "nothing to do"}
_MARK = re.compile(r"\[case-(\d+)\]")


def single(n: int) -> bool:
    """Case ``n`` needs ``read_thread`` (two in three cases); the rest need no call."""
    return n % 3 != 0


def cases(count: int, recorded: set[int] | None = None) -> list[dict[str, Any]]:
    """``count`` cases; with ``recorded`` (the numbers the agent gets wrong), each case's recorded decision."""
    out = []
    for n in range(count):
        c: dict[str, Any] = {
            "id": f"case-{n:04d}", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
            "timezone": "Europe/Madrid", "messages": [{"role": "user", "content": f"[case-{n}] please help"}],
            "label": {"valid_actions": [READ if single(n) else NULL]}, "source": "authored"}
        if recorded is not None:
            c["recorded"] = _recorded(n, n not in recorded)
        out.append(c)
    return out


def _recorded(n: int, right: bool) -> dict[str, Any]:
    calls = single(n) == right  # a single case done right, or a no-tool case done wrong, calls the tool
    return {"tool_calls": [{"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}] if calls else [],
            "text": None if calls else "Done."}


def write_family(root: Path, count: int, wrong: set[int] | None = None) -> None:
    """The family ``demo`` under ``root/cases`` (its oracle rules under ``root/oracle``)."""
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True, exist_ok=True)
    (root / "oracle").mkdir(exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY)
    (root / "oracle" / "demo.yaml").write_text(RULES)
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases(count, wrong)) + "\n")


def agents(count: int, seed: int = 45, fail: float = 0.2, regress: float = 0.10, flip: float = 0.02
           ) -> dict[str, set[int]]:
    """Three agents, as the case numbers each gets wrong.

    - ``baseline``: wrong on a fraction ``fail`` of the cases.
    - ``unchanged``: the baseline's, with a fraction ``flip`` of the cases flipped each way (noise).
    - ``regressed``: the baseline's, plus a fraction ``regress`` of all cases wrong now (a planted
      regression of ``regress`` × 100 points), with the same noise.
    """
    rng = random.Random(seed)
    numbers = list(range(count))
    base = set(rng.sample(numbers, round(fail * count)))
    passing = sorted(set(numbers) - base)
    noise_in = set(rng.sample(passing, round(flip * count)))
    noise_out = set(rng.sample(sorted(base), round(flip * count)))
    unchanged = (base | noise_in) - noise_out
    rest = sorted(set(passing) - noise_in)
    planted = set(rng.sample(rest, round(regress * count)))
    return {"baseline": base, "unchanged": unchanged, "regressed": unchanged | planted}


def served(wrong: set[int]) -> Any:
    """A scripted server's answer function for the agent that gets ``wrong`` wrong."""

    def answer(body: Mapping[str, Any]) -> Reply:
        found = _MARK.search(json.dumps(body.get("messages") or []))
        if found is None:
            return Reply(text="?")
        n = int(found[1])
        if single(n) == (n not in wrong):
            return Reply(tool_calls=[("read_thread", '{"thread_id": "th-1"}')], prompt_tokens=900,
                         completion_tokens=30)
        return Reply(text="Done.", prompt_tokens=900, completion_tokens=10)

    return answer
