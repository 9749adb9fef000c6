"""The HTML report with 50,000 decisions: how long the page takes to write and to load.

Generates 25,000 cases (a short conversation, four tools, a label) run under two policies, so
50,000 records (verdicts with per-field results, costs) and a side-by-side comparison; writes the
page with :func:`pytest_tooleffect.report.html.render_html`, then opens it from disk in Debian's
chromium (Playwright, as ``tests/test_html.py`` does) and times the load until the decision
browser is ready, a filter to one kind, and opening one decision.  Prints the figures and the load
time as a ratio against the limit the page is held to: ready within 5 seconds.

Run: ``.venv/bin/python bench/html_page.py [--cases 25000] [--policies 2]``
"""

from __future__ import annotations

import argparse
import random
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from results import emit  # bench/results.py: this folder is on sys.path

from pytest_tooleffect.oracle.kinds import MATCHED
from pytest_tooleffect.report import summarise
from pytest_tooleffect.report.html import States, render_html
from pytest_tooleffect.scoring.no_tool import no_tool_buckets
from pytest_tooleffect.scoring.record import Record

LIMIT_S = 5.0
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city.", "annotations": {"readOnlyHint": True},
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    {"name": "search_flights", "description": "Flights between two airports.", "annotations": {"readOnlyHint": True},
     "parameters": {"type": "object", "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}}}},
    {"name": "book_flight", "description": "Book a flight.", "annotations": {"destructiveHint": True},
     "parameters": {"type": "object", "properties": {"flight": {"type": "string"}, "seat": {"type": "string"}}}},
    {"name": "transfer_to_human", "description": "Hand the conversation to a person.",
     "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}}},
]
KINDS = [("ok", 0.45), ("ok_no_tool", 0.25), ("wrong_tool", 0.06), ("tool_when_none_needed", 0.08),
         ("none_when_tool_needed", 0.04), ("forbidden", 0.05), ("right_tool_wrong_args", 0.06),
         ("malformed_call", 0.01)]


def _case(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    cls = rng.choices(["single", "several", "no_tool"], [0.3, 0.1, 0.6])[0]
    city = rng.choice(["Lisbon", "Madrid", "Oslo", "Quito", "Hanoi"])
    messages = [{"role": "user", "content": f"Hi, I am user {i}. What is the weather in {city} and can I fly there?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
                    "name": "get_weather", "arguments": f'{{"city": "{city}"}}'}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": '{"temp_c": 21, "sky": "clear"}'},
                {"role": "assistant", "content": f"It is 21 °C and clear in {city}. Shall I look for flights?"},
                {"role": "user", "content": "Yes, from LIS tomorrow morning please."}]
    flights = {"origin": "LIS", "destination": city[:3].upper()}
    valid: list[dict[str, Any]] = [{"tool": "search_flights", "args": flights, "reason": "the user asked for flights"}]
    if cls == "no_tool":
        valid = [{"tool": None, "reason": "ask which airport"}]
    elif cls == "several":
        valid.append({"tool": "get_weather", "args": {"city": city}, "reason": "re-check"})
    label = {"valid_actions": valid, "forbidden_actions": [{"tool": "book_flight", "reason": "not confirmed"}],
             "labelled_by": ["bench"]}
    return {"messages": messages, "tools": None, "label": label, "label_hash": f"{i:016x}", "timezone": None,
            "world": None, "faults": None, "expected_effects": None, "forbidden_effects": None}, cls


def _record(rng: random.Random, i: int, cls: str, policy: str) -> dict[str, Any]:
    kind = rng.choices([k for k, _ in KINDS], [w for _, w in KINDS])[0]
    # the kinds the oracle gives in the class: null valid (no_tool) or not
    kind = ({"ok": "ok_no_tool", "wrong_tool": "tool_when_none_needed", "none_when_tool_needed": "ok_no_tool",
             "right_tool_wrong_args": "tool_when_none_needed"} if cls == "no_tool"
            else {"ok_no_tool": "ok", "tool_when_none_needed": "wrong_tool"}).get(kind, kind)
    ok = kind in ("ok", "ok_no_tool")
    tool = (None if kind in ("ok_no_tool", "none_when_tool_needed")
            else "book_flight" if kind == "forbidden" else rng.choice([t["name"] for t in TOOLS]))
    args_ok = kind != "right_tool_wrong_args"
    fields = [] if tool is None else [{"path": f"{tool}.origin", "ok": args_ok, "rule": "default:string",
                                       "expected": "LIS", "got": "LIS" if args_ok else "OPO"}]
    tokens = rng.randint(400, 4000)
    return {
        "version": 1, "id": f"bench/c{i:05d}[{policy}]", "family": "bench", "case_id": f"c{i:05d}", "policy": policy,
        "outcome": "scored", "class": cls, "bucket": rng.choice(["first", "middle", "last"]), "step": 3,
        "run_length": 9, "xfail": False, "label_hash": f"{i:016x}",
        "verdict": {"name_ok": ok or kind == "right_tool_wrong_args", "name_args_ok": ok, "kind": kind,
                    "matched": ({"tool": None} if kind == "ok_no_tool" else {"tool": tool} if kind in MATCHED
                                else None),
                    "fields": fields if kind in MATCHED else [], "unruled": [], "approximate": False,
                    "emitted": [{"tool": tool, "malformed": "arguments of x are not valid JSON"}
                                if kind == "malformed_call" else {"tool": tool, "args": {"origin": "LIS"}}
                                if tool else {"tool": None}],
                    "forbidden": {"tool": "book_flight"} if kind == "forbidden" else None,
                    "malformed": ["arguments of x are not valid JSON"] if kind == "malformed_call" else []},
        "no_tool_failure": no_tool_buckets(cls, kind, [{"tool": tool}], [], False, False)[-1], "error": None,
        "source": {"kind": "generated"}, "model": f"openai/{policy}",
        "cost": {"input_tokens": tokens, "output_tokens": 40, "latency_ms": rng.uniform(200, 900),
                 "cost_usd": tokens * 2.5e-6},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=25_000)
    ap.add_argument("--policies", type=int, default=2)
    args = ap.parse_args()
    rng = random.Random(7)
    family = {"system_prompt": "You are a travel assistant.", "tools": TOOLS, "policies": {}}
    states = States(families={"bench": family}, cases={"bench": {}})
    records = []
    for i in range(args.cases):
        state, cls = _case(rng, i)
        states.cases["bench"][f"c{i:05d}"] = state
        records += [_record(rng, i, cls, f"policy-{p}") for p in range(args.policies)]
    records = [Record.model_validate(r) for r in records]
    t0 = time.perf_counter()
    report = summarise(records)
    t1 = time.perf_counter()
    html = render_html(report, records, states)
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        path = Path(tmp) / "page.html"
        path.write_text(html, encoding="utf-8")
        context = p.chromium.launch_persistent_context(
            str(Path(tmp) / "profile"), executable_path="/usr/bin/chromium", headless=True, args=ARGS,
            viewport={"width": 1400, "height": 1000})
        outside: list[str] = []
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://")
                      else (outside.append(r.request.url), r.abort()))
        page = context.new_page()
        s0 = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=120_000)
        s1 = time.perf_counter()
        shown = page.inner_text("#count")
        page.select_option('#filters [data-key="kind"]', "forbidden")
        page.wait_for_function("document.querySelector('#count').textContent.indexOf('of') > 0")
        s2 = time.perf_counter()
        forbidden = page.inner_text("#count")
        page.locator("#decisions tbody tr").first.click()
        page.wait_for_selector("#detail-verdict")
        s3 = time.perf_counter()
        rows = page.locator("#decisions tbody tr").count()
        context.close()
    size = len(html.encode("utf-8")) / 2**20
    print(f"{len(records):,} decisions ({args.cases:,} cases x {args.policies} policies): page {size:.1f} MiB")
    print(f"summarise {t1 - t0:.2f} s, render and pack {t2 - t1:.2f} s, python peak RSS {peak:.0f} MiB")
    print(f"chromium: ready in {s1 - s0:.2f} s ({shown}); filter to forbidden {s2 - s1:.2f} s ({forbidden}, "
          f"{rows} rows in the DOM); open a decision {s3 - s2:.2f} s; requests outside the file: {len(outside)}")
    print(f"load time / limit ({LIMIT_S:.0f} s): {(s1 - s0) / LIMIT_S:.2f}")
    emit(f"HTML report of {len(records):,} decisions: load in chromium", f"limit {LIMIT_S:.0f} s",
         (s1 - s0) / LIMIT_S, "<= 1", f"ready in {s1 - s0:.2f} s, page {size:.1f} MiB")


if __name__ == "__main__":
    main()
