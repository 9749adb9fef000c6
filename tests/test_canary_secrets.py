"""Secrets nowhere: a run seeded with canary secrets in every place one can sit, and every output
it leaves (files and terminal) searched for them.

The canaries: a credential variable's value inside a case message (the HTML page embeds the case
states), a model echoing it, policy settings named like secrets at any depth (and an agent echoing
its settings), credentials in a
URL the run only records (a policy's prompt), a proxy's ``user:password@`` in the environment, and
a Redis password in the shared rate limit's URL (a real ``redis-server`` that demands it, so the
run uses it).  Then: the secret names' rule, URL credentials, and the registry of secrets scoped to
one run (pytester runs pytest inside this process).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.formats import Policy, policy_params
from pytest_tooleffect.options import (
    INI_RATE_BACKEND,
    OPT_CACHE,
    OPT_HTML,
    OPT_POLICY,
    OPT_RECORDS,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_RPM,
    OPT_SUMMARY_MD,
    OPT_TIMEOUT,
)
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from pytest_tooleffect.util import redaction
from pytest_tooleffect.util.redaction import REDACTED, known, redact, redact_obj, register_environment, secret_name
from tests.demo_family import FAMILY, RULES
from tests.test_redis_limit import start_redis


def _canary(what: str) -> str:
    return f"canary-{what}-{secrets.token_hex(8)}"


@pytest.fixture(scope="module")
def redis_password() -> str:
    return _canary("redis")


@pytest.fixture(scope="module")
def redis_port(tmp_path_factory: pytest.TempPathFactory, redis_password: str) -> Iterator[int]:
    """A redis-server of its own on 127.0.0.1 that demands ``redis_password`` (``requirepass``)."""
    import redis

    proc, url = start_redis(tmp_path_factory.mktemp("redis"), redis_password)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(redis.AuthenticationError):  # the password is needed: a run without it would fail
        redis.Redis(host="127.0.0.1", port=port).ping()
    yield port
    proc.terminate()
    proc.wait(10)


def _page_data(html: str) -> Any:
    import base64
    import gzip

    packed = re.search(r'id="te-data">([^<]*)</script>', html)
    assert packed is not None
    return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))


def _every_output(root: Path) -> dict[str, str]:
    """Every file a run left under ``root`` (reports, records, summary, JUnit, json-report, HTML, model
    cache), as text, an HTML page's packed data (gzip, base64) unpacked; the run's inputs (``cases/``,
    ``oracle/``) left out.
    """
    inputs = {root / "cases", root / "oracle"}
    out = {str(p.relative_to(root)): p.read_text(errors="replace") for p in root.rglob("*")
           if p.is_file() and "__pycache__" not in p.parts and not any(i in p.parents for i in inputs)}
    for name in [n for n in out if n.endswith(".html")]:
        out[f"{name} (data)"] = json.dumps(_page_data(out[name]), ensure_ascii=False)
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_no_canary_secret_reaches_any_output(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                             redis_port: int, redis_password: str, workers: int) -> None:
    key, auth, nested, token, api_password, proxy_password, db_password, deep_password = (
        _canary(w) for w in ("key", "auth", "nested", "token", "api", "proxy", "db", "deep"))
    monkeypatch.setenv("TOOLEFFECT_CANARY_API_KEY", key)  # a credential variable: a secret the run knows
    proxy = f"http://proxyuser:{proxy_password}@127.0.0.1:9/"
    monkeypatch.setenv("HTTPS_PROXY", proxy)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    api_url = f"https://svc:{api_password}@api.internal.example/v1"
    redis_url = f"redis://:{redis_password}@127.0.0.1:{redis_port}/0"

    def script(body: dict[str, Any]) -> Reply:
        text = json.dumps(body.get("messages"))
        if "[echo]" in text:  # the model repeats what it was given, and more
            return Reply(text=f"Your key is {key}; the gateway is {api_url}; the proxy {proxy}; redis {redis_url}")
        if "[fail]" in text:
            return Reply(status=400, error_message=f"bad request via {proxy} with key {key} to {api_url}")
        return Reply(tool_calls=[("read_thread", {"thread_id": f"{key} {api_url}"})])

    cases = [{"id": cid, "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "timezone": "Europe/Madrid",
              "messages": [{"role": "user", "content": f"[{cid}] my key is {key}, use {api_url}"}],
              "label": {"valid_actions": [{"tool": None}]}, "recorded": {"tool_calls": []}, "source": "authored"}
             for cid in ("echo", "fail", "call")]
    with ScriptedServer(script) as srv:
        fam = pytester.path / "cases" / "demo"
        fam.mkdir(parents=True)
        (pytester.path / "oracle").mkdir()
        (pytester.path / "oracle" / "demo.yaml").write_text(RULES)
        (fam / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
        (fam / "family.yaml").write_text(FAMILY + f"""\
