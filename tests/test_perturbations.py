"""Perturbed tool catalogs: variants beside each case, paired in the report's robustness section.

The scripted agents of ``tests/fixtures/weak_agents.py`` each have one weakness built in; a run of
a family with ``perturbations: [shuffle, rename, distractors, remove-valid, scale]`` must flag
exactly that weakness for each of them (and nothing for the careful one).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pytest_tooleffect.report.model import report_schema
from pytest_tooleffect.scoring.record import record_schema
from tests.test_html import browser_context  # noqa: F401 - Chromium, outside requests refused and kept

FIXTURES = Path(__file__).parent / "fixtures"

#: the family's tools: (name, description, two requests it serves)
TOOLS = [
    ("weather_forecast", "Get the weather forecast for a city.",
     ["What's the weather forecast for Lisbon?", "Could you check the weather forecast in Oslo?"]),
    ("currency_convert", "Convert an amount of money between currencies.",
     ["Can you convert this currency amount: 200 EUR into JPY?", "Convert 50 dollars, the currency of Canada."]),
    ("translate_text", "Translate a piece of text into another language.",
     ["Translate this text into French: good morning.", "Please translate the text 'hello' to German."]),
    ("flight_search", "Search for flights between two airports.",
     ["Search for a flight from Madrid to Rome on Friday.", "Search a flight to Berlin next week."]),
    ("recipe_lookup", "Look up a recipe for a dish.",
     ["Look up a recipe for paella.", "I want a recipe for lentil soup."]),
    ("stock_quote", "Get the latest stock quote for a ticker.",
     ["Give me a stock quote for ACME.", "What is the stock quote of Initech?"]),
]
#: the unrelated pool: a second family whose 140 tools share no word with the requests
POOL = [(f"bin_audit_{i:03d}", f"Audit storage bin {i:03d} in the warehouse inventory.") for i in range(140)]
AGENTS = ("careful", "first_tool", "name_matcher", "eager", "small_context")
#: the variants each agent's weakness must show in (and only those)
WEAKNESS = {"careful": set(), "first_tool": {"shuffle"}, "name_matcher": {"rename"}, "eager": {"remove-valid"},
            "small_context": {"scale-32", "scale-128"}}


def _open(context: Any, path: Path) -> Any:
    """The page in Chromium once its script has run, with the errors it logged (``page.errors``)."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]")
    page.errors = errors
    return page


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": {"type": "object", "properties": {}}}


def _write(root: Path, perturbations: list[Any]) -> None:
    fam = root / "cases" / "robust"
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text(yaml.safe_dump({
        "name": "robust", "tools": [_tool(n, d) for n, d, _ in TOOLS], "perturbations": perturbations}))
    catalog = [_tool(n, d) for n, d, _ in TOOLS]
    cases = []
    for k, (name, _, requests) in enumerate(TOOLS):
        tools = catalog[k:] + catalog[:k]  # each case offers its right tool first
        for j, text in enumerate(requests):
            cases.append({"id": f"{name}-{j}", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                          "messages": [{"role": "user", "content": text}], "tools": tools,
                          "label": {"valid_actions": [{"tool": name}]}, "source": "authored"})
    (fam / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    pool = root / "cases" / "warehouse"
    pool.mkdir()
    (pool / "family.yaml").write_text(yaml.safe_dump({"name": "warehouse", "tools": [_tool(n, d) for n, d in POOL]}))


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.syspathinsert(FIXTURES)
    agents = [f"--tooleffect-agent={a}=weak_agents:{a}" for a in AGENTS]
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", *agents, "--tooleffect-report=r.json",
                                "--tooleffect-summary-md=s.md", *args)
    return result, json.loads((pytester.path / "r.json").read_text())


