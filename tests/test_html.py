"""The HTML page (``--tooleffect-html``, ``tooleffect html``), opened in a real headless Chromium.

The browser is Debian's ``chromium`` (``scripts/ensure-chromium``, which ``make test`` runs),
driven by Playwright through its executable path; no browser build is downloaded.  The page is
written by a run of the shipped families and checked against that run's JSON report and records.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.collect.cases import case_label_hash, load_case_file, load_family
from pytest_tooleffect.options import OPT_HTML
from pytest_tooleffect.report.html import load_states, render_html
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.record_log import read_records
from tests.conftest import REPO
from tests.verdicts import verdict

CHROMIUM = "/usr/bin/chromium"
#: the launch flags: headless, no sandbox (root in CI), and nothing that phones home
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
CLASSES = ("single", "several", "no_tool")


@pytest.fixture(scope="module")
def shipped_run(shipped_run_folder: Path) -> dict[str, Any]:
    """The session's run of the shipped families (tests/conftest.py), which wrote the page, the JSON
    report and the record log."""
    out = shipped_run_folder
    page, report, records = out / "report.html", out / "report.json", out / "records.jsonl"
    stdout, stderr = (out / "stdout.txt").read_text(), (out / "stderr.txt").read_text()
    assert (out / "returncode").read_text() == "1", stdout[-3000:] + stderr[-3000:]  # GPT-4o's failing decisions
    assert f"tooleffect HTML report written to {page}" in stdout
    return {"page": page, "report": json.loads(report.read_text()), "records": read_records(records), "dir": out}


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Chromium with a fresh profile; every request that is not the page's own file is aborted and kept."""
    if not Path(CHROMIUM).is_file() or shutil.which("chromium") is None:
        pytest.fail(f"{CHROMIUM} is missing: scripts/ensure-chromium installs Debian's chromium (make test runs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000})
        context.outside = []  # requests to anything but a file: URL

        def guard(route: Any) -> None:
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                context.outside.append(route.request.url)
                route.abort()

        context.route("**/*", guard)
        yield context
        context.close()


def _open(context: Any, path: Path) -> Any:
    page = context.new_page()
    seen: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]")
    page.seen, page.errors = seen, errors
    return page


def _ci(ci: list[float] | None) -> str:
    return "–" if ci is None else f"{ci[0]:.1f}–{ci[1]:.1f}"


def _listed(page: Any) -> list[str]:
    """The record ids the browser lists, over every page of the list."""
    ids: list[str] = []
    while True:
        ids += page.eval_on_selector_all("#decisions tbody tr", "rows => rows.map(r => r.dataset.id)")
        if page.is_disabled("#next"):
            return ids
        page.click("#next")


def test_class_tables_show_the_json_reports_figures(shipped_run: dict[str, Any], browser_context: Any) -> None:
    page = _open(browser_context, shipped_run["page"])
    blocks = shipped_run["report"]["blocks"]
    assert [(b["family"], b["policy"]) for b in blocks] == [("mcp-git", "replay"), ("scheduling", "replay"),
                                                        ("tau-airline", "replay")]
    for b in blocks:
        section = page.locator(f'section.block[data-family="{b["family"]}"][data-policy="{b["policy"]}"]')
        assert b["label_set_fingerprint"] in section.locator("code.fp").inner_text()
        for cls in CLASSES:
            c = b["classes"][cls]
            row = section.locator(f'table[data-table="classes"] tr[data-class="{cls}"]')
            assert row.locator('td[data-field="n"]').inner_text() == str(c["n"])
            for level in ("name", "name_args"):
                cell = row.locator(f'td[data-level="{level}"]')
                assert cell.nth(0).inner_text() == f"{c[level]['correct']}/{c['n']}"
                assert cell.nth(1).inner_text() == c[level]["rate_display"]
                assert cell.nth(2).inner_text().strip() == _ci(c[level]["wilson95_pct"])
                assert cell.nth(2).locator("svg.ci").count() == (c["n"] > 0)
            if b["effects"]:
                e = b["effects"]["classes"][cls]
                assert row.locator('td[data-level="effect"][data-field="rate"]').inner_text() == e["rate_display"]
            assert ("too few to rate" in row.inner_text()) == c["small"]
        averages = section.locator('table[data-table="averages"]')
        for level in ("name", "name_args"):
            cells = averages.locator(f'tr[data-level="{level}"] td')
            assert [t.strip() for t in cells.all_inner_texts()] == [
                b["micro"][f"{level}_display"], _ci(b["micro"][f"{level}_ci95_pct"]),
                b["macro"][f"{level}_display"], _ci(b["macro"][f"{level}_ci95_pct"])]
        kinds = section.locator('table[data-table="kinds"] tr')
        assert {r.get_attribute("data-kind"): int(r.locator("td").nth(0).inner_text())
                for r in kinds.all()} == b["kinds"]
        nt = section.locator('table[data-table="no_tool_failures"] tbody tr')
        assert {r.get_attribute("data-bucket"): int(r.locator("td").inner_text()) for r in nt.all()} == \
            b["no_tool_failures"]
        for name, bucket in b["buckets"].items():
            brow = section.locator(f'table[data-table="buckets"] tr[data-bucket="{name}"]')
            assert brow.locator('td[data-field="name"]').inner_text() == bucket["name_display"]
    for key, text in shipped_run["report"]["conventions"].items():
        assert text in page.locator("#conventions").inner_text(), key
    assert page.seen == [shipped_run["page"].as_uri()] and browser_context.outside == []
    assert page.errors == []


