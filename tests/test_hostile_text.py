"""Model text is hostile input everywhere it is shown.

A model (here the scripted server over real HTTP) writes a catalogue of hostile strings as tool
names it makes up, argument values, argument names, reply text and a call written into its text,
and a provider writes them into its error messages.  Every output of the run is then read as a
person or a program would: the terminal, the Markdown job summary (rendered by a CommonMark
parser), JUnit XML (parsed), the HTML page (opened in Debian's Chromium) and the JSON report and
record log (parsed): none shows a control character, an escape or a bidirectional override raw,
none gains a heading, link, image or element of the model's, and nothing is longer than its
bound, the cut said.  The JSON files are data: they keep the model's text whole, escaped.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import (
    OPT_API_BASE,
    OPT_HTML,
    OPT_MODEL,
    OPT_RECORDS,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_SUMMARY_MD,
    OPT_TIMEOUT,
)
from pytest_tooleffect.scoring.scorer import FAILURE_LIMIT
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.display import LIMIT, PAGE_LIMIT
from tests.demo_family import FAMILY, RULES
from tests.test_display import CUT, CUT_MB, FORGED, HOSTILE, raw
from tests.test_html import browser_context  # noqa: F401  (the fixture: Chromium, outside requests refused and kept)

POLICY = "openai/hostile"
TITLE_ARGS = {"start": "2025-03-19T13:00:00Z"}


def _case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": label,
            "recorded": {"tool_calls": []}, "source": "authored"}


NULL = {"valid_actions": [{"tool": None}]}
READ = {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]}
CREATE = {"valid_actions": [{"tool": "calendar.create_event", "args": {"title": "Q3 review",
                                                                        "start": "2025-03-19T14:00:00"}}]}
#: where the model writes each hostile string: (label, the reply that carries it)
CHANNELS: dict[str, tuple[dict[str, Any], Any]] = {
    "tool": (NULL, lambda h: Reply(tool_calls=[(h, "{}")])),
    "value": (CREATE, lambda h: Reply(tool_calls=[("calendar_create_event", {"title": h, **TITLE_ARGS})])),
    "field": (READ, lambda h: Reply(tool_calls=[("read_thread", {"thread_id": "th-1", h: 1})])),
    "reply": (READ, lambda h: Reply(text=h)),
    "malformed": (NULL, lambda h: Reply(text='<tool_call>{"name": ' + json.dumps(h) + ', "arguments": {}}</tool_call>')),
    "error": (NULL, lambda h: Reply(status=400, error_message=h)),
}


def _script(body: dict[str, Any]) -> Reply:
    text = json.dumps(body.get("messages") or [])
    found = re.search(r"\[(\w+)--([\w-]+)\]", text)
    assert found is not None, text[:300]
    channel, name = found.groups()
    return CHANNELS[channel][1](HOSTILE[name])


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(_script) as srv:
        yield srv




# --- every output of a run -----------------------------------------------------------------------------


def _write_family(root: Path) -> list[str]:
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True)
    (root / "oracle").mkdir()
    (fam / "family.yaml").write_text(FAMILY)
    (root / "oracle" / "demo.yaml").write_text(RULES)
    cases = [_case(f"{channel}--{name}", label) for channel, (label, _) in CHANNELS.items() for name in HOSTILE]
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    return [c["id"] for c in cases]


def _markdown_html(text: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


def _check_terminal(out: str) -> None:
    assert raw(out) == []
    assert not [line for line in out.splitlines() if line.lstrip().startswith(("### ", "| forged", "all 412"))]
    assert "\\x1b]52;c;ZWNobyBwd25lZA==\\x07" in out and "invoice\\u202eexe.pdf" in out  # shown, as text
    assert CUT_MB.search(out) and len(out) < 40 * FAILURE_LIMIT  # 13 × 6 decisions, the megabyte cut wherever it shows
    longest = max(len(line) for line in out.splitlines())
    assert longest <= FAILURE_LIMIT + 200, longest


def _check_markdown(text: str) -> None:
    assert raw(text) == []
    html = _markdown_html(text)
    headings = re.findall(r"<h(\d)>(.*?)</h\1>", html)
    assert headings == [("2", "tooleffect"), ("3", f"demo · {POLICY}")], headings
    assert "<img" not in html and "<a " not in html and "<script" not in html and "<b " not in html
    assert html.count("<table>") == 1 and html.count("<tr>") == 6  # the class table only: head, 3 classes, 2 averages
    assert "\\x1b]0;pwned window title\\x07after" in text and CUT in text  # the made-up tool name, cut
    assert max(len(line) for line in text.splitlines()) < 40 * LIMIT


def _check_junit(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert raw(text) == [] and "#x1B" not in text and "#x00" not in text  # nothing left for pytest to escape
    root = ET.fromstring(text)
    messages = [(el.get("message") or "", el.text or "") for el in root.iter() if el.tag in ("failure", "error")]
    assert len(messages) == len(CHANNELS) * len(HOSTILE)
    for message, body in messages:
        assert raw(message) == [] and raw(body) == []
        assert len(body) <= FAILURE_LIMIT and FORGED not in body.split("\n")
    assert any(CUT_MB.search(body) for _, body in messages)


def _check_json(report_path: Path, records_path: Path) -> None:
    for path in (report_path, records_path):
        assert raw(path.read_text(encoding="utf-8")) == [], path
    report = json.loads(report_path.read_text(encoding="utf-8"))
    (block,) = report["blocks"]
    assert set(block["hallucinated_tools"]["tools"]) == set(HOSTILE.values())  # data: whole, exact
    records = [json.loads(line) for line in records_path.read_text(encoding="utf-8").splitlines()]
    tools = {r["case_id"]: r["verdict"]["emitted"][0]["tool"] for r in records if r["case_id"].startswith("tool--")}
    assert tools == {f"tool--{name}": text for name, text in HOSTILE.items()}


def _page_data(html: str) -> Any:
    packed = re.search(r'id="te-data">([^<]*)</script>', html)
    assert packed is not None
    return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))


def _check_html(path: Path, browser: Any, ids: list[str]) -> None:
    html = path.read_text(encoding="utf-8")
    assert raw(html) == []
    data = _page_data(html)
    assert raw(json.dumps(data, ensure_ascii=False).replace("\\n", "").replace("\\r", "")) == []
    assert max(len(s) for s in re.findall(r'"((?:[^"\\]|\\.)*)"', json.dumps(data))) <= 7 * PAGE_LIMIT
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]")
    texts = [page.inner_text("body")]
    for rid in ids:
        page.goto(path.as_uri() + "#d=" + rid.replace("[", "%5B").replace("]", "%5D"))
        page.wait_for_selector("#detail-title")
        assert page.inner_text("#detail-title") == rid
        texts.append(page.inner_text("#detail"))
    shown_text = "\n".join(texts)
    assert raw(shown_text.replace("\r", "")) == []
    assert "invoice\\u202eexe.pdf" in shown_text and "\\x1b[2K\\x1b[1A" in shown_text and CUT in shown_text
    dom = page.evaluate("""() => ({
        imgs: [...document.querySelectorAll('img')].map(i => i.getAttribute('src')),
        links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')).filter(h => !h.startsWith('#')),
        scripts: document.querySelectorAll('script').length,
        bold: document.querySelectorAll('b[onmouseover]').length})""")
    assert dom == {"imgs": [], "links": [], "scripts": 2, "bold": 0}
    assert errors == [] and browser.outside == []


@pytest.mark.parametrize("workers", [0, 2])
def test_hostile_model_text_reaches_no_output_raw(pytester: pytest.Pytester, server: ScriptedServer,
                                                  browser_context: Any, workers: int) -> None:  # noqa: F811
    ids = _write_family(pytester.path)
    result = pytester.runpytest(
        "cases/", *(["-n", str(workers)] if workers else []), f"{OPT_MODEL}={POLICY}", f"{OPT_API_BASE}={server.base_url}",
        f"{OPT_TIMEOUT}=30", f"{OPT_RETRIES}=0", f"{OPT_REPORT}=out/r.json", f"{OPT_RECORDS}=out/records.jsonl",
        f"{OPT_SUMMARY_MD}=out/summary.md", f"{OPT_HTML}=out/r.html", "--junitxml=out/junit.xml", "-rA")
    n = len(HOSTILE)
    result.assert_outcomes(failed=5 * n, errors=n)  # every decision fails; the provider's errors are errors
    out = pytester.path / "out"
    _check_terminal(result.stdout.str())
    _check_markdown((out / "summary.md").read_text(encoding="utf-8"))
    _check_junit(out / "junit.xml")
    _check_json(out / "r.json", out / "records.jsonl")
    wanted = [f"demo/{cid}[{POLICY}]" for cid in ids if cid.split("--")[1] in ("heading", "rtl", "csi", "mb")
              and cid.split("--")[0] in ("tool", "reply", "error", "value")]
    _check_html(out / "r.html", browser_context, wanted)
