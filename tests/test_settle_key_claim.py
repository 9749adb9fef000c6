"""A settle key that holds an earlier run's sequential tally is refused before any item, naming the
key and the earlier run (break-it row 165: a reused key made a second run skip every item as
"sequential budget spent, not settled", with no word that the tally was another run's); the
shards of one run share it; ``--tooleffect-settle-reset`` takes the key over.  A real Redis."""

from __future__ import annotations

import pytest

from pytest_tooleffect.ci.sequential_state import RedisSettleStore
from pytest_tooleffect.options import (
    INI_RATE_BACKEND,
    OPT_BASELINE,
    OPT_SETTLE_KEY,
    OPT_SETTLE_RESET,
    OPT_SHARD,
)
from tests.sequential_family import write_family
from tests.test_sequential_gate import GATE, sequential_baseline

COUNT = 30


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    sequential_baseline(pytester, {1, 2, 3}, COUNT)
    write_family(pytester.path, COUNT, {1, 2, 3, 4, 5, 6})
    pytester.makepyprojecttoml(GATE.format(extra=", budget_decisions = 4"))
    return pytester


def _run(pytester: pytest.Pytester, redis_url: str, key: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest("cases/", "-o", f"{INI_RATE_BACKEND}={redis_url}#claim", f"{OPT_SETTLE_KEY}={key}",
                              f"{OPT_BASELINE}=baseline.json", *args)


def test_the_same_run_again_under_its_key_is_refused_naming_the_key_and_the_earlier_run(
        project: pytest.Pytester, redis_url: str) -> None:
    first = _run(project, redis_url, "k-again", f"{OPT_SHARD}=1/2")
    assert first.ret != pytest.ExitCode.USAGE_ERROR
    again = _run(project, redis_url, "k-again", f"{OPT_SHARD}=1/2")
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines([f"ERROR: {OPT_SETTLE_KEY} k-again: redis://127.0.0.1:*/0#claim already holds the "
                                "tally of an earlier run * started * (2 shards, baseline *, policies replay, "
                                "selection cases/; shards 1) (its shard 1 ran under this key already); give this "
                                f"run a new key*{OPT_SETTLE_RESET}*"])
    assert "passed" not in again.stdout.str() and "skipped" not in again.stdout.str()  # no item ran


def test_another_run_under_a_used_key_is_refused(project: pytest.Pytester, redis_url: str) -> None:
    assert _run(project, redis_url, "k-other").ret != pytest.ExitCode.USAGE_ERROR
    other = _run(project, redis_url, "k-other", "-k", "case-000")
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    other.stderr.fnmatch_lines(["*already holds the tally of an earlier run * (no shards, baseline *, policies "
                                "replay, selection cases/; shards 0); give this run a new key*"])


def test_the_shards_of_one_run_share_the_key(project: pytest.Pytester, redis_url: str) -> None:
    for i in (1, 2):
        result = _run(project, redis_url, "k-shards", f"{OPT_SHARD}={i}/2")
        assert result.ret != pytest.ExitCode.USAGE_ERROR, result.stderr.str()


def test_reset_takes_the_key_over(project: pytest.Pytester, redis_url: str) -> None:
    assert _run(project, redis_url, "k-reset").ret != pytest.ExitCode.USAGE_ERROR
    result = _run(project, redis_url, "k-reset", OPT_SETTLE_RESET)
    assert result.ret != pytest.ExitCode.USAGE_ERROR
    assert _run(project, redis_url, "k-reset").ret == pytest.ExitCode.USAGE_ERROR  # the reset run's own, now


def test_a_tally_that_does_not_say_its_run_is_refused(project: pytest.Pytester, redis_url: str) -> None:
    store = RedisSettleStore(f"{redis_url}#claim", "k-old")
    store.add("demo/replay", pair="same", cost_usd=0.0, tokens=0)  # what an earlier tooleffect left
    store.close()
    result = _run(project, redis_url, "k-old")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*k-old: * already holds a sequential tally under it, of an earlier run that did "
                                 "not say which it was*"])
