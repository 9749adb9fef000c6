"""``tooleffect serve``: the recorded decisions as a local model, one answer per state (messages,
tools and system prompt), run as users run it: the command, then the plugin over litellm's HTTP path.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.formats import Case, Policy, ToolSpec
from pytest_tooleffect.options import OPT_API_BASE, OPT_MODEL, OPT_REPORT
from pytest_tooleffect.servers.recorded import turn_key

READ_TOOL = {"name": "read_thread", "description": "Read a mail thread.",
             "parameters": {"type": "object", "properties": {"thread_id": {"type": "string"}},
                            "required": ["thread_id"]}}
WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
MESSAGES = [{"role": "user", "content": "Anything new on th-1?"}]


def _family(root: Path, name: str, tools: list[dict[str, Any]], label: dict[str, Any], recorded: dict[str, Any],
            prompt: str = "You help.") -> None:
    fam = root / "cases" / name
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text(json.dumps({"name": name, "system_prompt": prompt, "tools": tools}))
    case = {"id": "same-words", "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "messages": MESSAGES,
            "label": label, "recorded": recorded, "source": "authored"}
    (fam / "cases.jsonl").write_text(json.dumps(case) + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(pytester: pytest.Pytester) -> Iterator[str]:
    """Three families whose one state has the same messages: other tools, or another system prompt."""
    root = pytester.path
    _family(root, "mail", [READ_TOOL], {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]},
            {"tool_calls": [{"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}]})
    _family(root, "weather", [WEATHER_TOOL], {"valid_actions": [{"tool": None}]},
            {"tool_calls": [], "text": "I can only tell the weather."})
    _family(root, "mail-strict", [READ_TOOL], {"valid_actions": [{"tool": None}]},
            {"tool_calls": [], "text": "I may not read mail."}, prompt="You never read mail.")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_tooleffect.cli", "serve", "--cases", "cases",
                             "--port", str(port)], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "3 recorded states" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "share their messages" not in err


def test_states_with_the_same_messages_and_other_tools_or_prompt_get_their_own_answers(
        pytester: pytest.Pytester, served: str) -> None:
    result = pytester.runpytest("cases/", f"{OPT_MODEL}=openai/recorded-agent", f"{OPT_API_BASE}={served}",
                                f"{OPT_REPORT}=r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)  # each state answered with its own recorded turn, as replay scores it
    report = json.loads((pytester.path / "r.json").read_text())
    assert {b["family"]: b["n_scored"] for b in report["blocks"]} == {"mail": 1, "mail-strict": 1, "weather": 1}


def test_the_served_model_is_listed_and_other_paths_get_a_json_404(served: str) -> None:
    import urllib.error
    import urllib.request

    with urllib.request.urlopen(f"{served}/models", timeout=10) as resp:
        listing = json.loads(resp.read())
    assert listing["object"] == "list" and [m["id"] for m in listing["data"]] == ["recorded-agent"]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{served}/files", timeout=10)
    assert err.value.code == 404 and "GET /v1/files" in json.loads(err.value.read())["error"]["message"]



@pytest.mark.parametrize(("method", "path", "body", "status", "says"), [
    ("POST", "/chat/completions", b"[]", 400, "a JSON list, not an object"),
    ("POST", "/chat/completions", b"\xff\xfe", 400, "not JSON"),
    ("POST", "/chat/completions", b"{\"model\": ", 400, "not JSON"),
    ("POST", "/chat/completions", [b"[", b"]"], 400, "a JSON list, not an object"),  # chunked: the chunks are read
    ("POST", "/chat/completions", [b'{"model": "m", ', b'"messages": [{"role": "user", "content": "x"}]}'], 404,
     "no recorded state"),
    ("POST", "/chat/completions", b'{"model": "m", "messages": "hello", "tools": 5}', 400,
     "messages: a chat request's messages are a non-empty list of message objects, got a JSON str"),
    # a malformed request was answered 404 as a state not recorded
    ("POST", "/chat/completions", b'{"messages": "x"}', 400, "tooleffect serve: messages: a chat request's messages"),
    ("POST", "/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "tools": 5}', 400,
     "tooleffect serve: tools: a list of tool objects"),
    ("POST", "/chat/completions", b'{"messages": [3]}', 400, "tooleffect serve: messages[0]: a message is an object"),
    ("HEAD", "/models", None, 200, None),
    ("GET", "/models?limit=1", None, 200, "recorded-agent"),
    ("OPTIONS", "/models", None, 405, "not allowed"),
    ("DELETE", "/models", None, 405, "not allowed"),
], ids=["list-body", "not-utf8", "cut-json", "chunked-list", "chunked-unknown-state", "messages-a-string", "messages-only-a-string",
    "tools-a-number", "message-a-number", "head", "query", "options", "delete"])
def test_a_bad_request_gets_a_json_error_and_the_server_goes_on(
        served: str, method: str, path: str, body: bytes | list[bytes] | None, status: int, says: str | None) -> None:
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(served)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    # a list is sent in chunks (Transfer-Encoding: chunked, no Content-Length), as http.client sends an iterable
    conn.request(method, url.path + path, body=iter(body) if isinstance(body, list) else body)
    resp = conn.getresponse()
    payload = resp.read()
    assert resp.status == status and resp.getheader("Content-Type") == "application/json", (resp.status, payload)
    assert says is None or says in payload.decode(), payload
    conn.close()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", url.path + "/models")
    assert conn.getresponse().status == 200  # still serving


def test_turn_key_separates_tools_and_prompt_and_ignores_their_order() -> None:
    from pytest_tooleffect.decide.model_turn import build_request

    case = Case.model_validate({"id": "c", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                                "messages": MESSAGES, "source": "authored"})
    read, weather = ToolSpec.model_validate(READ_TOOL), ToolSpec.model_validate(WEATHER_TOOL)
    policy = Policy(name="p", model="m")

    def key(offered: list[ToolSpec], prompt: str = "You help.", **kw: bool) -> str:
        return turn_key(build_request(case, offered, prompt, policy)[0], **kw)

    assert key([read]) != key([weather])
    assert key([read]) != key([read], "You never read mail.")
    assert key([read, weather]) == key([weather, read])
    assert key([read], system=False) == key([read], "You never read mail.", system=False)
    assert key([read], tools=False) == key([weather], tools=False)


def _start(root: Path, *flags: str) -> tuple[subprocess.Popen[str], str, str]:
    """``tooleffect serve`` over ``root/cases`` on a free loopback port: the process, its ``/v1`` base
    URL and the first line it printed (it holds one recorded state)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pytest_tooleffect.cli", "serve", "--cases", "cases",
                             "--port", str(port), *flags], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "1 recorded states" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, f"http://127.0.0.1:{port}/v1", line