policies:
  - name: canary
    model: openai/canary-model
    api_base: {srv.base_url}
    system_prompt: "You schedule meetings. The calendar API is {api_url}."
    settings:
      style: terse
      max_tokens_hint: 64
      nested: {{auth_header: "Basic {auth}", depth: {{client_secret: {nested}, kept: 1}}}}
      servers: [{{name: a, accessToken: {token}}}, {{name: b, X-Api-Key: {token}}}]
  - name: leaky
    settings: {{nested: {{deeper: [{{password: {deep_password}}}]}}, db_password: {db_password}, style: terse}}
""")
        # an agent that repeats its settings: in its call's arguments (the failure line) and on its stdout
        pytester.makeconftest("""
import json

def pytest_tooleffect_agent(policy, config):
    if policy.name != "leaky":
        return None

    def echo(state):
        text = json.dumps(state.policy)
        print("my policy:", text)
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read_thread", "arguments": json.dumps({"thread_id": text})}}]}
    return echo
""")
        result = pytester.runpytest(
            "cases/", *(["-n", str(workers)] if workers else []), f"{OPT_POLICY}=canary", f"{OPT_POLICY}=leaky",
            f"{OPT_RETRIES}=0",
            f"{OPT_TIMEOUT}=10", f"{OPT_RPM}=6000", "-o", f"{INI_RATE_BACKEND}={redis_url}",
            f"{OPT_REPORT}=out/r.json", f"{OPT_RECORDS}=out/records.jsonl", f"{OPT_SUMMARY_MD}=out/r.md",
            f"{OPT_HTML}=out/r.html", f"{OPT_CACHE}=readwrite", "--junitxml=out/junit.xml", "--json-report",
            "--json-report-file=out/j.json", "-rA")
        asked = srv.requests
    result.assert_outcomes(passed=1, failed=1 + 3, errors=1)  # the leaky agent calls a tool where none is needed
    assert len(asked) == 3 and api_url in json.dumps(asked[0]["messages"])  # the policy's prompt went out whole
    outputs = _every_output(pytester.path)
    assert {"out/r.json", "out/records.jsonl", "out/r.md", "out/r.html", "out/junit.xml", "out/j.json"} <= set(outputs)
    canaries = {"key": key, "auth": auth, "nested": nested, "token": token, "api": api_password,
                "proxy": proxy_password, "redis": redis_password, "db": db_password, "deep": deep_password}
    terminal = result.stdout.str() + result.stderr.str()
    leaked = sorted((name, what) for name, text in [*outputs.items(), ("terminal", terminal)]
                    for what, canary in canaries.items() if canary in text)
    assert leaked == []
    # and what is there instead: the same redaction everywhere
    run = json.loads(outputs["out/r.json"])["run"]
    assert f"{INI_RATE_BACKEND}=redis://:{REDACTED}@127.0.0.1:{redis_port}/0" in run["command"]
    settings = run["policies"]["canary"]["settings"]
    assert settings == {"style": "terse", "max_tokens_hint": 64, "nested": {"depth": {"kept": 1}},
                        "servers": [{"name": "a"}, {"name": "b"}]}
    assert f"https://svc:{REDACTED}@api.internal.example/v1" in run["policies"]["canary"]["system_prompt"]
    assert run["policies"]["leaky"]["settings"] == {"nested": {"deeper": [{}]}, "style": "terse"}
    echoed = [json.loads(r)["verdict"]["emitted"][0]["args"]["thread_id"]
              for r in outputs["out/records.jsonl"].splitlines() if json.loads(r)["policy"] == "leaky"]
    assert len(echoed) == 3 and all(f'"db_password": "{REDACTED}"' in e for e in echoed)  # the agent's echo, cut
    assert terminal.count(f'"password": "{REDACTED}"') >= 3  # the failure lines and the agent's captured output
    page = _page_data(outputs["out/r.html"])
    (message,) = page["cases"]["demo"]["echo"]["messages"]
    assert message["content"] == f"[echo] my key is {REDACTED}, use https://svc:{REDACTED}@api.internal.example/v1"
    assert REDACTED in terminal  # the provider's message, shown with its secrets cut out


# --- the rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "secret"), [
    ("api_key", True), ("API_KEY", True), ("apiKey", True), ("X-Api-Key", True), ("key", True),
    ("token", True), ("accessToken", True), ("refresh_token", True), ("client_secret", True),
    ("secretName", True), ("password", True), ("db_passwd", True), ("passphrase", True),
    ("auth", True), ("auth_header", True), ("authHeader", True), ("Authorization", True),
    ("authentication", True), ("credentials", True), ("session_cookie", True),
    ("api_key_env", False), ("max_tokens", False), ("tokens_per_call", False), ("keyword", False),
    ("author", False), ("style", False), ("temperature", False), ("tool_descriptions", False), ("name", False),
])
def test_the_names_that_hold_a_secret(name: str, secret: bool) -> None:
    assert secret_name(name) is secret


def test_secret_settings_are_left_out_at_any_depth() -> None:
    policy = Policy(name="p", model="openai/x", settings={
        "nested": {"auth_header": "Basic abc", "deeper": [{"client_secret": "s", "accessToken": "t", "n": 1}]},
        "X-Api-Key": "k", "max_tokens": 10, "keyword": "kept"})
    assert policy_params(policy) == {"name": "p", "model": "openai/x", "settings": {
        "nested": {"deeper": [{"n": 1}]}, "max_tokens": 10, "keyword": "kept"}}


@pytest.mark.parametrize(("text", "expected"), [
    ("redis://:hunter2hunter2@10.0.0.1:6379/0", f"redis://:{REDACTED}@10.0.0.1:6379/0"),
    ("proxy http://bob:pw@proxy:3128 failed", f"proxy http://bob:{REDACTED}@proxy:3128 failed"),
    ("clone https://ghp_token123@github.com/o/r", f"clone https://{REDACTED}@github.com/o/r"),
    ("rediss://user:p%40ss@h/1 and https://a:b@c/", f"rediss://user:{REDACTED}@h/1 and https://a:{REDACTED}@c/"),
    ("https://example.com/path?email=a@b.c", "https://example.com/path?email=a@b.c"),
    ("mail me at a@b.c or see https://example.com/x", "mail me at a@b.c or see https://example.com/x"),
])
def test_url_credentials_are_cut_known_or_not(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact_obj({text: [text]}) == {expected: [expected]}


def test_a_proxy_password_in_the_environment_is_a_known_secret() -> None:
    before = redaction.new_scope()
    try:
        password = _canary("proxy")
        register_environment({"HTTPS_PROXY": f"http://u:{password}@proxy:3128", "HOME": "/root"})
        assert password in known() and redact(f"the proxy said {password}") == f"the proxy said {REDACTED}"
    finally:
        redaction.restore_scope(before)
    assert password not in known()


def test_the_test_on_json_text_finds_every_secret_as_json_writes_it() -> None:
    from pytest_tooleffect.util.redaction import json_may_hold_secret

    before = redaction.new_scope()
    try:
        quoted = 'pa"ss\\word-' + secrets.token_hex(4)  # JSON writes its quote and backslash escaped
        redaction.register(quoted)
        for value, holds in (({"m": f"say {quoted}"}, True), ({"m": "ordinary"}, False),
                             ({"u": "see https://a:b@c/"}, True), ({"u": "https://example.com/x"}, False)):
            text = json.dumps(value, ensure_ascii=False)
            assert json_may_hold_secret(text) is holds
            assert (redact_obj(value) != value) is holds
    finally:
        redaction.restore_scope(before)


def test_a_runs_secrets_end_with_it(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester runs pytest inside this process: a run's secrets are its own, forgotten when it ends,
    and the secrets known before it are known again after it.
    """
    from tests.demo_family import write_demo

    outer = _canary("outer")
    redaction.register(outer)
    before = known()
    try:
        inner = _canary("inner")
        monkeypatch.setenv("TOOLEFFECT_INNER_API_KEY", inner)
        write_demo(pytester.path)
        pytester.makeconftest("""
import json
from pytest_tooleffect.util.redaction import known

def pytest_sessionfinish(session):
    (session.config.rootpath / "known.json").write_text(json.dumps(sorted(known())))
""")
        pytester.runpytest("cases/")
        during = set(json.loads((pytester.path / "known.json").read_text()))
        assert inner in during and outer not in during  # the run knew its own secrets, not the ones around it
        assert known() == before and inner not in known()  # ended: the secrets before it, and only those
    finally:
        redaction.restore_scope(before - {outer})