def test_filtering_to_forbidden_lists_exactly_those_decisions(shipped_run: dict[str, Any],
                                                              browser_context: Any) -> None:
    records = shipped_run["records"]
    page = _open(browser_context, shipped_run["page"])
    assert page.inner_text("#count") == f"{len(records)} of {len(records)} decisions"
    assert page.locator("#decisions tbody tr").count() == 100  # paged: not one DOM row per decision
    assert page.inner_text("#page") == f"page 1 of {-(-len(records) // 100)}"
    forbidden = sorted(r["id"] for r in records if r["verdict"] and r["verdict"]["kind"] == "forbidden")
    assert len(forbidden) == 36  # 23 of GPT-4o's airline decisions, 4 authored scheduling faults and 9 mcp-git ones
    page.select_option('#filters [data-key="kind"]', "forbidden")
    assert page.inner_text("#count") == f"{len(forbidden)} of {len(records)} decisions"
    assert sorted(_listed(page)) == forbidden
    page.select_option('#filters [data-key="family"]', "scheduling")
    assert sorted(_listed(page)) == [i for i in forbidden if i.startswith("scheduling/")]
    page.fill('#filters [data-key="q"]', "sch-dup")
    assert sorted(_listed(page)) == [i for i in forbidden if i.startswith("scheduling/sch-dup")]
    page.click("#reset")
    page.select_option('#filters [data-key="outcome"]', "failed")
    failed = [r for r in records if not (r["verdict"]["name_ok"] and r["verdict"]["name_args_ok"]
                                         and (r.get("effect") is None or r["effect"]["passed"]))]
    assert len(_listed(page)) == len(failed)
    assert browser_context.outside == [] and page.errors == []


def test_a_decision_opens_to_its_conversation_and_verdict(shipped_run: dict[str, Any], browser_context: Any) -> None:
    records = {r["id"]: r for r in shipped_run["records"]}
    states = load_states([REPO / "cases"])
    page = _open(browser_context, shipped_run["page"])
    page.select_option('#filters [data-key="kind"]', "forbidden")
    page.select_option('#filters [data-key="family"]', "tau-airline")
    first = page.locator("#decisions tbody tr").first
    rid = first.get_attribute("data-id")
    first.click()
    page.wait_for_selector("#detail-verdict")
    record, state = records[rid], states.cases["tau-airline"][records[rid]["case_id"]]
    assert page.inner_text("#detail-title") == rid
    assert "verdict forbidden" in page.inner_text("#detail-verdict")
    emitted_tool = record["verdict"]["emitted"][0]["tool"]
    assert emitted_tool in page.inner_text("#detail-emitted")
    convo = page.inner_text("#detail-conversation")
    last_user = next(m["content"] for m in reversed(state["messages"]) if m["role"] == "user")
    assert last_user.strip()[:200] in convo and "SYSTEM" in convo.upper()
    assert "transfer_to_human_agents" in page.inner_text("#detail-tools")  # the family's tools, offered
    label = page.inner_text("#detail-label")
    assert "valid actions" in label and "forbidden actions" in label and "no tool" in label
    # a sandboxed decision: the calls as run, the effect and the world diff
    page.goto(shipped_run["page"].as_uri() + "#d=" + "scheduling/sch-clar-02%5Breplay%5D")
    page.wait_for_selector("#detail-sandbox")
    sandbox = page.inner_text("#detail-sandbox")
    assert "step 1: calls as run" in sandbox and "calendar.create_event" in sandbox
    assert "forbidden_effect" in sandbox and "world diff" in sandbox and "Supplier audit prep" in sandbox
    assert browser_context.outside == [] and page.errors == []


