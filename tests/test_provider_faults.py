"""Provider answers that are not decisions, API keys and their redaction, retries: through
litellm's real HTTP client against scripted servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.decide.model_turn import PLACEHOLDER_KEY, TurnPool, import_litellm, run_turn
from pytest_tooleffect.decide.provider_errors import CONNECTION_RESET, CONTENT_FILTER, TRUNCATED, ProviderError
from pytest_tooleffect.decide.ratelimit import RateLimit
from pytest_tooleffect.formats import Case, Policy
from pytest_tooleffect.options import (
    OPT_API_BASE,
    OPT_CACHE,
    OPT_HTML,
    OPT_MODEL,
    OPT_POLICY,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_SUMMARY_MD,
    OPT_TIMEOUT,
)
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util.redaction import REDACTED
from tests.demo_family import FAMILY, RULES

NULL = {"tool": None}
READ = {"tool": "read_thread", "args": {"thread_id": "t"}}


def _case(cid: str, label: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
            "messages": [{"role": "user", "content": f"[{cid}] please help"}], "label": label,
            "recorded": {"tool_calls": []}, "source": "authored"}


def _family(root: Path, cases: list[dict[str, Any]], extra_family: str = "") -> None:
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True, exist_ok=True)
    (root / "oracle").mkdir(exist_ok=True)
    (fam / "family.yaml").write_text(FAMILY + extra_family)
    (root / "oracle" / "demo.yaml").write_text(RULES)
    (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")


def _records(root: Path) -> dict[str, dict[str, Any]]:
    lines = (root / "reports" / "tooleffect-records.jsonl").read_text().splitlines()
    return {json.loads(x)["case_id"]: json.loads(x) for x in lines}


def _by_case(replies: dict[str, Reply]) -> Any:
    def script(body: dict[str, Any]) -> Reply:
        text = json.dumps(body.get("messages") or body.get("contents") or [])
        return next((r for cid, r in replies.items() if f"[{cid}]" in text), Reply(text="?"))
    return script


# --- answers that are not decisions -------------------------------------------------------------

#: Per wire format: the model, the api base attribute, and each case's scripted answer with the
#: record's expected error type (``None``: a decision, scored).
FORMATS = {
    "openai": ("openai/local-test", "base_url", {
        "filtered": (Reply(text=None, finish_reason="content_filter"), CONTENT_FILTER),
        "cut-call": (Reply(tool_calls=[("read_thread", '{"thread_id": "t')], finish_reason="length"), TRUNCATED),
        "cut-text": (Reply(text="Let me think about which tool", finish_reason="length"), TRUNCATED),
        "stopped": (Reply(text="Nothing to do."), None),
    }),
    "anthropic": ("anthropic/claude-local-test", "root_url", {
        "filtered": (Reply(text=None, finish_reason="refusal"), CONTENT_FILTER),
        "cut-call": (Reply(tool_calls=[("read_thread", {"thread_id": "t"})], finish_reason="max_tokens"), TRUNCATED),
        "cut-text": (Reply(text="Let me think", finish_reason="max_tokens"), TRUNCATED),
        "stopped": (Reply(text="Nothing to do."), None),
    }),
    "gemini": ("gemini/gemini-local-test", "root_url", {
        "filtered": (Reply(text=None, finish_reason="SAFETY"), CONTENT_FILTER),
        "blocked": (Reply(raw_body=json.dumps({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {
            "promptTokenCount": 10, "candidatesTokenCount": 0, "totalTokenCount": 10}}).encode()), CONTENT_FILTER),
        "recited": (Reply(text="Once upon", finish_reason="RECITATION"), CONTENT_FILTER),
        # litellm reports "tool_calls" for this one: only the raw MAX_TOKENS tells it was cut
        "cut-call": (Reply(tool_calls=[("read_thread", {"thread_id": "t"})], finish_reason="MAX_TOKENS"), TRUNCATED),
        "bad-call": (Reply(text=None, finish_reason="MALFORMED_FUNCTION_CALL"), None),
        "stopped": (Reply(text="Nothing to do."), None),
    }),
}


@pytest.mark.parametrize("wire", sorted(FORMATS))
def test_refusals_and_cut_off_answers_are_error_outcomes(pytester: pytest.Pytester, wire: str) -> None:
    """A safety stop (no call, null valid) would have passed as ok_no_tool, a cut call as malformed_call:
    both are error outcomes with their own type, counted by type and listed, outside every rate.
    """
    model, base, script = FORMATS[wire]
    cases = [_case(cid, {"valid_actions": [NULL]} if cid != "cut-call" else {"valid_actions": [READ]})
             for cid in script]
    _family(pytester.path, cases)
    with ScriptedServer(_by_case({cid: reply for cid, (reply, _) in script.items()})) as srv:
        result = pytester.runpytest("cases/", f"{OPT_MODEL}={model}", f"{OPT_API_BASE}={getattr(srv, base)}",
                                    f"{OPT_RETRIES}=0", f"{OPT_REPORT}=r.json", f"{OPT_SUMMARY_MD}=r.md")
        arrivals = len(srv.requests)
    recs = _records(pytester.path)
    expected = {cid: kind for cid, (_, kind) in script.items()}
    for cid, kind in expected.items():
        if kind is None:
            assert recs[cid]["outcome"] == "scored", recs[cid]
        else:
            assert recs[cid]["outcome"] == "error" and recs[cid]["verdict"] is None, recs[cid]
            assert recs[cid]["error"]["type"] == kind, recs[cid]["error"]
    assert arrivals == len(script)  # a refusal or a cut answer is not retried: it would come again
    if wire == "gemini":  # Gemini's own "could not parse the call": the agent's malformed call, never no call
        assert recs["bad-call"]["verdict"]["kind"] == "malformed_call"
    errors = [cid for cid, kind in expected.items() if kind is not None]
    result.assert_outcomes(passed=1, failed=len(script) - len(errors) - 1, errors=len(errors))
    (block,) = json.loads((pytester.path / "r.json").read_text())["blocks"]
    assert block["n_errors"] == len(errors) and block["n_scored"] == len(script) - len(errors)
    assert sorted(e["id"].split("[")[0].removeprefix("demo/") for e in block["errors"]) == sorted(errors)
    counted = {k: sum(1 for v in expected.values() if v == k) for k in (CONTENT_FILTER, TRUNCATED)}
    assert block["error_types"] == {k: n for k, n in counted.items() if n}
    assert block["classes"]["no_tool"]["n"] == block["n_scored"]  # nothing refused sits in the no-tool class
    out = result.stdout.str()
    assert "errors by type (excluded from rates): " in out and f"{CONTENT_FILTER} {counted[CONTENT_FILTER]}" in out
    assert f"{CONTENT_FILTER} {counted[CONTENT_FILTER]}" in (pytester.path / "r.md").read_text()
    assert "ContentFilter (the provider's safety layer" in json.dumps(
        json.loads((pytester.path / "r.json").read_text())["conventions"])


def test_a_refusal_is_never_cached(tmp_path: Path) -> None:
    """The answer cache stores decisions only: a filtered answer is asked again next time."""
    from pytest_tooleffect.decide.model_turn import ModelCache

    case = Case.model_validate(_case("again", {"valid_actions": [NULL]}))
    cache = ModelCache(tmp_path / "cache")
    with ScriptedServer([Reply(finish_reason="content_filter"), Reply(text="fine")]) as srv:
        policy = Policy(name="p", model="openai/x", api_base=srv.base_url)
        with pytest.raises(ProviderError) as info:
            run_turn(case, [], None, policy, api_key="x", cache=cache)
        assert info.value.kind == CONTENT_FILTER
        assert run_turn(case, [], None, policy, api_key="x", cache=cache).emitted["content"] == "fine"
        assert run_turn(case, [], None, policy, api_key="x", cache=cache).cached
        assert len(srv.requests) == 2


# --- keys and their redaction -------------------------------------------------------------------

def _auth(body: dict[str, Any]) -> str:
    headers = {k.lower(): v for k, v in body["_headers"].items()}
    return str(headers.get("authorization", "")).removeprefix("Bearer ")


def _every_output(root: Path) -> dict[str, str]:
    """Every file a run left under ``root`` (reports, records, JUnit, json-report, HTML, cache), as
    text; the run's inputs (``cases/``, ``oracle/``, ``pyproject.toml``) left out.
    """
    inputs = {root / "cases", root / "oracle", root / "pyproject.toml"}
    return {str(p.relative_to(root)): p.read_text(errors="replace") for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not any(p == i or i in p.parents for i in inputs)}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_policy_key_is_sent_and_redacted_from_every_output(pytester: pytest.Pytester,
                                                              monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """A policy's ``api_key_env`` key reaches the server; a provider echoing it in a 401 or a 500
    and a model writing it into its text never carry it into any output, in one process or from
    xdist workers.
    """
    canary = "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv("TOOLEFFECT_TEST_GATEWAY", canary)

    def script(body: dict[str, Any]) -> Reply:
        key = _auth(body)
        text = json.dumps(body.get("messages"))
        if key != canary:
            return Reply(status=401, error_message=f"Incorrect API key provided: {key}")
        if "[echo-401]" in text:
            return Reply(status=401, error_message=f"Incorrect API key provided: {key}. You can find your key at ...")
        if "[echo-500]" in text:
            return Reply(status=500, error_message=f"upstream refused key={key}")
        if "[echo-text]" in text:
            return Reply(text=f"My configuration says the key is {key}.")
        return Reply(text="Done.")

    cases = [_case(cid, {"valid_actions": [NULL]}) for cid in ("ok", "echo-401", "echo-500", "echo-text")]
    with ScriptedServer(script) as srv:
        _family(pytester.path, cases, extra_family=(
            f"policies:\n  - name: gateway\n    model: openai/gateway-model\n    api_base: {srv.base_url}\n"
            "    api_key_env: TOOLEFFECT_TEST_GATEWAY\n"))
        result = pytester.runpytest("cases/", *(["-n", str(workers)] if workers else []),
                                    f"{OPT_POLICY}=gateway", f"{OPT_RETRIES}=1", f"{OPT_TIMEOUT}=30",
                                    f"{OPT_REPORT}=out/r.json", f"{OPT_SUMMARY_MD}=out/r.md", f"{OPT_HTML}=out/r.html",
                                    f"{OPT_CACHE}=readwrite", "--junitxml=out/junit.xml", "--json-report",
                                    "--json-report-file=out/j.json", "-rA")
        sent = {_auth(b) for b in srv.requests}
    assert sent == {canary}  # the key went out on every request
    result.assert_outcomes(passed=2, errors=2)
    recs = _records(pytester.path)
    assert recs["echo-401"]["error"]["type"] == "AuthenticationError"
    assert REDACTED in recs["echo-401"]["error"]["message"] and REDACTED in recs["echo-500"]["error"]["message"]
    outputs = _every_output(pytester.path)
    assert {"out/r.json", "out/r.md", "out/r.html", "out/junit.xml", "out/j.json",
            "reports/tooleffect-records.jsonl"} <= set(outputs)
    cached = [text for name, text in outputs.items() if name.startswith(".tooleffect-cache/model/")]
    assert len(cached) == 2 and sum(REDACTED in text for text in cached) == 1  # ok, and echo-text's reply
    leaked = [name for name, text in outputs.items() if canary in text]
    assert leaked == []
    assert canary not in result.stdout.str() and canary not in result.stderr.str()
    assert REDACTED in result.stdout.str()  # the 401's message, shown with its key cut out


def test_api_base_sends_the_providers_usual_key(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--tooleffect-api-base`` with ``OPENAI_API_KEY`` set sends that key (an authenticated local
    vLLM or gateway), never the placeholder; without it, the placeholder.
    """
    canary = "sk-proj-" + secrets.token_hex(16)
    _family(pytester.path, [_case("ok", {"valid_actions": [NULL]})])
    with ScriptedServer(lambda body: Reply(text="Done.") if _auth(body) == canary
                        else Reply(status=401, error_message=f"bad key {_auth(body)}")) as srv:
        monkeypatch.setenv("OPENAI_API_KEY", canary)
        with_key = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                      f"{OPT_RETRIES}=0")
        monkeypatch.delenv("OPENAI_API_KEY")
        without = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/local-test", f"{OPT_API_BASE}={srv.base_url}",
                                     f"{OPT_RETRIES}=0")
        sent = [_auth(b) for b in srv.requests]
    with_key.assert_outcomes(passed=1)
    without.assert_outcomes(errors=1)
    assert sent == [canary, PLACEHOLDER_KEY]


