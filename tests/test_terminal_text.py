"""The terminal report prints data as text: names, ids and messages are never read as rich markup."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_REPORT
from pytest_tooleffect.report import render_terminal, summarise
from tests.demo_family import CASES, FAMILY, READ, case, write_demo

LONG = "a-case-id-much-longer-than-eighty-columns-" + "x" * 60


def _family(pytester: pytest.Pytester, name: str) -> None:
    fam = write_demo(pytester.path, [CASES[0], CASES[4], case(LONG, "first", {"valid_actions": [{"tool": None}]},
                                                              {"tool_calls": [READ]}),
                                     case("boom[/INST]", "middle", {"valid_actions": [
                                         {"tool": "read_thread", "args": {"thread_id": "th-1"}}]},
                                          {"tool_calls": [{"name": "read_thread",
                                                           "arguments": '{"thread_id": "boom"}'}]})])
    (fam / "family.yaml").write_text(FAMILY.replace("name: demo", f"name: '{name}'"))
    (pytester.path / "oracle" / "demo.yaml").write_text(
        "fields:\n  read_thread.thread_id: {predicates: [{callable: boom}]}\n")
    pytester.makeconftest("""
        def pytest_tooleffect_predicates():
            def boom(value, ctx):
                if value == "boom":
                    raise RuntimeError("[/INST] provider said [bold]no[/bold] :smile:")
                return True
            return {"boom": boom}
    """)


@pytest.mark.parametrize("name", ["x[/y]", "[bold]demo", "fam:smile:"])
def test_markup_in_names_ids_and_messages_is_printed_as_text(pytester: pytest.Pytester, name: str) -> None:
    _family(pytester, name)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "MarkupError" not in out
    assert f"tooleffect: family {name} · policy replay" in out
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["blocks"][0]["family"] == name
    # ids keep their [policy] suffix wherever they are listed
    for e in report["blocks"][0]["errors"]:
        assert f"error (excluded from rates): {e['id']}: " in out
        assert e["id"].endswith("[replay]")


def test_provider_message_with_markup_and_none_costs(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [CASES[0], CASES[4]])
    pytester.runpytest("cases/").assert_outcomes(passed=1, failed=1)
    records = [json.loads(x) for x in (pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()]
    records[0]["id"] = "demo/" + LONG + "[replay]"
    for r in records:  # a live turn whose provider counted input tokens only, and no latency
        r["policy"] = "p[/x]"
        r["id"] = r["id"].replace("[replay]", "[p[/x]]")
        r["cost"] = {"input_tokens": 10, "output_tokens": None, "latency_ms": None, "cost_usd": None}
    err: dict[str, Any] = {**records[1], "id": "demo/e[p[/x]:2]", "outcome": "error", "verdict": None,
                           "no_tool_failure": None, "error": {"type": "ProviderError",
                                                               "message": "400: [/INST] expected [bold]"}}
    report = summarise([*records, err], {})
    text = render_terminal(report, width=400)
    assert "None" not in text
    assert "policy p[/x]" in text
    assert "error (excluded from rates): demo/e[p[/x]:2]: ProviderError: 400: [/INST] expected [bold]" in text
    assert "20 in / unknown out tokens" in text and "latency p50 unknown" in text
    narrow = render_terminal(report, width=80)
    assert f"{LONG}[p[/x]]" in narrow.replace("\n", "")  # folded onto further lines, never cut with "…"
    assert "…" not in narrow.split("conventions:")[0]