def test_the_page_is_one_file_that_names_nothing_outside(shipped_run: dict[str, Any]) -> None:
    text = shipped_run["page"].read_text()
    assert "<link" not in text and " src=" not in text and "@import" not in text and "url(" not in text
    assert "default-src 'none'" in text  # the browser refuses any request the page would make


def test_the_command_writes_the_page_from_records_or_a_report(shipped_run: dict[str, Any], tmp_path: Path) -> None:
    records = shipped_run["dir"] / "records.jsonl"
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "html", str(records), "--out",
                          str(tmp_path / "a.html")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"({len(shipped_run['records'])} decisions)" in out.stdout
    assert 'id="te-data">H4sI' in (tmp_path / "a.html").read_text()  # gzip magic, base64: the records travel
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "html", str(shipped_run["dir"] / "report.json"),
                          "--out", str(tmp_path / "b.html")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "b.html").read_text()
    assert shipped_run["report"]["blocks"][1]["label_set_fingerprint"] in page and 'id="te-data"></script>' in page
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "html", str(bad), "--out",
                          str(tmp_path / "c.html")], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2 and f"{bad}: line 1 is not a tooleffect record" in out.stderr


def record_row(rid_policy: str, case: str, kind: str, ok: bool, family: str = "fam") -> dict[str, Any]:
    assert ok is (kind in ("ok", "ok_no_tool")), "the levels follow the kind"
    return {"version": 1, "id": f"{family}/{case}[{rid_policy}]", "family": family, "case_id": case,
            "policy": rid_policy, "outcome": "scored", "class": "single", "bucket": "first", "step": 0,
            "run_length": 2, "xfail": False, "label_hash": "0" * 16,
            "verdict": verdict(kind),
            "no_tool_failure": None, "cost": {"input_tokens": 10, "output_tokens": 2, "latency_ms": 5.0,
                                              "cost_usd": 0.001}, "error": None, "source": {"kind": "authored"}}


def test_policies_side_by_side_and_their_disagreements(tmp_path: Path, browser_context: Any) -> None:
    from pytest_tooleffect.report import summarise

    records = [record_row("a", "c1", "ok", True), record_row("b", "c1", "wrong_tool", False),
               record_row("a", "c2", "ok", True), record_row("b", "c2", "ok", True),
               record_row("a", "c3", "wrong_tool", False)]
    html = render_html(summarise(records), records)
    path = tmp_path / "p.html"
    path.write_text(html)
    page = _open(browser_context, path)
    table = page.locator('table[data-table="disagreements"][data-family="fam"]')
    assert table.locator("tbody tr").count() == 1 and "c1" in table.inner_text()
    assert page.locator('table[data-table="comparison"][data-view="shared"]').count() == 1
    page.select_option('#filters [data-key="disagree"]', "disagree")
    assert sorted(_listed(page)) == ["fam/c1[a]", "fam/c1[b]"]
    page.click('table[data-table="disagreements"] a >> nth=1')
    page.wait_for_selector("#detail-verdict")
    assert page.inner_text("#detail-title") == "fam/c1[b]"
    assert "was not read" in page.inner_text("#detail-conversation")  # no case files: said, not hidden
    assert browser_context.outside == [] and page.errors == []