def test_each_weak_agent_is_flagged_for_exactly_its_weakness(pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["shuffle", "rename", {"kind": "distractors", "n": 5}, "remove-valid",
                           {"kind": "scale", "sizes": [1, 8, 32, 128]}])
    result, report = _run(pytester)
    jsonschema.validate(report, report_schema())  # the robustness section is in the generated schema
    rob = report["robustness"]
    whole = [r for r in rob["rows"] if r["label_class"] == "all"]
    variants = {"shuffle", "rename", "distractors", "remove-valid", "scale-1", "scale-8", "scale-32", "scale-128"}
    for agent in AGENTS:
        rows = {r["variant"]: r for r in whole if r["policy"] == agent}
        assert set(rows) == variants, agent
        flagged = {v for v, r in rows.items() if r["flagged"]}
        assert flagged == WEAKNESS[agent], (agent, {v: (r["original"], r["perturbed"]) for v, r in rows.items()})
        for variant in WEAKNESS[agent]:
            row = rows[variant]  # every case broke, none fixed: the exact McNemar p of 12 discordant pairs
            assert (row["broke"], row["fixed"], row["original"]["n"]) == (12, 0, 12)
            assert row["p_value"] == pytest.approx(2 * 0.5 ** 12)
            assert row["drop_pct"] == 100.0 and len(row["flips"]) == 12
            assert {f["direction"] for f in row["flips"]} == {"broke"}
        for variant in variants - WEAKNESS[agent]:
            assert rows[variant]["broke"] == 0 and rows[variant]["p_value"] == 1.0, (agent, variant)
    # the curve: the small-context agent's knee between 8 and 32 tools
    curve = next(c for c in rob["curves"] if c["policy"] == "small_context")
    points = {p["size"]: p["rate_pct"] for p in curve["points"] if p["label_class"] == "all"}
    assert points == {0: 100.0, 1: 100.0, 8: 100.0, 32: 0.0, 128: 0.0}
    assert curve["original_size"] == 6
    # each variant is an item of its own, and the terminal and the Markdown summary say what was flagged
    result.stdout.fnmatch_lines(["*robust · first_tool · shuffle: 100.0 % → 0.0 % (-100.0 pts, n=12, 12 broke, "
                                 "0 fixed, McNemar p=0.000488)*FLAGGED*"])
    assert "| robust | eager | remove-valid | all | 100.0 % | 0.0 % |" in (pytester.path / "s.md").read_text()


def test_variants_are_items_with_their_own_ids_and_the_label_transformed(pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["shuffle", "rename", "remove-valid"])
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=careful=weak_agents:careful",
                                "--tooleffect-perturb=distractors:3", "--tooleffect-records=rec.jsonl", "-k",
                                "weather_forecast-0", "-v")
    # the cost, said before the run starts
    result.stdout.fnmatch_lines(["collecting *", "tooleffect: perturbations add 4 model turns to 1 (4 variants: distractors, "
                                 "remove-valid, rename, shuffle); each variant changes the tool catalog at the head "
                                 "of the prompt (a shuffled one reorders it), so a provider's prefix cache serves "
                                 "none of its turns"])
    result.stdout.fnmatch_lines(["*weather_forecast-0?careful?*PASSED*",
                                 "*weather_forecast-0?careful+shuffle?*PASSED*",
                                 "*weather_forecast-0?careful+rename?*PASSED*",
                                 "*weather_forecast-0?careful+remove-valid?*PASSED*",
                                 "*weather_forecast-0?careful+distractors?*PASSED*"])
    records = {r["id"]: r for r in map(json.loads, (pytester.path / "rec.jsonl").read_text().splitlines())}
    schema = record_schema()
    for rec in records.values():
        jsonschema.validate(rec, schema)
    renamed = records["robust/weather_forecast-0[careful+rename]"]
    # the agent called a neutral name; the call was mapped back and scored against the original label
    assert renamed["verdict"]["emitted"] == [{"tool": "weather_forecast", "args": {}}]
    assert renamed["perturbation"]["renamed"] == 6
    assert renamed["perturbation"]["base_id"] == "robust/weather_forecast-0[careful]"
    removed = records["robust/weather_forecast-0[careful+remove-valid]"]
    assert removed["class"] == "no_tool" and removed["perturbation"]["base_class"] == "single"
    assert removed["perturbation"]["removed"] == ["weather_forecast"] and removed["verdict"]["kind"] == "ok_no_tool"
    assert records["robust/weather_forecast-0[careful+distractors]"]["perturbation"]["catalog_size"] == 9


def test_a_gate_bounds_the_drop_under_a_perturbation(pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["shuffle"])
    pytester.makepyprojecttoml("""
[tool.tooleffect.gates."robust/first_tool"]
max_drop = {shuffle = 2}
[tool.tooleffect.gates."robust/careful"]
max_drop = {shuffle = 2}
""")
    result, report = _run(pytester)
    gates = {(g["policy"], g["gate"]): g for g in report["gates"]["results"]}
    assert gates[("first_tool", "drop shuffle")]["status"] == "failed"
    assert gates[("first_tool", "drop shuffle")]["value"] == 100.0
    assert gates[("careful", "drop shuffle")]["status"] == "passed"
    assert report["gates"]["passed"] is False and result.ret == 1