def test_a_missing_key_variable_is_an_error_outcome_naming_it(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLEFFECT_TEST_UNSET", raising=False)
    _family(pytester.path, [_case("ok", {"valid_actions": [NULL]})], extra_family=(
        "policies:\n  - name: gateway\n    model: openai/m\n    api_base: http://127.0.0.1:9/v1\n"
        "    api_key_env: TOOLEFFECT_TEST_UNSET\n"))
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=gateway")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ApiKeyMissing: api_key_env TOOLEFFECT_TEST_UNSET: the environment variable is "
                                 "not set*"])


@pytest.mark.parametrize(("policy", "message"), [
    ("    api_key: {key}\n", "api_key: a key is never written into a file"),
    ("    api_key_env: {key}\n", "api_key_env holds what looks like a key (not shown)"),
    ("    api_base: http://user:{key}@127.0.0.1:9/v1\n", "api_base holds what looks like a key (not shown)"),
    ("    settings: {{header: 'Bearer {key}'}}\n", "settings.header holds what looks like a key (not shown)"),
])
def test_a_key_written_into_a_policy_file_is_refused_unshown(pytester: pytest.Pytester, policy: str,
                                                             message: str) -> None:
    key = "sk-" + secrets.token_hex(16)
    _family(pytester.path, [_case("ok", {"valid_actions": [NULL]})], extra_family=(
        "policies:\n  - name: leaky\n    model: openai/m\n" + policy.format(key=key)))
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=leaky", f"{OPT_REPORT}=r.json")
    out = result.stdout.str() + result.stderr.str()
    assert "family.yaml" in out and message in out, out[-3000:]
    assert key not in out
    assert all(key not in text for text in _every_output(pytester.path).values())


