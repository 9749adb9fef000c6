"""The sequential gate's live demonstration against the real local model (``examples/sequential_local``),
small: llama.cpp's ``llama-server`` with Qwen2.5-Coder-0.5B-Instruct over HTTP, as in
``tests/test_real_model.py`` (the server reused when one is running, started and stopped here otherwise).

The mechanics are asserted (every step's records and report, the planted decisions failed and never
sent to the model, tokens and an illustrative price measured, a six-pair block never passed), never the
model's quality: the full demonstration's figures are in docs/sequential-gate.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.sequential_local import demo
from examples.sequential_local.agent import case_hash, parse_call, planted
from pytest_tooleffect.servers import local_model as localmodel

COUNT = 6


@pytest.fixture(scope="module")
def real_server() -> Iterator[localmodel.Server]:
    """The local model's server (reused when one is already running; stopped only when started here)."""
    before = localmodel.running()
    try:
        server = localmodel.serve(port=8089)
    except localmodel.LocalModelError as exc:
        pytest.fail(f"the local model could not be started: {exc}")
    yield server
    if before is None:
        localmodel.stop()


def test_the_demonstration_runs_every_step_against_the_local_model(
        tmp_path: Path, real_server: localmodel.Server, capsys: pytest.CaptureFixture[str]) -> None:
    # a planted regression of half the pass rate: some of six cases are surely planted
    assert demo.main(["--out", str(tmp_path), "--count", str(COUNT), "--regression", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"baseline: {COUNT} decisions of the local model" in out
    assert "tooleffect plan measures D = " in out and "fixed-n exact McNemar on all" in out
    for name in ("seq-regressed", "seq-unchanged"):
        (block,) = json.loads((tmp_path / f"{name}.json").read_text())["sequential"]["blocks"]
        # six pairs settle nothing ("a small block cannot settle"): NOT SETTLED, never a pass
        assert block["verdict"] == "not_settled" and block["decisions_run"] == COUNT
        assert f"{name}: {COUNT} decisions made of {COUNT}, verdict not_settled" in out
    chosen = set((tmp_path / "planted.txt").read_text().split())
    base = [json.loads(line) for line in (tmp_path / "baseline-run.jsonl").read_text().splitlines()]
    passing = sorted((r["case_id"] for r in base if r["verdict"]["name_args_ok"]), key=case_hash)
    assert chosen == set(passing[:round(0.5 * COUNT)])  # the baseline's passes with the smallest hashes
    records = [json.loads(line) for line in (tmp_path / "seq-regressed.jsonl").read_text().splitlines()]
    hit = [r for r in records if r["case_id"] in chosen]
    assert hit and all(not r["verdict"]["name_ok"] for r in hit)  # every planted decision fails
    assert all(r["cost"]["input_tokens"] == 0 for r in hit)  # and never reached the model
    asked = [r for r in records if r["case_id"] not in chosen]
    assert all(r["cost"]["input_tokens"] > 0 and r["cost"]["cost_usd"] > 0 for r in asked)


@pytest.mark.parametrize(("text", "call"), [
    ('{"name": "read_thread", "arguments": {"thread_id": "th-017"}}', ("read_thread", '{"thread_id": "th-017"}')),
    ('Sure: ```json\n{"name": "read_thread", "arguments": "{}"}\n```', ("read_thread", "{}")),
    ("You're welcome!", None),
    ('{"thread_id": "th-1"}', None),
    ("{not json}", None),
])
def test_the_agent_reads_a_call_written_as_json_in_the_text(text: str, call: tuple[str, str] | None) -> None:
    got = parse_call(text)
    assert (None if got is None else (got["function"]["name"], got["function"]["arguments"])) == call


def test_the_planted_share_is_chosen_by_the_case_id_alone() -> None:
    ids = [f"mail-{n:04d}" for n in range(2000)]
    chosen = [i for i in ids if planted(i, 0.12)]
    assert chosen == [i for i in ids if planted(i, 0.12)]
    assert 0.10 < len(chosen) / len(ids) < 0.14
    assert set(chosen) <= {i for i in ids if planted(i, 0.2)}
