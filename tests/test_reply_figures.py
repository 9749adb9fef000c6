"""The reply fallback's and the phantom check's figures on the labelled reply set's held-out rows cannot fall.

The published figures live in one place, :mod:`pytest_tooleffect.oracle.reply_figures`: docs/replies.md's
"Published figures" table must print the same numbers, a measurement under any of them fails, and
``FALLBACK_PRECISION`` (which marks a fallback verdict ``low_precision``) is read from them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.data.reply_scores import half_of, in_split, judge_agreement, load_reply_set, measure
from pytest_tooleffect.oracle.reply import FALLBACK_PRECISION, USEFUL_PRECISION
from pytest_tooleffect.oracle.reply_figures import FIGURES, SPLIT

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "datasets" / "replies"


@pytest.fixture(scope="module")
def figures() -> dict[str, object]:
    return dict(measure(load_reply_set(SET), SPLIT))


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_precision_and_recall_on_the_held_out_rows_stay_at_the_published_figures(name: str,
                                                                                  figures: dict[str, object]) -> None:
    fig = figures[name]
    p, r = FIGURES[name]
    assert fig.precision is not None and round(fig.precision, 2) >= p, fig  # type: ignore[attr-defined]
    assert fig.recall is not None and round(fig.recall, 2) >= r, fig  # type: ignore[attr-defined]


def test_the_docs_print_the_published_figures() -> None:
    text = (ROOT / "docs" / "replies.md").read_text(encoding="utf-8")
    section = text.split("## Published figures", 1)[1].split("\n## ", 1)[0]
    assert f"--split {SPLIT}" in section
    rows = {m[1]: (float(m[2]), float(m[3]))
            for m in re.finditer(r"^\| `?([a-z_/]+)`? \| ([\d.]+) \| ([\d.]+) \|", section, re.M)}
    assert rows == FIGURES


def test_the_precision_the_verdicts_rely_on_is_the_published_one() -> None:
    assert FALLBACK_PRECISION == {k: FIGURES[k][0] for k in ("ask", "refuse", "answer")}
    assert [k for k, p in FALLBACK_PRECISION.items() if p < USEFUL_PRECISION] == ["answer"]


def test_the_halves_split_the_set_by_the_hash_of_the_id_alone() -> None:
    rows = load_reply_set(SET)
    look = [r for r in rows if in_split(r, "look")]
    held = [r for r in rows if in_split(r, "held")]
    assert len(look) + len(held) == len(rows) and 0.4 < len(look) / len(rows) < 0.6
    # sha256("r0001") ends in an even hex digit (…814), sha256("r0002") in an odd one (…073)
    assert (half_of("r0001"), half_of("r0002")) == ("look", "held")
    both = [r for r in rows if in_split(r, "held+test")]
    assert both == [r for r in held if r.split == "test"] and 0 < len(both) < len(held)
    with pytest.raises(ValueError, match="split 'half': one of dev, test, look, held"):
        in_split(rows[0], "held+half")


def test_calibrate_replies_prints_and_writes_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal.json"
    assert main(["calibrate-replies", str(SET), "--split", "dev", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| ask |" in printed and "| phantom_action |" in printed and "split=dev" in printed
    doc = json.loads(out.read_text())
    assert doc["kind"] == "tooleffect-reply-calibration" and doc["split"] == "dev"
    assert set(doc["fallback"]) == {"ask", "refuse", "answer", *(k for k in FIGURES if k.startswith("phantom"))}
    ask = doc["fallback"]["ask"]
    assert ask["precision"] == ask["tp"] / (ask["tp"] + ask["fp"]) and len(ask["precision_ci95"]) == 2
    # written again without --force: the file is the command's own
    assert main(["calibrate-replies", str(SET), "--split", "dev", "--out", str(out)]) == 0


def test_a_missing_set_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate-replies", str(tmp_path), "--out", str(tmp_path / "o.json")]) == 2
    assert f"{tmp_path / 'replies.jsonl'}: no such file" in capsys.readouterr().err


class KeywordJudge:
    """A judge that passes a reply for ``ask`` when it holds a question mark, else fails it; it
    cannot answer about ``refuse`` (as a judge whose answer cannot be read)."""

    model = "keyword-judge"

    def __call__(self, rubric: str | None, expected: object, got: object) -> tuple[bool, str]:
        from pytest_tooleffect.scoring.judge import JudgeError

        if "declines" in str(rubric):
            raise JudgeError("unreadable")
        if "asks" in str(rubric):
            return "?" in str(got), "question mark"
        return "?" not in str(got), "no question mark"


def test_the_judge_agreement_is_kappa_per_kind_with_unreadable_answers_left_out() -> None:
    rows = load_reply_set(SET)
    result = judge_agreement(rows, KeywordJudge(), "dev", limit=30)
    assert result["model"] == "keyword-judge" and result["n_replies"] <= 30
    ask = result["kinds"]["ask"]
    assert ask["n"] == result["n_replies"] and -1 <= ask["kappa"] <= 1 and ask["kappa"] > 0.3
    assert result["kinds"]["refuse"]["n"] == 0 and len(result["errors"]) == result["n_replies"]
    table = ask["table"]
    assert ask["figure"]["tp"] == table["human_pass"][1] and ask["figure"]["fp"] == table["human_fail"][1]


def _set_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "set"
    copy.mkdir()
    for f in SET.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    return copy


@pytest.mark.parametrize("name", ["replies.jsonl", "labels-gold.jsonl", "labels-a.jsonl", "labels-b.jsonl"])
def test_an_out_that_is_a_file_of_the_set_is_refused_even_forced(tmp_path: Path, name: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    copy = _set_copy(tmp_path)
    before = (copy / name).read_bytes()
    for force in ([], ["--force"]):
        assert main(["calibrate-replies", str(copy), "--split", "dev", "--out", str(copy / name), *force]) == 2
        assert "which this command reads" in capsys.readouterr().err
    assert (copy / name).read_bytes() == before
    # through another path to the same file, and the labels file named with --labels
    (tmp_path / "link.jsonl").symlink_to(copy / name)
    assert main(["calibrate-replies", str(copy), "--labels", "labels-b.jsonl", "--out", str(tmp_path / "link.jsonl"),
                 "--force"]) == 2
    assert (copy / name).read_bytes() == before


def test_a_cache_that_is_not_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache.json"
    cache.write_text("{}", encoding="utf-8")
    for given in (cache, Path("/dev/zero")):
        assert main(["calibrate-replies", str(SET), "--judge-model", "openai/x", "--cache", str(given),
                     "--out", str(tmp_path / "o.json")]) == 2
        assert f"--cache {given}: not a folder" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()


def test_a_provider_that_fails_is_an_error_and_nothing_is_written(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # a real request to a port where nothing listens: connection refused on the first question
    out = tmp_path / "o.json"
    assert main(["calibrate-replies", str(SET), "--split", "dev", "--judge-model", "openai/x",
                 "--api-base", "http://127.0.0.1:1/v1", "--judge-timeout", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "judge openai/x:" in err and "nothing written" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


class UnreadableJudge:
    """A judge whose every answer cannot be read."""

    model = "unreadable-judge"

    def __call__(self, rubric: str | None, expected: object, got: object) -> tuple[bool, str]:
        from pytest_tooleffect.scoring.judge import JudgeError

        raise JudgeError("judge unreadable-judge: JSONDecodeError: Expecting value")


def test_a_judge_with_no_readable_answer_measures_nothing() -> None:
    from pytest_tooleffect.scoring.judge import JudgeError

    with pytest.raises(JudgeError, match="not one of the judge's 30 answers could be read; the first: .*Expecting"):
        judge_agreement(load_reply_set(SET), UnreadableJudge(), "dev", limit=10)


# ----------------------------------------------------------------- the judge pass: its limits and its progress

@pytest.mark.parametrize(("argv", "said"), [
    (["--judge-limit", "-3"], "argument --judge-limit: '-3' must be at least 1"),
    (["--judge-limit", "0"], "argument --judge-limit: '0' must be at least 1"),
    (["--judge-limit", "many"], "argument --judge-limit: 'many' is not a whole number"),
    (["--judge-timeout", "-1"], "argument --judge-timeout: '-1' must be a number of seconds above 0"),
    (["--judge-timeout", "0"], "argument --judge-timeout: '0' must be a number of seconds above 0"),
    (["--judge-timeout", "nan"], "argument --judge-timeout: 'nan' must be a number of seconds above 0"),
    (["--judge-max-tokens", "0"], "argument --judge-max-tokens: '0' must be at least 1"),
])
def test_a_judge_number_out_of_range_is_a_usage_error_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["calibrate-replies", str(SET), "--judge-model", "openai/x", "--api-base", "http://127.0.0.1:1/v1",
              "--out", str(tmp_path / "o.json"), *argv])
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # not even the fallback's table: refused before any work
    assert captured.err.strip().splitlines()[-1] == f"tooleffect calibrate-replies: error: {said}"


def test_a_judge_limit_below_one_is_refused_by_the_measurement_too() -> None:
    with pytest.raises(ValueError, match="the judge's limit must be at least 1 reply"):
        judge_agreement(load_reply_set(SET), KeywordJudge(), "dev", limit=0)


def test_the_judge_pass_reports_every_question_to_its_progress() -> None:
    seen: list[tuple[int, int, int]] = []
    result = judge_agreement(load_reply_set(SET), KeywordJudge(), "dev", limit=12,
                             progress=lambda *a: seen.append(a))
    n = result["n_replies"]
    assert seen == [(i, 3 * n, n) for i in range(1, 3 * n + 1)]  # unreadable answers counted too


def test_the_progress_line_comes_every_so_many_questions_or_seconds_and_at_the_end() -> None:
    import io

    from pytest_tooleffect.commands.replies import JudgeProgress

    now = [100.0]
    stream = io.StringIO()
    progress = JudgeProgress(stream, every=30, period=10.0, clock=lambda: now[0])
    for asked in range(1, 829):
        if asked == 45:
            now[0] += 12.0  # one slow answer: a line at once, whatever the count
        progress(asked, 828, 276)
    lines = stream.getvalue().splitlines()
    assert lines[:3] == ["judge: 10 of 276 replies (30 of 828 questions), 0 s",
                         "judge: 15 of 276 replies (45 of 828 questions), 12 s",
                         "judge: 25 of 276 replies (75 of 828 questions), 12 s"]
    assert lines[-1] == "judge: 276 of 276 replies (828 of 828 questions), 12 s"
    assert len(lines) == 2 + (828 - 45) // 30 + 1


def test_calibrate_replies_says_how_far_the_judge_is_on_stderr(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    def verdict(body: dict[str, object]) -> Reply:
        return Reply(text=json.dumps({"verdict": "pass", "reason": "fine"}), prompt_tokens=10, completion_tokens=5)

    with ScriptedServer(verdict) as srv:
        assert main(["calibrate-replies", str(SET), "--split", "dev", "--judge-model", "openai/j", "--api-base",
                     srv.base_url, "--judge-limit", "12", "--out", str(tmp_path / "o.json")]) == 0
    written = json.loads((tmp_path / "o.json").read_text())
    n = written["judge"]["n_replies"]
    err = capsys.readouterr().err.splitlines()
    assert f"judge: {n} of {n} replies ({3 * n} of {3 * n} questions)" in err[-1]
    assert all(line.startswith("judge: ") for line in err)