def test_a_key_in_pyproject_policies_is_a_usage_error_unshown(pytester: pytest.Pytester) -> None:
    key = "sk-ant-" + secrets.token_hex(16)
    _family(pytester.path, [_case("ok", {"valid_actions": [NULL]})])
    pytester.makepyprojecttoml(f'[tool.tooleffect.policies.gw]\nmodel = "openai/m"\napi_key = "{key}"\n')
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=gw")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pyproject.toml: [[]tool.tooleffect.policies.gw[]]: policy 'gw': api_key: a key is "
                                 "never written into a file*api_key_env: NAME*"])
    assert key not in result.stdout.str() + result.stderr.str()


# --- retries ------------------------------------------------------------------------------------

CASE = Case.model_validate(_case("retry", {"valid_actions": [NULL]}))


def _turn(srv: ScriptedServer, retries: int, timeout_s: float = 5.0, pool: TurnPool | None = None) -> Any:
    import_litellm()  # in the test, not in a fixture pytester's module snapshot would undo
    return run_turn(CASE, [], None, Policy(name="p", model="openai/x", api_base=srv.base_url), api_key="x",
                    retries=retries, timeout_s=timeout_s, pool=pool)


@pytest.mark.parametrize(("reply", "retries", "requests", "kind"), [
    (Reply(status=500), 2, 3, "InternalServerError"),
    (Reply(status=503), 1, 2, "ServiceUnavailableError"),
    (Reply(status=429), 2, 3, "RateLimitError"),
    (Reply(status=401), 2, 1, "AuthenticationError"),
    (Reply(status=403), 2, 1, "APIError"),  # litellm names a 403 so
    (Reply(status=400), 2, 1, "BadRequestError"),
    (Reply(reset=True), 2, 3, CONNECTION_RESET),
    (Reply(text="late", delay_s=3.0), 1, 2, "Timeout"),
])
def test_retries_make_at_most_n_plus_one_requests_of_what_is_retryable(reply: Reply, retries: int, requests: int,
                                                                      kind: str) -> None:
    with ScriptedServer([reply]) as srv:
        with pytest.raises(ProviderError) as info:
            _turn(srv, retries, timeout_s=1.0)
        assert len(srv.requests) == requests
    assert info.value.kind == kind, info.value