def test_regressions_and_fixes_come_first_with_a_baseline(tmp_path: Path, browser_context: Any) -> None:
    import copy

    from pytest_tooleffect.ci.baseline import Baseline
    from pytest_tooleffect.ci.regressions import BaselineContributor
    from pytest_tooleffect.report import summarise
    from pytest_tooleffect.scoring.record import Record

    before = [record_row("a", f"c{i}", "ok", True) for i in range(5)] + [record_row("a", "c9", "wrong_tool", False)]
    rows = copy.deepcopy(before)
    rows[3]["verdict"] = verdict("wrong_tool")  # c3 regressed
    rows[5]["verdict"] = verdict("ok")  # c9 fixed
    records = [Record.model_validate(r) for r in rows]
    section = BaselineContributor(Baseline.from_records(before, created="2026-01-01"), Path("b.json"))
    section.mark(records)
    assert [r.baseline.status for r in records if r.baseline] == ["passing"] * 3 + ["regression", "passing", "fixed"]
    report = summarise(records)
    section.contribute(report, records)
    path = tmp_path / "p.html"
    path.write_text(render_html(report, records))
    page = _open(browser_context, path)
    first_section = page.locator("main > section").first
    assert first_section.get_attribute("id") == "baseline"
    assert first_section.locator("tbody tr").all_inner_texts()[0].startswith("regression\tfam/c3[a]")
    assert _listed(page)[:2] == ["fam/c3[a]", "fam/c9[a]"]  # the browser lists them first too
    page.select_option('#filters [data-key="baseline"]', "regression")
    assert _listed(page) == ["fam/c3[a]"]
    assert browser_context.outside == [] and page.errors == []


def test_the_baseline_line_marks_only_counts_above_zero() -> None:
    """A run with nothing regressed showed "0 regressed, 0 changed" in the alarm colour."""
    from pytest_tooleffect.ci.baseline import Baseline
    from pytest_tooleffect.ci.regressions import BaselineContributor
    from pytest_tooleffect.report import summarise
    from pytest_tooleffect.scoring.record import Record

    rows = [record_row("a", f"c{i}", "ok", True) for i in range(3)]
    for before, fixed in ((rows, False), ([*rows[:2], record_row("a", "c2", "wrong_tool", False)], True)):
        records = [Record.model_validate(r) for r in rows]
        section = BaselineContributor(Baseline.from_records(before, created="2026-01-01"), Path("b.json"))
        section.mark(records)
        report = summarise(records)
        section.contribute(report, records)
        html = render_html(report, records)
        assert "<b>0 regressed</b>, <b>0 changed</b>" in html and 'class="bad"' not in html.split("regressed")[0][-40:]
        assert ('<b class="good">1 fixed</b>' if fixed else "<b>0 fixed</b>") in html


def test_report_sections_the_page_does_not_draw_are_shown_as_json() -> None:
    from pytest_tooleffect.report import summarise

    data = summarise([record_row("a", "c1", "ok", True)]).to_json()
    data["host_info"] = {"started": "2026-12-01T10:00:00Z", "host_marker": "ci-7"}  # a hook's section
    data["blocks"][0]["tool_loops"] = {"count": 3, "marker": "made-up-tool"}
    html = render_html(Report.model_validate(data))
    assert 'data-more="host_info"' in html and "ci-7" in html
    assert 'data-more="tool_loops"' in html and "made-up-tool" in html
    plain = render_html(summarise([record_row("a", "c1", "ok", True)]))
    assert "data-more" not in plain  # the fields the page draws are not repeated


def test_the_runs_metadata_and_its_shards_are_drawn() -> None:
    from pytest_tooleffect.report import summarise

    data = summarise([record_row("a", "c1", "ok", True)]).to_json()
    data["run"] = {"started_at": "2026-12-01T10:00:00.000Z", "ended_at": "2026-12-01T10:01:00.000Z",
                     "command": ["pytest", "cases/", "-n", "2"], "directory": "/ci/work",
                     "versions": {"plugin": "0.1.0", "pytest": "9.2.0", "litellm": None, "pytest_xdist": "3.8.0",
                                  "python": "3.11.7"},
                     "cases_git": {"demo": {"commit": "a" * 40, "dirty": True}},
                     "policies": {"replay": {"name": "replay"}}}
    data["shards"] = {"count": 4, "merged": [1, 2, 4], "missing": [3], "logs": ["a.jsonl", "b.jsonl", "d.jsonl"],
                      "duplicates_dropped": 2}
    html = render_html(Report.model_validate(data))
    assert "merged 3 of 4 shards from 3 record logs; missing: 3; 2 repeated records dropped" in html
    assert 'id="run"' in html and "pytest cases/ -n 2" in html and "litellm unknown" in html
    assert "git <code>aaaaaaaaaaaa</code> (with uncommitted changes)" in html and "data-more" not in html


