"""The sequential gate live, against the scripted model server on 127.0.0.1 (litellm's real HTTP path):
an agent with a planted 10-point regression is stopped early and fails, with the saving printed; an
unchanged agent passes early on the margin; the full runs' fixed-n McNemar verdicts agree; the
settled items' model turns are never sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_API_BASE, OPT_BASELINE, OPT_MODEL, OPT_PRICES, OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.outcomes import SETTLED
from pytest_tooleffect.servers.scripted import ScriptedServer
from tests.sequential_family import agents, served, write_family

COUNT = 300
MODEL = "openai/local-test"
PRICES = f"{MODEL}: {{input_per_mtok: 2.5, output_per_mtok: 10.0}}\n"
#: the demo agents flip 4 % of the pairs when nothing changed (2 % each way): what ``tooleffect plan`` would measure
SEQUENTIAL = ('[tool.tooleffect.gates."*"]\n'
              "sequential = {alpha = 0.05, margin = 0.05, effect = 0.05, discordance = 0.04}\n")
ALPHA = 0.05


def _run(pytester: pytest.Pytester, wrong: set[int], name: str, *extra: str) -> tuple[Any, dict[str, Any], int]:
    """A live run of the agent that gets ``wrong`` wrong: pytest's result, the report, the requests sent."""
    with ScriptedServer(served(wrong)) as srv:
        result = pytester.runpytest("cases/", "-q", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_PRICES}=prices.yaml", f"{OPT_REPORT}={name}.json",
                                    f"{OPT_RECORDS}={name}.jsonl", *extra)
        sent = len(srv.requests)
    return result, json.loads((pytester.path / f"{name}.json").read_text()), sent


def _saving(result: Any) -> str:
    return next(line for line in result.outlines if line.startswith("demo/openai/local-test: ") and "settled" in line)


@pytest.fixture
def project(pytester: pytest.Pytester) -> dict[str, set[int]]:
    from pytest_tooleffect.cli import main

    a = agents(COUNT)
    write_family(pytester.path, COUNT)
    pytester.makefile(".yaml", prices=PRICES)
    result, _, sent = _run(pytester, a["baseline"], "accepted")
    assert sent == COUNT, result.outlines[-20:]
    assert main(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out",
                 str(pytester.path / "baseline.json")]) == 0
    return a


def test_live_regression_stops_early_unchanged_passes_early_and_fixed_n_agrees(
        pytester: pytest.Pytester, project: dict[str, set[int]], capsys: pytest.CaptureFixture[str]) -> None:
    baseline = f"{OPT_BASELINE}=baseline.json"
    # the full runs first (no sequential gate): the fixed-n exact McNemar test on all 300 pairs
    full = {agent: _run(pytester, project[agent], f"full-{agent}", baseline)[1]["baseline"]["blocks"][0]["mcnemar"]
            for agent in ("regressed", "unchanged")}
    pytester.makepyprojecttoml(SEQUENTIAL)
    shown: list[str] = []
    for workers in (0, 2):
        result, report, sent = _run(pytester, project["regressed"], f"regressed-n{workers}", baseline,
                                    *(["-n", "2"] if workers else []))
        assert result.ret == 1, result.outlines[-30:]
        (block,) = report["sequential"]["blocks"]
        assert block["verdict"] == "regression" and block["stopped_early"]
        saved = block["saved"]
        assert saved["decisions"] > 0
        # each skipped decision priced at what the same decision measured in the baseline's record log
        assert saved["basis"] == f"the baseline's measured spend of {saved['decisions']} of them"
        assert 910 * saved["decisions"] <= saved["tokens"] <= 930 * saved["decisions"]
        per = (900 * 2.5e-6 + 10 * 1e-5, 900 * 2.5e-6 + 30 * 1e-5)  # 900 in, 10 or 30 out, at $2.50 / $10 per Mtok
        assert per[0] * saved["decisions"] <= saved["cost_usd"] <= per[1] * saved["decisions"]
        assert report["skipped"][0]["reasons"] == {SETTLED: saved["decisions"]}
        assert sent == block["decisions_run"] < COUNT  # the settled items' turns were never sent
        result.stdout.fnmatch_lines(["gate demo/openai/local-test sequential at alpha 0.05: FAILED (regression settled *"])
        shown.append(f"-n {workers}: " + _saving(result))
    result, report, sent = _run(pytester, project["unchanged"], "unchanged", baseline)
    assert result.ret == 0, result.outlines[-30:]
    (block,) = report["sequential"]["blocks"]
    assert block["verdict"] == "no_regression" and block["stopped_early"] and sent < COUNT
    result.stdout.fnmatch_lines(["gate demo/openai/local-test sequential at alpha 0.05: PASSED (no regression beyond the "
                                 "margin of 5 points settled after *"])
    shown.append(_saving(result))
    # the fixed-n verdicts on the full runs agree with the sequential ones
    assert full["regressed"]["p_value"] < ALPHA and full["regressed"]["b"] > full["regressed"]["c"]
    assert full["unchanged"]["p_value"] >= ALPHA
    with capsys.disabled():
        print("\n" + "\n".join(shown))
        for agent, m in full.items():
            print(f"full run, {agent}: exact McNemar p = {m['p_value']:.3g} (pass→fail {m['b']}, fail→pass {m['c']})")