def test_a_closed_pool_ends_its_threads_and_closes_its_event_loop() -> None:
    """A process that goes on after a run (``pytest.main`` called again, pytester in-process) keeps
    no thread of the run's pool and no unclosed loop (a ResourceWarning when it is collected)."""
    pool = TurnPool(1)
    seen: dict[str, Any] = {}

    async def work() -> None:
        seen["loop"], seen["thread"] = asyncio.get_running_loop(), threading.current_thread()
        seen["worker"] = await asyncio.to_thread(threading.current_thread)  # the loop's default executor

    pool.submit_coroutine(work).result(10)
    pool.close()
    assert seen["loop"].is_closed()
    assert not seen["thread"].is_alive() and not seen["worker"].is_alive()
    pool.close()  # closing again is a no-op


def test_retries_through_a_rate_limit_count_the_same(tmp_path: Path) -> None:
    pool = TurnPool(1, RateLimit(tmp_path / "limit.sqlite", rpm=100, window_s=60.0))
    try:
        with ScriptedServer([Reply(status=500)]) as srv:
            with pytest.raises(ProviderError):
                _turn(srv, 2, pool=pool)
            assert len(srv.requests) == 3
    finally:
        pool.close()


def test_retry_after_is_honoured() -> None:
    """A 429 asking for 2 s is retried after 2 s (the backoff alone would wait 0.5 s)."""
    with ScriptedServer([Reply(status=429, headers={"Retry-After": "2"}), Reply(text="fine")]) as srv:
        turn = _turn(srv, 2)
        first, second = (r["_received"] for r in srv.requests)
    assert turn.emitted["content"] == "fine"
    assert second - first >= 2.0 - 0.05


