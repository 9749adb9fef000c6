"""The reply judge's calibration: its arithmetic (pure), and the local model's figures held against the docs.

The local-model test runs ``tooleffect calibrate-replies`` with the local model (llama.cpp's
``llama-server`` with Qwen2.5-Coder-0.5B-Instruct, :mod:`pytest_tooleffect.servers.local_model`, started
for the session when none runs and stopped at its end only then, as ``tests/test_real_model.py`` does)
on a small fixed subset of the reply set, at temperature 0, and checks that every figure it prints
is the one docs/replies.md's "The LLM judge" section documents.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.data.reply_scores import (
    judge_agreement,
    judged_rows,
    load_reply_set,
    table_agreement,
    word_agreement,
)
from pytest_tooleffect.scoring.judge import JudgeUsage
from pytest_tooleffect.scoring.kind_judge import KindWordJudge

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "datasets" / "replies"
MODEL = "openai/qwen2.5-coder-0.5b-instruct-q4_k_m"
PORT = 8089
#: the fixed subset the docs' held rows are measured on: every k-th reply of held+test, about 8
SUBSET = ["--split", "held+test", "--judge-limit", "8", "--judge-max-tokens", "96"]


def test_kappa_and_agreement_of_a_two_by_two_table() -> None:
    # rows: the person fails / passes; columns: the judge fails / passes
    got = table_agreement([[20, 5], [10, 15]])
    # p_o = 35/50 = 0.7; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    assert got["n"] == 50 and got["agreement"] == pytest.approx(0.7) and got["kappa"] == pytest.approx(0.4)
    low, high = got["kappa_ci95"]
    assert low < 0.4 < high and (0.4 - low) == pytest.approx(high - 0.4)
    assert got["table"] == {"human_fail": [20, 5], "human_pass": [10, 15]}


def test_a_judge_that_always_passes_agrees_by_chance_only() -> None:
    # the judge says pass to all 40: it agrees with the 12 the person passes, kappa 0
    got = table_agreement([[0, 28], [0, 12]])
    assert got["agreement"] == pytest.approx(0.3) and got["kappa"] == pytest.approx(0.0)
    assert got["kappa_ci95"] is None  # the judge never varies: no interval, not "0 to 0"


def test_an_empty_table_has_no_kappa() -> None:
    got = table_agreement([[0, 0], [0, 0]])
    assert got["n"] == 0 and got["agreement"] is None and math.isnan(got["kappa"]) and got["kappa_ci95"] is None


class WordsJudge:
    """A stand-in for :class:`~pytest_tooleffect.scoring.judge.Judge`'s ``ask``: one word per reply from a
    table, counting the questions asked."""

    model = "words"

    def __init__(self, words: dict[str, str]) -> None:
        self.words = words
        self.usage = JudgeUsage()

    def ask(self, key: str, prompt: str, schema: Any, field_name: str, choices: Any) -> dict[str, Any]:
        self.usage.calls += 1
        reply = next(r for r in self.words if r in prompt)
        return {field_name: self.words[reply]}


def test_the_kind_word_judge_asks_once_per_reply_and_passes_the_kind_it_names() -> None:
    rows = load_reply_set(SET)
    chosen = [r for r in rows if r.split == "dev" and r.reply.strip()][:12]
    # the judge reads every reply as the label says, except that it calls every refusal an answer
    words = {r.reply: ("answer" if r.kind == "refuse" else r.kind) for r in chosen}
    fake = WordsJudge(words)
    kind_judge = KindWordJudge(fake)  # type: ignore[arg-type]
    result = judge_agreement(chosen, kind_judge, "dev")
    assert fake.usage.calls == len(chosen) and result["model"] == "words [kind-word]"
    refusals = sum(r.kind == "refuse" for r in chosen)
    ask = result["kinds"]["ask"]
    assert ask["agreement"] == 1.0 and ask["table"]["human_fail"][1] == 0
    answer = result["kinds"]["answer"]["table"]
    assert answer["human_fail"][1] == refusals  # each refusal passed as an answer
    assert result["kinds"]["refuse"]["table"]["human_pass"] == [refusals, 0]
    # the four kinds at once: every refusal in the answer column, every other reply on the diagonal
    assert kind_judge.words == words
    words_fig = word_agreement(judged_rows(chosen, "dev", None), kind_judge.words)
    assert words_fig["n"] == len(chosen) and words_fig["table"]["refuse"] == [0, 0, refusals, 0]
    assert words_fig["agreement"] == pytest.approx((len(chosen) - refusals) / len(chosen))
    assert 0 < words_fig["kappa"] < 1 and words_fig["kappa_ci95"] is not None


def test_kappa_over_the_four_kinds_is_cohens_on_the_square_table() -> None:
    rows = [r for r in load_reply_set(SET) if r.split == "dev"]
    pick = {k: [r for r in rows if r.kind == k][:10] for k in ("ask", "refuse", "answer")}
    chosen = [r for k in pick for r in pick[k]]
    # ask and refuse read right, answers read as asks half the time
    words = {r.reply: r.kind for r in chosen}
    words.update({r.reply: "ask" for r in pick["answer"][:5]})
    got = word_agreement(chosen, words)
    # table rows ask / refuse / answer: [10, 0, 0], [0, 10, 0], [5, 0, 5]; p_o = 25/30;
    # p_e = (15 * 10 + 10 * 10 + 5 * 10) / 30^2 = 1/3; kappa = (5/6 - 1/3) / (2/3) = 0.75
    assert got["table"]["answer"] == [5, 0, 5, 0] and got["kappa"] == pytest.approx(0.75)
    assert word_agreement(chosen, {r.reply: "answer" for r in chosen})["kappa_ci95"] is None  # one word only


def doc_rows(doc: dict[str, Any], label: str) -> list[str]:
    """The docs' table rows for one calibration's judge figures (what the test compares)."""
    judge = doc["judge"]

    def num(x: float | None) -> str:
        return "n/a" if x is None or x != x else f"{x:.3f}"

    usage = judge["usage"]
    rows = []
    shown = {**judge["kinds"], "all": judge["all"]}
    if "words" in judge:
        shown["4 kinds"] = judge["words"]
    for kind, k in shown.items():
        ci = "none (one side never varies)" if k["kappa_ci95"] is None else \
            f"{num(k['kappa_ci95'][0])} to {num(k['kappa_ci95'][1])}"
        rows.append(f"| {label} | {judge['n_replies']} | {kind} | {k['n']} | {num(k['agreement'])} | "
                    f"{num(k['kappa'])} | {ci} | {len(judge['errors'])} | "
                    f"{usage['input_tokens']} | {usage['output_tokens']} |")
    return rows


@pytest.fixture(scope="module")
def local_model() -> Iterator[str]:
    """The local model's server (reused when one is already running; stopped at the end only when started here)."""
    from pytest_tooleffect.servers import local_model as localmodel

    before = localmodel.running()
    try:
        server = localmodel.serve(port=PORT, max_tokens=160)
    except localmodel.LocalModelError as exc:
        pytest.fail(f"the local model could not be started: {exc}")
    yield f"http://127.0.0.1:{server.port}/v1"
    if before is None:
        localmodel.stop()


@pytest.mark.parametrize("fmt", ["rubric", "kind-word"])
def test_the_local_judge_measures_what_the_docs_say(fmt: str, local_model: str, tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    assert main(["calibrate-replies", str(SET), *SUBSET, "--judge-model", MODEL, "--api-base", local_model,
                 "--judge-format", fmt, "--judge-timeout", "600", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    docs = (ROOT / "docs" / "replies.md").read_text(encoding="utf-8")
    # every figure exactly, but the output tokens: at temperature 0 llama-server's prompt cache (the KV of
    # the request before) still moves a free-text answer by a few tokens, so those agree within 10 %
    documented = {row.rsplit("|", 2)[0]: int(row.rsplit("|", 2)[1]) for row in docs.splitlines()
                  if row.startswith(f"| `{fmt}`, held subset |")}
    for row in doc_rows(doc, f"`{fmt}`, held subset"):
        head, tokens = row.rsplit("|", 2)[0], int(row.rsplit("|", 2)[1])
        assert head in documented, row
        assert abs(tokens - documented[head]) <= 0.1 * documented[head], (row, documented[head])
