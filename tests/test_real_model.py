"""A real model through the real server over HTTP: llama.cpp's ``llama-server`` with
Qwen2.5-Coder-0.5B-Instruct (:mod:`pytest_tooleffect.servers.local_model`), a handful of decisions.

The mechanics are asserted (records written, a verdict or an error per item, cost measured,
text-channel calls read as call attempts), never the model's quality.  The server is started
once per test session (built and its weights assembled first on a fresh machine: ``make test``
runs ``tooleffect model fetch`` before the suite, so the cached build is reused here) and
stopped at the end only when this session started it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_POLICY, OPT_RECORDS, OPT_REPORT, OPT_SANDBOX
from pytest_tooleffect.servers import local_model as localmodel

KINDS = {"ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed", "forbidden",
         "right_tool_wrong_args", "malformed_call"}
PORT = 8089


@pytest.fixture(scope="session")
def real_server() -> Iterator[localmodel.Server]:
    """The local model's server for the whole session (reused when one is already running)."""
    before = localmodel.running()
    try:
        server = localmodel.serve(port=PORT, max_tokens=160)
    except localmodel.LocalModelError as exc:
        pytest.fail(f"the local model could not be started: {exc}")
    yield server
    if before is None:
        localmodel.stop()


FAMILY = """\
name: mini
system_prompt: You are Elena's scheduling assistant. Use the tools when you need data or must act.
tools:
  - name: read_thread
    description: Read an email thread by its id.
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
  - name: calendar.create_event
    description: Create a calendar event.
    parameters:
      type: object
      properties: {title: {type: string}, start: {type: string}}
      required: [title, start]
    annotations: {readOnlyHint: false, destructiveHint: false}
"""


def _case(cid: str, content: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": content}], "label": label, "source": "authored"}


CASES = [
    _case("no-tool", "Thanks, that is all for today!", {"valid_actions": [{"tool": None}]}),
    _case("single", "Please read thread th-1187 and tell me what Jonas wants.",
          {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1187"}}]}),
    _case("several", "Read threads th-1 and th-2, then tell me which meeting is first.",
          {"valid_actions": [{"parallel": [{"tool": "read_thread", "args": {"thread_id": "th-1"}},
                                           {"tool": "read_thread", "args": {"thread_id": "th-2"}}]},
                             {"tool": "read_thread", "args": {"thread_id": "th-1"}}]}),
]


def test_real_model_decisions_over_http(pytester: pytest.Pytester, real_server: localmodel.Server) -> None:
    fam = pytester.path / "cases" / "mini"
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text(FAMILY)
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    pytester.makepyprojecttoml(f"""
        [tool.tooleffect.policies.local-qwen]
        model = "openai/{real_server.model}"
        api_base = "{real_server.api_base}"
        temperature = 0.0
        max_tokens = 160
        timeout_s = 600
    """)
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=local-qwen", f"{OPT_SANDBOX}=off", f"{OPT_REPORT}=r.json",
                                f"{OPT_RECORDS}=records.jsonl")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 3, result.stdout.str()[-3000:]
    records = [json.loads(line) for line in (Path(pytester.path) / "records.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in records) == ["no-tool", "several", "single"]
    for rec in records:
        assert rec["policy"] == "local-qwen" and rec["outcome"] == "scored", rec
        verdict = rec["verdict"]
        assert verdict["kind"] in KINDS
        assert rec["cost"]["input_tokens"] > 50 and rec["cost"]["output_tokens"] >= 1
        assert rec["cost"]["output_tokens"] <= 160  # the policy's cap reached the server
        assert rec["cost"]["latency_ms"] > 0 and rec["cost"]["cost_usd"] is None
        if verdict["kind"] == "malformed_call":  # a call attempt it could not read is named, never "no call"
            assert any("malformed" in a for a in verdict["emitted"]), verdict
    block = json.loads((Path(pytester.path) / "r.json").read_text())["blocks"][0]
    assert block["n_scored"] == 3 and block["policy"] == "local-qwen"
    assert {c for c in block["classes"]} == {"no_tool", "single", "several"}


def test_the_server_is_built_portable_and_cached_per_version_and_flags(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    """A ``-march=native`` build takes the AMX kernels a virtual machine's CPUID advertises and
    then dies in ``ldtilecfg``: the build must not be native, and a change of flags is a new build."""
    assert "-DGGML_NATIVE=OFF" in localmodel.CMAKE_FLAGS
    before = localmodel.server_path(tmp_path)
    assert before.parent.name == localmodel.build_id() and before.parent.name.startswith(localmodel.LLAMA_CPP_PYTHON)
    monkeypatch.setattr(localmodel, "CMAKE_FLAGS", (*localmodel.CMAKE_FLAGS, "-DGGML_AVX512=ON"))
    assert localmodel.server_path(tmp_path) != before


def test_two_processes_wanting_the_server_build_it_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A second caller waits on the build lock and takes the first one's binary (two builds into one
    folder would clobber each other)."""
    import threading
    import time

    built: list[Path] = []

    def slow_build(target: Path, version: str, jobs: int | None, log: Any) -> Path:
        built.append(target)
        time.sleep(0.5)
        target.write_bytes(b"#!/bin/sh\n")
        return target

    monkeypatch.setattr(localmodel, "_build", slow_build)
    monkeypatch.delenv("TOOLEFFECT_LLAMA_SERVER", raising=False)
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(localmodel.ensure_server(tmp_path))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(built) == 1 and got == [localmodel.server_path(tmp_path)] * 2