def test_a_retry_after_beyond_the_cap_ends_the_turn_saying_so() -> None:
    with ScriptedServer([Reply(status=429, headers={"Retry-After": "3600"}), Reply(text="fine")]) as srv:
        t0 = time.perf_counter()
        with pytest.raises(ProviderError, match="retry after 3600 s, more than 60 s: not retried"):
            _turn(srv, 2)
        assert len(srv.requests) == 1 and time.perf_counter() - t0 < 10


def test_a_reset_then_an_answer_recovers() -> None:
    with ScriptedServer([Reply(reset=True), Reply(text="fine")]) as srv:
        assert _turn(srv, 1).emitted["content"] == "fine"
        assert len(srv.requests) == 2


@pytest.mark.parametrize(("text", "key_like"), [
    ("sk-proj-abcdefghijklmnop1234", True),
    ("sk-ant-api03-abcdefghijklmnopqrstuv", True),
    ("AIzaSyA1234567890abcdefghijklmno", True),
    ("hf_abcdefghijklmnopqrstuvwxyz", True),
    ("Bearer abcdefgh12345678", True),
    ("http://user:hunter22@127.0.0.1:8000/v1", True),
    ("https://gw.example/v1?api_key=abcdefgh123", True),
    ("OPENAI_API_KEY", False),
    ("http://127.0.0.1:8000/v1", False),
    ("openai/gpt-4o-mini", False),
    ("task-specific settings", False),
])
def test_what_looks_like_a_key(text: str, key_like: bool) -> None:
    from pytest_tooleffect.util.redaction import looks_like_key

    assert looks_like_key(text) is key_like


def test_known_secrets_are_cut_from_every_failure_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credential variables and named ones are known (short values are not); a key containing another
    is cut whole; a failure made anywhere (an agent's, a sandbox's) carries no secret.
    """
    from pytest_tooleffect.outcomes import Failure
    from pytest_tooleffect.util.redaction import known, redact, redact_obj, register, register_environment

    long_key, inner = "tok-" + secrets.token_hex(10), secrets.token_hex(5)
    env = {"MY_SERVICE_API_KEY": long_key, "SHORT_TOKEN": "1234", "VENDOR_CRED": "vendor-" + secrets.token_hex(8),
           "HOME": "/root/somewhere"}
    register_environment(env, names=("VENDOR_CRED",))
    register(long_key + inner)
    assert {long_key, long_key + inner, env["VENDOR_CRED"]} <= known()
    assert "1234" not in known() and "/root/somewhere" not in known()
    assert redact(f"a={long_key}{inner}; b={long_key}; c={env['VENDOR_CRED']}") == \
        f"a={REDACTED}; b={REDACTED}; c={REDACTED}"
    assert redact_obj({"k": [f"x {long_key}", 3, None], long_key: True}) == {"k": [f"x {REDACTED}", 3, None],
                                                                             REDACTED: True}
    failure = Failure("AgentError", f"login with {long_key} failed", traceback=f"File x\n  key = '{long_key}'")
    assert long_key not in failure.message and long_key not in (failure.traceback or "")


@pytest.mark.parametrize("option", [OPT_API_BASE, "--tooleffect-judge-api-base"])
def test_a_key_in_an_api_base_url_is_a_usage_error_unshown(pytester: pytest.Pytester, option: str) -> None:
    key = "sk-" + secrets.token_hex(16)
    _family(pytester.path, [_case("ok", {"valid_actions": [NULL]})])
    result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/m", f"{option}=http://user:{key}@127.0.0.1:9/v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}: the URL holds what looks like a key (not shown)*"])
    assert key not in result.stdout.str() + result.stderr.str()
