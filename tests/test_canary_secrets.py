"""Secrets nowhere: the names that hold a secret (left out of a policy's parameters at any depth),
credentials in URLs (cut, known or not), a proxy's password in the environment (a known secret), and
the registry of secrets scoped to one run (pytester runs pytest inside this process).
"""

from __future__ import annotations

import json
import secrets

import pytest

from pytest_tooleffect.formats import Policy, policy_params
from pytest_tooleffect.util import redaction
from pytest_tooleffect.util.redaction import REDACTED, known, redact, redact_obj, register_environment, secret_name


def _canary(what: str) -> str:
    return f"canary-{what}-{secrets.token_hex(8)}"


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
