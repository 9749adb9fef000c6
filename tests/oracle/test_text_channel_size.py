"""The text channel is read in time linear in its length, whatever a model writes into it.

A reply of 1,000,000 ``[`` took 111 s to read (each ``[`` started a JSON read that went to the
end of the text, and each failed read counted the lines before it); these replies are now read in
well under a second each, and the JSON reader runs a bounded number of times.  A reply whose JSON
would need more reading than the bound is a malformed call saying where reading stopped, never a
clean abstention.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from pytest_tooleffect.oracle import parse_emission, score, textscan
from pytest_tooleffect.oracle.textscan import WORK_BASE, WORK_PER_CHAR, JsonScan

OFFERED = ["get_weather", "read_thread"]
CALL = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
N = 1_000_000
#: a generous bound on the seconds one hostile reply may take on a loaded machine (each takes well
#: under one; the quadratic reader took minutes on the smallest of them)
SECONDS = 5.0


class _CountingDecoder:
    """``json.JSONDecoder`` that counts its reads."""

    def __init__(self) -> None:
        self.reads = 0
        self._decoder = json.JSONDecoder()

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        self.reads += 1
        return self._decoder.raw_decode(s, idx)


HOSTILE = [
    pytest.param("[" * N + CALL, ["get_weather"], id="a million [ then a call"),
    pytest.param("[" * N, [], id="a million ["),
    pytest.param("[ " * (N // 2) + CALL, ["get_weather"], id="[ with blanks then a call"),
    pytest.param("{" * N + CALL, ["get_weather"], id="a million { then a call"),
    pytest.param("[{" * (N // 2) + CALL, ["get_weather"], id="[{ repeated then a call"),
    pytest.param("[[x" * (N // 3) + CALL, ["get_weather"], id="[[x repeated then a call"),
    pytest.param("<tool_call>" * (N // 11) + CALL, ["get_weather"], id="unclosed tags then a call"),
    pytest.param("```" * (N // 3) + CALL, ["get_weather"], id="fences then a call"),
    pytest.param('name: "get_weather" ' * (N // 20), [], id="name fields without braces"),
]


@pytest.mark.parametrize(("text", "names"), HOSTILE)
def test_hostile_replies_are_read_in_linear_time(monkeypatch: pytest.MonkeyPatch, text: str,
                                                 names: list[str]) -> None:
    decoder = _CountingDecoder()
    monkeypatch.setattr(textscan, "_JSON", decoder)
    began = time.perf_counter()
    em = parse_emission({"content": text}, offered=OFFERED)
    took = time.perf_counter() - began
    assert list(em.malformed_names) == names
    assert not any("read for calls up to" in r for r in em.malformed)  # read whole: no bound reached
    assert decoder.reads <= 4  # what cannot be a value, and runs of [ whose innermost fails, are not read
    assert took < SECONDS, f"{took:.1f} s for {len(text):,} characters"


def test_the_reading_is_bounded_by_the_texts_length() -> None:
    """Every JSON value in a reply of many small calls is read once: the work is the text's length."""
    text = " ".join([CALL] * 20_000)
    scan = JsonScan(text)
    pos, found = 0, 0
    while (got := scan.next_value(pos)) is not None:
        found += 1
        pos = got[2]
    assert found == 20_000
    assert scan.work <= len(text) and scan.cut_at is None


def test_a_reply_past_the_bound_is_a_malformed_call_that_says_where_reading_stopped() -> None:
    text = "[1," * (N // 3) + CALL  # every [ starts a read that nests until the interpreter refuses it
    began = time.perf_counter()
    em = parse_emission({"content": text}, offered=OFFERED)
    assert time.perf_counter() - began < SECONDS
    cut = [r for r in em.malformed if "read for calls up to character" in r]
    assert len(cut) == 1 and f"of {len(text):,} only" in cut[0], em.malformed
    verdict = score(em, {"valid_actions": [{"tool": None}]}, [{"name": n} for n in OFFERED])
    assert verdict.kind == "malformed_call" and not verdict.name_ok  # never a clean abstention


def test_the_bound_leaves_real_replies_whole() -> None:
    """A reply nested 40 deep, 60,000 characters long, is read whole: the bound is far past real JSON."""
    inner = json.dumps({"rows": [{"id": i, "tags": ["a", "b"]} for i in range(1500)]})
    text = "Here: " + "[" * 40 + inner + "]" * 40 + " " + CALL
    scan_budget = WORK_PER_CHAR * len(text) + WORK_BASE
    em = parse_emission({"content": text}, offered=OFFERED)
    assert list(em.malformed_names) == ["get_weather"] and scan_budget > 40 * len(text)


def test_the_raw_texts_of_many_calls_in_one_list_stay_linear() -> None:
    """A list of 20,000 calls gives each its whole list as raw text: past twice the reply, each is cut."""
    text = "[" + ", ".join([CALL] * 20_000) + "]"
    em = parse_emission({"content": text}, offered=OFFERED)
    assert len(em.malformed) == 20_000
    assert sum(len(r) for r in em.malformed_raw) <= 3 * len(text) + (1 << 17)
    assert em.malformed_raw[0] == text and em.malformed_raw[-1].endswith("characters, cut)")