def _serve(root: Path, *flags: str) -> tuple[subprocess.Popen[str], str]:
    proc, base, _ = _start(root, *flags)
    return proc, f"{base}/chat/completions"


@pytest.mark.parametrize("ignore", [False, True])
def test_an_agent_with_its_own_system_prompt_is_answered_when_the_prompt_is_ignored(tmp_path: Path,
                                                                                    ignore: bool) -> None:
    """The example agents write their own system prompt: ``--ignore-system-prompt`` matches their
    states on messages and tools; without it the 404 says what did not match."""
    import urllib.error
    import urllib.request

    from pytest_tooleffect.decide.model_turn import build_request

    _family(tmp_path, "mail", [READ_TOOL], {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-1"}}]},
            {"tool_calls": [{"name": "read_thread", "arguments": '{"thread_id": "th-1"}'}]})
    case = Case.model_validate({"id": "c", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                                "messages": MESSAGES, "source": "authored"})
    body, _ = build_request(case, [ToolSpec.model_validate(READ_TOOL)], "I am an agent with my own prompt.",
                            Policy(name="p", model="m"))
    proc, url = _serve(tmp_path, *(["--ignore-system-prompt"] if ignore else []))
    try:
        request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        if ignore:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - 127.0.0.1
                reply = json.loads(answer.read())
            assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read_thread"
        else:
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(request, timeout=30)  # noqa: S310 - 127.0.0.1
            assert info.value.code == 404
            assert "no recorded state under cases has this request's messages, tools and system prompt" in (
                info.value.read().decode())
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def _length(body: bytes) -> bytes:
    return b"Content-Length: %d" % len(body)


_DEEP = b"[" * 100_000 + b"]" * 100_000
_LONG_INT = b'{"model": ' + b"9" * 5000 + b"}"


@pytest.mark.parametrize(("head", "rest", "status", "says"), [
    (b"Transfer-Encoding: chunked", b"zz\r\n[]\r\n0\r\n\r\n", b"400", "not a hex length"),
    (b"Transfer-Encoding: chunked", b"%x\r\n" % (65 * 1024 * 1024), b"400", "longer than"),
    (b"Transfer-Encoding: chunked", b"+2\r\n{}\r\n0\r\n\r\n", b"400", "not a hex length"),
    (b"Transfer-Encoding: chunked", b"2_0\r\n{}\r\n0\r\n\r\n", b"400", "not a hex length"),
    (b"Transfer-Encoding: chunked", b"2\r\n{}XX\r\n0\r\n\r\n", b"400", "not followed by CRLF"),
    (b"Transfer-Encoding: chunked", b"9\r\n{}", b"400", "ended inside a chunk"),
    (b"Transfer-Encoding: gzip, chunked", b"0\r\n\r\n", b"501", "not supported"),
    (b"Content-Length: -3", b"", b"400", "not a length"),
    (b"Content-Length: many", b"", b"400", "not a length"),
    (b"Content-Length: 2\r\nContent-Length: 3", b"{}", b"400", "different Content-Length"),
    (b"Content-Length: 1000", b'{"model": "m"}', b"400", "ended after 14 of its Content-Length 1000"),
    (_length(_DEEP), _DEEP, b"400", "not JSON"),
    (_length(_LONG_INT), _LONG_INT, b"400", "not JSON"),
    (b"Content-Length: +2", b"{}", b"400", "not a length"),
    (b"Content-Length: 0_2", b"{}", b"400", "not a length"),
    (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", b"2\r\n{}\r\n0\r\n\r\n", b"501", "not supported"),
    (b"Transfer-Encoding: chunked", b"2\r\n{}\r\n0\r\n", b"400", "ended before the empty line"),
], ids=["chunk-size-not-hex", "chunk-too-long", "chunk-size-signed", "chunk-size-underscore", "chunk-without-crlf",
        "chunk-cut", "other-coding", "negative-length", "length-not-a-number", "two-lengths", "body-shorter",
        "nested-too-deep", "integer-too-long", "length-signed", "length-underscore", "second-coding-header",
        "chunked-cut-after-last-chunk"])
def test_a_body_that_cannot_be_read_gets_a_json_error(served: str, head: bytes, rest: bytes, status: bytes,
                                                      says: str) -> None:
    """A 400 (a 501 for a transfer coding it does not speak), never a traceback and no answer; the
    client stops sending after its bytes, so a body shorter than announced ends."""
    from urllib.parse import urlsplit

    url = urlsplit(served)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=10) as sock:
        sock.sendall(b"POST %s/chat/completions HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n%s" % (url.path.encode(), head, rest))
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest_of_answer = answer.partition(b"\r\n")
    assert status_line.split()[1] == status, answer[:300]
    assert says in json.loads(rest_of_answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]


def _post_raw(port: int, body: bytes, close_early: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        if close_early:
            return b""
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_a_script_that_answers_no_reply_gets_a_json_400_and_a_replies_iterator_is_read_once(
        capfd: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    with ScriptedServer(lambda body: None) as srv:  # type: ignore[arg-type,return-value]
        answer = _post_raw(srv.port, b'{"model": "m"}')
        assert answer.split()[1] == b"400" and b"the script answered NoneType, not a Reply" in answer
    with ScriptedServer(iter([Reply(text="one"), Reply(text="two")])) as srv:
        texts = [json.loads(_post_raw(srv.port, b"{}").split(b"\r\n\r\n", 1)[1])["choices"][0]["message"]["content"]
                 for _ in range(3)]
        assert texts == ["one", "two", "two"]  # the last one repeats
    with pytest.raises(TypeError, match="Reply objects, got dict"):
        ScriptedServer([{"text": "hi"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one reply"):
        ScriptedServer(iter([]))


def test_a_client_that_leaves_before_its_error_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    import time

    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    with ScriptedServer([Reply(text="ok")]) as srv:
        for _ in range(20):
            _post_raw(srv.port, b"{" + b" " * 200_000, close_early=True)  # not JSON; the client has gone
        time.sleep(0.5)
        assert b"ok" in _post_raw(srv.port, b"{}")  # it goes on serving
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipe" not in err, err[-2000:]


@pytest.mark.parametrize("reply_kwargs", [
    {"tool_calls": [("a",)]}, {"tool_calls": [("a", {"x": {1}})]}, {"text": "x", "headers": {"X-A": "\u2603"}},
], ids=["call-without-arguments", "arguments-not-json", "header-not-latin-1"])
def test_a_reply_the_wire_cannot_carry_gets_a_json_500_and_no_traceback(
        reply_kwargs: dict[str, Any], capfd: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    with ScriptedServer([Reply(**reply_kwargs)]) as srv:
        answer = _post_raw(srv.port, b'{"model": "m"}')
    assert answer.split()[1] == b"500" and b"the script's reply cannot be sent" in answer, answer[:300]
    assert "Traceback" not in capfd.readouterr().err


def test_serve_keeps_no_request_body_past_its_request(pytester: pytest.Pytester) -> None:
    """Ten 4 MiB bodies to the server ``tooleffect serve`` runs: it keeps none of them, and the memory
    the process holds after the tenth is what it held after the first (traced by tracemalloc, every
    thread's allocations).  The test double, which keeps what it is sent, shows the measure sees a
    kept body."""
    import gc
    import http.client
    import threading
    import time
    import tracemalloc

    from pytest_tooleffect.servers.recorded import recorded_server
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    _family(pytester.path, "mail", [READ_TOOL], {"valid_actions": [{"tool": None}]},
            {"tool_calls": [], "text": "Nothing new."})
    body = json.dumps({"model": "recorded-agent", "messages": [{"role": "user", "content": "x" * (4 << 20)}]}).encode()

    def held_after(server: ScriptedServer, n: int, status: int) -> int:
        """Bytes traced after ``n`` more bodies were answered with ``status``."""
        for _ in range(n):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == status
            conn.close()
        deadline = time.monotonic() + 30  # the request's thread ends once it sees the connection closed
        while threading.active_count() > idle and time.monotonic() < deadline:
            time.sleep(0.01)
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    served, states, _ = recorded_server(pytester.path / "cases", system=True)
    double = ScriptedServer([Reply(text="ok")])
    idle = threading.active_count() + 1  # and the server's own thread
    tracemalloc.start()
    try:
        with served:
            first = held_after(served, 1, 404)  # no recorded state has these words
            tenth = held_after(served, 9, 404)
            assert served.received == 10 and served.requests == []
        with double:
            before = held_after(double, 1, 200)
            kept = held_after(double, 9, 200)
    finally:
        tracemalloc.stop()
    assert states == 1
    assert tenth - first < len(body) // 4, (first, tenth)  # not one body more, let alone nine
    assert kept - before > 9 * len(body), (before, kept)  # the double keeps nine more: the measure sees them


def _post(base: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{base}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_a_case_added_while_serving_is_answered_and_a_404_says_what_was_loaded(pytester: pytest.Pytester) -> None:
    """The trial: a case added after ``tooleffect serve`` started got a bare 404.  The server reads the
    cases again when their files change, over HTTP on 127.0.0.1, and its 404 says what it holds.
    """
    _family(pytester.path, "mail", [READ_TOOL], {"valid_actions": [{"tool": None}]},
            {"tool_calls": [], "text": "Nothing new."})
    proc, base, line = _start(pytester.path)
    try:
        assert "read again when they change" in line, line
        new_words = [{"role": "user", "content": "Please read th-2."}]
        request = {"model": "recorded-agent", "messages": [{"role": "system", "content": "You help."}, *new_words],
                   "tools": [{"type": "function", "function": READ_TOOL}]}
        status, body = _post(base, request)
        assert status == 404
        assert "1 recorded states; the case files are read again whenever they change" in body["error"]["message"]
        added = {"id": "added-later", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                 "messages": new_words, "label": {"valid_actions": [{"tool": "read_thread", "args": {"thread_id": "th-2"}}]},
                 "recorded": {"tool_calls": [{"name": "read_thread", "arguments": '{"thread_id": "th-2"}'}]},
                 "source": "authored"}
        with (pytester.path / "cases" / "mail" / "cases.jsonl").open("a") as fh:
            fh.write(json.dumps(added) + "\n")
        status, body = _post(base, request)
        assert status == 200, body
        (call,) = body["choices"][0]["message"]["tool_calls"]
        assert call["function"] == {"name": "read_thread", "arguments": '{"thread_id": "th-2"}'}
        (pytester.path / "cases" / "mail" / "more.jsonl").write_text(json.dumps({**added, "id": "in-a-new-file",
            "messages": [{"role": "user", "content": "And th-3?"}], "recorded": {"text": "Reading it."}}) + "\n")
        request["messages"][-1] = {"role": "user", "content": "And th-3?"}
        status, body = _post(base, request)
        assert status == 200 and body["choices"][0]["message"]["content"] == "Reading it.", body
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert err.count("changed: read again") == 2, err
    assert "changed: read again, 3 recorded states" in err


def test_serve_names_each_invalid_case_at_start_and_on_reload_and_serves_the_rest(pytester: pytest.Pytester) -> None:
    """``tooleffect serve`` over invalid case files said "0 recorded states" and named nothing, and a
    broken file added later was skipped without a word.  Each invalid case is named on stderr (file,
    case id, field, line), at start and on every reload; the valid cases are answered.
    """
    _family(pytester.path, "mail", [READ_TOOL], {"valid_actions": [{"tool": None}]},
            {"tool_calls": [], "text": "Nothing new."})
    fam = pytester.path / "cases" / "mail"
    broken = {"id": "no-placement", "messages": [{"role": "user", "content": "th-9?"}],
              "label": {"valid_actions": [{"tool": None}]}, "recorded": {"text": "No."}, "source": "authored"}
    with (fam / "cases.jsonl").open("a") as fh:
        fh.write(json.dumps(broken) + "\n")
    proc, base, line = _start(pytester.path)
    try:
        request = {"model": "recorded-agent", "messages": [{"role": "system", "content": "You help."}, *MESSAGES],
                   "tools": [{"type": "function", "function": READ_TOOL}]}
        status, body = _post(base, request)
        assert status == 200 and body["choices"][0]["message"]["content"] == "Nothing new.", body
        (fam / "later.jsonl").write_text(json.dumps({**broken, "id": "bad-later", "placement": {"step": 3,
                                                                                             "run_length": 1}}) + "\n")
        status, body = _post(base, request)  # read again: the valid case still answers
        assert status == 200 and body["choices"][0]["message"]["content"] == "Nothing new.", body
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = err.splitlines()
    start = [x for x in lines if "case no-placement: placement:" in x]
    assert len(start) == 2, err  # at start and again on the reload
    assert start[0].startswith("tooleffect serve: skipping an invalid case: cases/mail/cases.jsonl: case no-placement: "
                               "placement: ") and start[0].endswith("(line 2)"), start[0]
    (later,) = [x for x in lines if "case bad-later:" in x]
    assert "cases/mail/later.jsonl: case bad-later: placement" in later and later.endswith("(line 1)"), later
    assert "tooleffect serve: 1 invalid cases skipped (each named above); the valid ones are served" in lines
    assert "tooleffect serve: 2 invalid cases skipped (each named above); the valid ones are served" in lines