def test_a_bad_perturbation_is_a_clear_error_naming_the_file(pytester: pytest.Pytester) -> None:
    _write(pytester.path, [{"kind": "scale", "sizes": [0, 8]}])
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=careful=weak_agents:careful")
    result.stdout.fnmatch_lines(["*family.yaml: perturbations[[]0[]]*sizes [[]0, 8[]]: one or more distinct catalog "
                                 "sizes, each at least 1*"])
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-perturb=juggle")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--tooleffect-perturb*unknown perturbation 'juggle'*"])


def test_the_catalog_size_curve_is_drawn_on_the_page(pytester: pytest.Pytester,
                                                     browser_context: Any) -> None:  # noqa: F811
    _write(pytester.path, [{"kind": "scale", "sizes": [1, 8, 32, 128]}, "shuffle"])
    pytester.syspathinsert(FIXTURES)
    pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=small_context=weak_agents:small_context",
                       "--tooleffect-html=page.html", "--tooleffect-records=rec.jsonl")
    page = _open(browser_context, pytester.path / "page.html")
    flagged = page.eval_on_selector_all('table[data-table="robustness"] tr[data-class="all"]',
                                        "rows => rows.map(r => [r.dataset.variant, r.querySelector('[data-field=flagged]')"
                                        ".textContent, r.querySelector('[data-field=p]').textContent])")
    assert sorted(flagged) == [["scale-1", "no", "1"], ["scale-128", "yes", "0.000488"], ["scale-32", "yes", "0.000488"],
                               ["scale-8", "no", "1"], ["shuffle", "no", "1"]]
    svg = page.locator('svg[data-curve][data-policy="small_context"]')
    assert svg.count() == 1 and svg.is_visible()
    # the "all" line: full height up to 8 tools, on the axis from 32 on (SVG y grows downwards)
    dots = svg.locator('g[data-class="all"] circle')
    ys = [float(dots.nth(i).get_attribute("cy") or "nan") for i in range(dots.count())]
    titles = [dots.nth(i).locator("title").text_content() for i in range(dots.count())]
    assert titles == ["all: 100.0 % at 1 tools (n=12)", "all: 100.0 % at 8 tools (n=12)",
                      "all: 0.0 % at 32 tools (n=12)", "all: 0.0 % at 128 tools (n=12)"]
    assert ys[0] == ys[1] < ys[2] == ys[3]
    xs = [float(dots.nth(i).get_attribute("cx") or "nan") for i in range(dots.count())]
    assert xs == sorted(xs) and xs[2] - xs[1] == pytest.approx(xs[3] - xs[2], abs=0.2)  # log-2 axis: 8→32 as 32→128
    assert [t.text_content() for t in svg.locator("text[data-size]").all()] == ["1", "8", "32", "128"]
    # a flipped decision opens in the browser, which says its catalog was not the original's
    page.click('table[data-table="robustness"] a.dlink >> nth=0')
    page.wait_for_selector("#detail-perturbation")
    assert page.inner_text("#detail-title") == "robust/currency_convert-0[small_context+scale-32]"
    assert page.inner_text("#detail-perturbation").startswith("perturbed catalog scale-32 (scale): 32 tools offered "
                                                              "(26 added, 0 removed, 0 renamed)")
    assert browser_context.outside == [] and page.errors == []