def test_every_report_section_is_drawn_by_the_page() -> None:
    """A section of the report model the page does not draw would be dropped from it unseen (only
    sections the model does not know are shown as JSON)."""
    from pytest_tooleffect.report.model import Report

    template = (REPO / "pytest_tooleffect" / "report" / "templates" / "report.html.j2").read_text()
    drawn_elsewhere = {"version"}  # the page is of this report version; data-version is on the body
    assert [k for k in Report.model_fields
            if k not in drawn_elsewhere and not re.search(rf"\b(report\.{k}|{k}\b)", template)] == []


def test_every_block_field_is_drawn_by_the_page() -> None:
    """A field of the report's block model that the page leaves out would be dropped from it unseen
    (only fields the model does not know are shown as JSON)."""
    from pytest_tooleffect.report.model import Block

    source = "".join(p.read_text() for p in (REPO / "pytest_tooleffect" / "report").rglob("*")
                     if p.is_file() and p.suffix in (".j2", ".js", ".py") and p.name != "model.py")
    assert [k for k in Block.model_fields if not re.search(rf"\b{k}\b", source)] == []


def test_calls_to_tools_not_offered_are_a_line_of_the_page() -> None:
    from pytest_tooleffect.report import summarise

    rec = record_row("a", "c1", "wrong_tool", False)
    rec["verdict"] = verdict("wrong_tool", "made_up", hallucinated=["made_up"])
    html = render_html(summarise([rec]))
    line = re.search(r'<p class="meta" data-field="hallucinated_tools">(.*?)</p>', html, re.S)
    assert line is not None
    assert re.sub(r"<[^>]+>", "", line.group(1)) == ("calls to tools not offered (hallucinated): single 1, several 0, "
                                                     "no_tool 0 (made_up 1)")


def test_the_command_warns_in_one_line_of_the_families_whose_cases_it_did_not_find(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    rows = [record_row("p", "sch-conf-01", "ok_no_tool", True, "scheduling"),
            record_row("p", "sch-no-such-case", "ok", True, "scheduling"),
            record_row("p", "c1", "ok", True, "fam")]
    fam = load_family(REPO / "cases" / "scheduling")  # the case's label hash and class, as a run writes them
    (case,) = [c for c in load_case_file(REPO / "cases" / "scheduling" / "cases.yaml", fam, set())[0]
               if c.id == "sch-conf-01"]
    assert case.label is not None and case.label.label_class == "no_tool"
    rows[0].update({"label_hash": case_label_hash(case, fam), "class": "no_tool"})
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copytree(REPO / "cases" / "scheduling", tmp_path / "cases" / "scheduling")
    (tmp_path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "scheduling.yaml", tmp_path / "oracle")

    def run(cases: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "html", str(records), "--cases",
                               str(cases), "--out", str(tmp_path / "a.html")], cwd=REPO, capture_output=True,
                              text=True)

    unstamped = "tooleffect html: incomplete: the records do not say what their run selected"  # rows by hand
    out = run(tmp_path / "cases")
    assert out.returncode == 1 and (tmp_path / "a.html").is_file()  # written, and called incomplete as report does
    lines = out.stderr.splitlines()
    assert [line for line in lines if not line.startswith(unstamped)] == [
        f"tooleffect html: case files not found under {tmp_path / 'cases'} for fam, scheduling (1 of 2 cases): "
        "their decisions have no conversation on the page (--cases DIR)"]
    (tmp_path / "empty").mkdir()
    out = run(tmp_path / "empty")
    assert len(out.stderr.splitlines()) == 2 and "for fam, scheduling: their decisions" in out.stderr
    shutil.copytree(REPO / "cases" / "scheduling", tmp_path / "all" / "scheduling")
    records.write_text(json.dumps(rows[0]) + "\n")
    assert run(tmp_path / "all").stderr.startswith(unstamped)  # no case file missing: that line only


