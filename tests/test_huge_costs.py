"""No output holds a number JSON has no form for: a cost is bounded where it comes in (an agent's
``cost_usd``, a user price, a live answer's price, a record log read back), so no sum of costs
overflows to infinity, and every JSON output is written with ``allow_nan=False``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_PRICES, OPT_RECORDS, OPT_REPORT
from tests.demo_family import CASES, write_demo

MAX_COST_USD = 1e9  # util.bounds: one decision's cost, USD
MAX_PRICE_PER_MTOK = 1e6  # util.bounds: USD per million tokens

COSTLY = '''
from pytest_tooleffect.decide.agent import AgentTurn


def costly(state):
    return AgentTurn({"role": "assistant", "content": "ok"}, cost_usd=1e308)


def dear(state):
    return AgentTurn({"role": "assistant", "content": "ok"}, cost_usd=1e9)
'''


def _strict(text: str) -> Any:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a JSON output"))


def test_an_agents_cost_that_would_overflow_the_report_is_its_bad_usage(pytester: pytest.Pytester) -> None:
    """Break-it row 274: cost_usd 1e308 a decision, the block's total Infinity in the JSON report."""
    write_demo(pytester.path, [CASES[3], {**CASES[3], "id": "d-stop-2"}])
    pytester.makepyfile(costly_agents=COSTLY)
    result = pytester.runpytest("cases/", "--tooleffect-agent=costly=costly_agents:costly",
                                "--tooleffect-agent=dear=costly_agents:dear", f"{OPT_REPORT}=r.json",
                                f"{OPT_RECORDS}=r.jsonl")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*AgentBadUsage*cost_usd 1e+308: a number of US dollars from 0 to 1,000,000,000*"])
    report = _strict((pytester.path / "r.json").read_text())
    costs = [b["cost"]["cost_usd"] for b in report["blocks"]]
    assert sorted(c for c in costs if c is not None) == [2 * MAX_COST_USD]  # the bound itself is taken
    for line in (pytester.path / "r.jsonl").read_text().splitlines():
        _strict(line)


def test_a_price_above_the_bound_is_a_usage_error_naming_the_file_model_and_key(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [CASES[3]])
    pytester.makefile(".yaml", prices="m: {input_per_mtok: 1, output_per_mtok: 1.0e+308}\n")
    result = pytester.runpytest("cases/", f"{OPT_PRICES}=prices.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{OPT_PRICES} prices.yaml: model 'm': output_per_mtok: 1e+308, more than "
                                 f"{MAX_PRICE_PER_MTOK:,.0f}; a price is a finite number of USD per million tokens "
                                 f"from 0 to {MAX_PRICE_PER_MTOK:,.0f}*"])


def test_a_live_answers_price_past_the_bound_is_unknown_not_infinite() -> None:
    from pytest_tooleffect.decide.pricing import price_answer
    from pytest_tooleffect.formats import Price

    litellm = SimpleNamespace(get_model_info=lambda model: (_ for _ in ()).throw(KeyError(model)))
    prices = {"m": Price(MAX_PRICE_PER_MTOK, MAX_PRICE_PER_MTOK)}
    assert price_answer(litellm, "m", None, prices, {"input_tokens": 10, "output_tokens": 0}) == (10.0, "user")
    for tokens in (10**300, 10**400):  # a provider's usage no answer has: too dear, too large for a float
        assert price_answer(litellm, "m", None, prices, {"input_tokens": tokens, "output_tokens": 0}) == (None, None)


@pytest.mark.parametrize(("cost", "why"), [("1e308", " is not a tooleffect record (cost.cost_usd"),
                                           ("2e9", " is not a tooleffect record (cost.cost_usd"),
                                           ("Infinity", ": not valid JSON: Infinity is not a JSON number")])
def test_a_record_log_holding_a_cost_past_the_bound_is_not_read(pytester: pytest.Pytester, cost: str, why: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(pytester.path, [CASES[3]])
    log = pytester.path / "r.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}={log}").ret == 0
    record = json.loads(log.read_text())
    log.write_text(json.dumps(record).replace('"cost_usd": null', f'"cost_usd": {cost}', 1) + "\n")
    assert cost in log.read_text()
    assert main(["report", str(log), "--json"]) == 2
    err = capsys.readouterr().err
    assert f"{log}: line 1{why}" in err, err


def test_no_report_is_written_with_a_number_json_has_no_form_for(tmp_path: Path) -> None:
    from pytest_tooleffect.report import dumps
    from pytest_tooleffect.report.record_log import RecordLog

    with pytest.raises(ValueError, match="JSON compliant"):
        dumps({"added_by_a_hook": math.inf})
    log = RecordLog(tmp_path / "r.jsonl")
    log.write({"id": "x", "cost": {"cost_usd": math.nan}})
    log.write({"id": "y"})
    log.close()
    assert (tmp_path / "r.jsonl").read_text() == '{"id": "y"}\n'
    assert log.lost == 1 and log.error is not None and "record 'x' holds a number JSON has no form for" in str(log.error)


def test_the_bounds_are_the_plugins() -> None:
    from pytest_tooleffect.util import bounds

    assert (bounds.MAX_COST_USD, bounds.MAX_PRICE_PER_MTOK) == (MAX_COST_USD, MAX_PRICE_PER_MTOK)


def test_a_hooks_nan_makes_the_report_an_output_problem_not_an_invalid_file(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [CASES[3]])
    pytester.makeconftest("def pytest_tooleffect_modifyreport(report, records, config):\n"
                          "    report['mine'] = float('nan')\n")
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the decision passed; the report could not be written
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*--tooleffect-report r.json: not written: the report holds a number JSON has no "
                                 "form for*"])
    assert not (pytester.path / "r.json").exists()