def test_shards_xdist_and_a_baseline_treat_a_variant_as_any_other_item(pytester: pytest.Pytester,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(FIXTURES)!r})\n")  # the xdist workers' too
    _write(pytester.path, ["shuffle", "rename"])
    pytester.syspathinsert(FIXTURES)
    base = ["cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=first_tool=weak_agents:first_tool"]

    def ids(log: str) -> dict[str, str]:
        rows = map(json.loads, (pytester.path / log).read_text().splitlines())
        return {r["id"]: r["verdict"]["kind"] for r in rows}

    pytester.runpytest(*base, "--tooleffect-records=all.jsonl")
    whole = ids("all.jsonl")
    assert len(whole) == 36 and sum(i.endswith("+shuffle]") for i in whole) == 12
    for k in (1, 2):
        pytester.runpytest(*base, f"--tooleffect-shard={k}/2", f"--tooleffect-records=s{k}.jsonl")
    one, two = ids("s1.jsonl"), ids("s2.jsonl")
    assert not set(one) & set(two) and one | two == whole
    assert any(i.endswith("+shuffle]") for i in one) and any(i.endswith("+shuffle]") for i in two)
    capsys.readouterr()
    assert main(["report", str(pytester.path / "s1.jsonl"), str(pytester.path / "s2.jsonl"), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)  # the shards' variants pair with their originals once merged
    assert {(r["variant"], r["flagged"]) for r in merged["robustness"]["rows"] if r["label_class"] == "all"} == {
        ("shuffle", True), ("rename", False)}
    result = pytester.runpytest(*base, "-n", "2", "--tooleffect-records=x.jsonl")
    result.stdout.fnmatch_lines(["tooleffect: perturbations add 24 model turns to 12 (2 variants: rename, shuffle); *"])
    assert ids("x.jsonl") == whole  # the workers collect the same variants and the same catalogs
    assert main(["baseline", "save", str(pytester.path / "all.jsonl"), "--out", str(pytester.path / "b.json")]) == 0
    pytester.runpytest(*base, f"--tooleffect-baseline={pytester.path / 'b.json'}", "--tooleffect-records=again.jsonl")
    again = {r["id"]: r["baseline"]["status"] for r in map(json.loads,
                                                           (pytester.path / "again.jsonl").read_text().splitlines())}
    assert again["robust/weather_forecast-0[first_tool+shuffle]"] == "known"  # failed before, the same way
    assert again["robust/weather_forecast-0[first_tool+rename]"] == "passing"


def test_a_perturbation_that_cannot_be_made_is_listed_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["shuffle", {"kind": "shuffle", "seed": 3}])
    pytester.syspathinsert(FIXTURES)
    args = ["cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=careful=weak_agents:careful", "-k",
            "weather_forecast-0 or perturbation"]
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["*family.yaml: perturbations: variant names given twice (shuffle): give one of them "
                                 "a name*"])
    result.assert_outcomes(passed=1, errors=1)  # the original ran; the variants were not made
    _write(pytester.path / "again", [{"kind": "distractors", "n": 2, "pool": "same-domain",
                                      "tools": [{"description": "no name"}]}, {"kind": "scale", "sizes": [500]}])
    result = pytester.runpytest(*[a.replace("cases/robust", "again/cases/robust") for a in args])
    result.stdout.fnmatch_lines(["*cases.jsonl: case weather_forecast-0: perturbation distractors: name: Field required",
                                 "*cases.jsonl: case weather_forecast-0: perturbation scale-500: scale 500: the "
                                 "unrelated pool holds 140 tools not offered at the state; 494 more are needed*"])
    result.assert_outcomes(passed=1, errors=1)


def test_a_call_by_a_renamed_tools_original_name_is_a_call_to_a_tool_not_offered(pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["rename"])
    pytester.makepyfile(hidden_agent="""
def weather(state):
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "weather_forecast", "arguments": "{}"}}]}
""")
    pytester.syspathinsert()
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=hid=hidden_agent:weather",
                                "--tooleffect-records=rec.jsonl", "-k", "weather_forecast-0")
    result.assert_outcomes(passed=1, failed=1)  # the original passes; under rename the name was not offered
    records = {r["id"]: r for r in map(json.loads, (pytester.path / "rec.jsonl").read_text().splitlines())}
    renamed = records["robust/weather_forecast-0[hid+rename]"]
    assert renamed["verdict"]["kind"] == "wrong_tool"
    assert renamed["verdict"]["emitted"] == [{"tool": "weather_forecast (its original name: not offered under rename)",
                                              "args": {}}]
    result.stdout.fnmatch_lines(["*not offered: weather_forecast (its original name: not offered under rename)*"])


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_a_pool_file_that_is_no_regular_file_is_refused_unread_and_the_run_goes_on(pytester: pytest.Pytester,
                                                                                     special: str) -> None:
    _write(pytester.path, ["shuffle", {"kind": "distractors", "n": 2, "pool_files": [special]}])
    if special == "fifo":
        os.mkfifo(pytester.path / "cases" / "robust" / "fifo")  # nobody writes to it: reading it would wait forever
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=careful=weak_agents:careful",
                                "-k", "weather_forecast-0 or perturbation")
    kind = "a character device" if special == "/dev/zero" else "a named pipe (FIFO)"
    result.stdout.fnmatch_lines([f"*family.yaml: perturbations[[]1[]] (distractors): pool file *{special}: "
                                 f"InputFileError: *{special}: is {kind}, not a file to read*"])
    assert "INTERNALERROR" not in result.stdout.str()
    result.assert_outcomes(passed=2, errors=1)  # the original and its shuffled variant ran