def test_a_decision_opens_to_the_reply_it_gave(pytester: pytest.Pytester, browser_context: Any) -> None:
    """The reply of a ``wrong_reply`` decision and the raw text of a call written into the text
    channel are on the page, from a replayed run's records."""
    from tests.demo_family import case, write_demo

    guessed = "I refunded $49.99 to your card. <b>Done</b>"  # shown as text, never as markup
    text_call = 'Let me look. <tool_call>{"name": "read_thread", "arguments": {"thread_id": "th-1"}}</tool_call>'
    write_demo(pytester.path, [
        case("refund-guessed", "last", {"valid_actions": [{"tool": None, "reply": "ask"}]},
             {"tool_calls": [], "text": guessed}),
        case("text-call", "last", {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]},
             {"tool_calls": [], "text": text_call}),
    ])
    pytester.runpytest("cases/", f"{OPT_HTML}=out/r.html").assert_outcomes(failed=2)
    path = pytester.path / "out" / "r.html"
    page = _open(browser_context, path)
    page.goto(path.as_uri() + "#d=" + "demo/refund-guessed%5Breplay%5D")
    page.wait_for_selector("#detail-reply")
    # no call backs the refund the reply claims: a phantom action (it was read as only a wrong reply before)
    assert "verdict phantom_action" in page.inner_text("#detail-verdict")
    assert page.inner_text("#detail-reply") == "REPLY TEXT\n" + guessed  # the role label is upper-cased by CSS
    assert page.locator("#detail-reply b").count() == 0
    assert page.inner_text("#detail-reply-check") == ("reply check (reply: ask), approximate: "
                                                      "reply ask: the reply does not ask (fallback)")
    page.goto(path.as_uri() + "#d=" + "demo/text-call%5Breplay%5D")
    page.wait_for_selector("#detail-emitted .malformed-raw")
    assert "verdict malformed_call" in page.inner_text("#detail-verdict")
    assert page.inner_text("#detail-reply").endswith(text_call)
    assert page.inner_text("#detail-emitted .malformed-raw pre") == text_call.removeprefix("Let me look. <tool_call>")
    assert browser_context.outside == [] and page.errors == []


def _trial_row(case: str, trial: int, ok: bool) -> dict[str, Any]:
    row = record_row(f"p:{trial}", case, "ok" if ok else "wrong_tool", ok)
    return {**row, "policy": "p", "trial": trial}


def _packed_ids(html: str) -> list[str]:
    """The record ids in the order the page's packed data holds them (the browser's order)."""
    import base64
    import gzip

    packed = re.search(r'<script type="application/gzip-base64" id="te-data">([^<]+)</script>', html)
    assert packed is not None
    return [r["id"] for r in json.loads(gzip.decompress(base64.b64decode(packed[1])))["records"]]


def test_trials_are_ordered_as_numbers_and_ids_without_trials_as_text(tmp_path: Path, browser_context: Any) -> None:
    """Under repeats a record id names its trial: ``[p:2]`` comes before ``[p:10]`` (not as text,
    ``[p:10]``…``[p:19]``, ``[p:1]``, ``[p:20]``); ids without a trial keep their text order."""
    from pytest_tooleffect.report import summarise

    trials = [_trial_row(case, t, t % 3 != 0) for case in ("flaky", "b") for t in range(21, 0, -1)]
    html = render_html(summarise(trials), trials)
    want = [f"fam/{case}[p:{t}]" for case in ("b", "flaky") for t in range(1, 22)]
    assert _packed_ids(html) == want
    path = tmp_path / "p.html"
    path.write_text(html)
    assert _listed(_open(browser_context, path)) == want
    plain = [record_row("a", c, "ok", True) for c in ("c10", "c2", "c1", "c1-x", "c1b")]
    assert _packed_ids(render_html(summarise(plain), plain)) == sorted(r["id"] for r in plain)