def test_a_policy_name_holding_the_variant_separator_is_refused_wherever_it_is_given(
        pytester: pytest.Pytester) -> None:
    _write(pytester.path, ["shuffle"])
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider",
                                "--tooleffect-agent=careful+shuffle=weak_agents:careful")
    assert result.ret == 4  # a usage error: it would share record ids with careful's shuffle variant
    result.stderr.fnmatch_lines(["*--tooleffect-agent*'careful+shuffle'*holds '+'*replay+shuffle*"])
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-model=openai/m+shuffle")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--tooleffect-model*holds '+'*"])
    pytester.makepyprojecttoml('[tool.tooleffect.policies."careful+shuffle"]\nagent = "weak_agents:careful"\n')
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*pyproject.toml: [[]tool.tooleffect.policies.careful+shuffle[]]: name: *holds '+'*"])


def test_a_rewrite_for_no_tool_and_a_label_for_no_case_are_family_errors(pytester: pytest.Pytester) -> None:
    _write(pytester.path, [{"kind": "describe", "rule": "family", "rewrites": {"nosuchtool": "x",
                                                                              "weather_forecast": "Forecast."}},
                           {"kind": "remove-valid", "labels": {"nosuchcase": {"valid_actions": [{"tool": None}]},
                                                               "weather_forecast-0": {"valid_actions": [{"tool": None}]}}}])
    pytester.syspathinsert(FIXTURES)
    result = pytester.runpytest("cases/robust", "-p", "no:cacheprovider", "--tooleffect-agent=careful=weak_agents:careful",
                                "-k", "weather_forecast-0 or perturbation")
    result.stdout.fnmatch_lines([
        "*family.yaml: perturbations[[]0[]] (describe): rewrites.nosuchtool: no case of the family offers a tool "
        "'nosuchtool' (offered: currency_convert, *",
        "*family.yaml: perturbations[[]1[]] (remove-valid): labels.nosuchcase: the family has no case 'nosuchcase'*"])
    result.assert_outcomes(passed=3, errors=1)  # the rewrite and the label that name something still apply


def test_a_family_whose_cases_run_in_a_sandbox_world_says_why_it_got_no_variant(pytester: pytest.Pytester) -> None:
    fam = pytester.path / "cases" / "world"
    fam.mkdir(parents=True)
    tools = [{"name": n, "description": "d", "parameters": {"type": "object", "properties": {}},
              "annotations": {"readOnlyHint": True}} for n in ("peek", "look")]
    (fam / "tools.json").write_text(json.dumps(tools))
    (fam / "family.yaml").write_text(yaml.safe_dump({
        "name": "world", "tools_file": "tools.json",
        "mcp": {"server": {"name": "w", "version": "1"}, "transport": "stdio", "command": ["x"]},
        "sandbox": {"world": "mcp", "mcp": {"command": [str(pytester.path / "no-such-server")], "probe": "files"}}}))
    (fam / "cases.yaml").write_text(yaml.safe_dump([
        {"id": f"c{k}", "source": "authored", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
         "messages": [{"role": "user", "content": "peek please"}], "label": {"valid_actions": [{"tool": "peek"}]},
         "recorded": {"tool_calls": [{"name": "peek", "arguments": "{}"}]}, "world": {"setup": []}} for k in range(2)]))
    pytester.makepyprojecttoml('[tool.tooleffect.gates."*"]\nmax_drop = {shuffle = 2}\n')
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", "--tooleffect-perturb=shuffle", "-k", "not c1")
    why = ("no variant of family world: its 2 labelled cases run in a sandbox world, which runs calls by the tools' "
           "names: a perturbed catalog is not offered there, so no variant of it was made")
    result.stdout.fnmatch_lines([f"tooleffect: perturbations: {why}",
                                 f"gate world/replay drop shuffle <= 2 pts: NOT JUDGED ({why})"])
    assert "not selected by this run" not in result.stdout.str()  # the filter is not why
