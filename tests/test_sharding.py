"""Shards: ``--tooleffect-shard I/N`` selection (a property of the hash), and ``tooleffect report``
merging the shards' record logs into the unsharded run's report (duplicates, missing shards,
label sets that differ), and refusing or marking incomplete what does not add up to one run (a
shard cut short, partial runs, a shard run under other oracle rules).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_tooleffect.cli import main
from pytest_tooleffect.collect.sharding import shard_of
from pytest_tooleffect.options import MAX_SHARDS, OPT_RECORDS, OPT_REPORT, OPT_SHARD
from pytest_tooleffect.report import Report
from pytest_tooleffect.report.html import render_html
from pytest_tooleffect.report.terminal import RANGES_SHOWN, shard_ranges
from tests.conftest import REPO

ids = st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=300, unique=True)


@given(ids, st.integers(1, 64))
def test_every_item_is_in_exactly_one_shard(keys: list[str], n: int) -> None:
    shards = {k: shard_of(k, n) for k in keys}
    assert all(1 <= s <= n for s in shards.values())
    # the split is the items' own: the same answer in any order, and for a key alone
    assert {k: shard_of(k, n) for k in reversed(keys)} == shards


@given(ids, ids, st.integers(1, 32))
def test_adding_cases_moves_no_item(old: list[str], new: list[str], n: int) -> None:
    before = {k: shard_of(k, n) for k in old}
    after = {k: shard_of(k, n) for k in [*old, *new]}
    assert all(after[k] == before[k] for k in old)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 31), st.integers(0, 10_000))
def test_one_more_shard_moves_about_its_share_all_into_it(n: int, salt: int) -> None:
    keys = [f"fam-{salt}/case-{i}[replay]" for i in range(4000)]
    moved = [k for k in keys if shard_of(k, n) != shard_of(k, n + 1)]
    assert all(shard_of(k, n + 1) == n + 1 for k in moved)  # only into the new shard
    expected = len(keys) / (n + 1)
    assert abs(len(moved) - expected) < 5 * (expected ** 0.5) + 5  # binomial: a few standard deviations
    sizes = Counter(shard_of(k, n + 1) for k in keys)
    assert set(sizes) == set(range(1, n + 2))  # balanced enough that no shard is empty at 4000 items


def test_a_shard_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        shard_of("x", 0)


# ------------------------------------------------------------------------------ end to end

FAMILY = "cases/tau-airline"


def _run(out: Path, name: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    run = subprocess.run([sys.executable, "-m", "pytest", FAMILY, "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          f"{OPT_RECORDS}={out / 'logs' / f'{name}.jsonl'}", f"{OPT_REPORT}={out / f'{name}.json'}",
                          *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    return run


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", *args, "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """What a report measures: everything but the notes on where it came from (shard, shards, judge)."""
    return {k: report[k] for k in Report.model_fields
            if k in report and k not in ("judge", "shard", "shards", "selection", "run")}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped airline family run whole, and as shards 1/3, 2/3 (under -n 2) and 3/3."""
    out = tmp_path_factory.mktemp("shards")
    _run(out, "whole")
    for i in (1, 2, 3):
        run = _run(out, f"shard{i}", f"{OPT_SHARD}={i}/3", *(["-n", "2"] if i == 2 else []))
        assert f"shard {i}/3" in run.stdout
    return out


def test_each_item_runs_in_one_shard_and_says_so(sharded: Path) -> None:
    whole = [json.loads(x) for x in (sharded / "logs" / "whole.jsonl").read_text().splitlines()]
    parts = {i: [json.loads(x) for x in (sharded / "logs" / f"shard{i}.jsonl").read_text().splitlines()]
             for i in (1, 2, 3)}
    ids = [r["id"] for recs in parts.values() for r in recs]
    assert sorted(ids) == sorted(r["id"] for r in whole) and len(ids) == len(set(ids))
    assert all(parts.values()) and len(whole) == 210
    for i, recs in parts.items():
        assert {(r["shard"]["index"], r["shard"]["count"]) for r in recs} == {(i, 3)}
        assert all(shard_of(r["id"], 3) == i for r in recs)
        report = json.loads((sharded / f"shard{i}.json").read_text())
        assert report["shard"] == {"index": i, "count": 3}
        assert sum(b["n_scored"] + b["n_errors"] for b in report["blocks"]) == len(recs)
    fps = {r["shard"]["family_fingerprint"] for recs in parts.values() for r in recs}
    whole_report = json.loads((sharded / "whole.json").read_text())
    assert fps == {whole_report["blocks"][0]["label_set_fingerprint"]}  # the whole family's, in every shard


def test_merged_shards_are_the_unsharded_report(sharded: Path) -> None:
    whole = json.loads((sharded / "whole.json").read_text())
    for args in ([str(sharded / "logs" / f"shard{i}.jsonl") for i in (3, 1, 2)],
                 [str(sharded / "logs" / "shard1.jsonl"), str(sharded / "logs" / "shard2.jsonl"),
                  str(sharded / "logs" / "shard3.jsonl")]):
        merged = _cli(*args)
        assert merged.returncode == 0, merged.stderr
        data = json.loads(merged.stdout)
        assert data["status"] == "complete"
        assert data["shards"]["merged"] == [1, 2, 3] and data["shards"]["missing"] == []
        assert _figures(data) == _figures(whole)
        run = _log(sharded / "logs" / "whole.jsonl")[0]["selection"]  # the shards' run selected what the whole did
        assert data["selection"] == {"collected": 210, "selected": 210, "digest": run["run_digest"], "recorded": 210,
                                     "not_recorded": 0, "short": []}


def test_a_folder_of_shard_logs_merges_and_a_missing_shard_is_named(sharded: Path, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in (1, 3):
        shutil.copy(sharded / "logs" / f"shard{i}.jsonl", folder)
    merged = _cli(str(folder))
    assert merged.returncode == 1, merged.stderr  # a report of part of the run never exits 0
    data = json.loads(merged.stdout)
    assert data["status"] == "incomplete"
    assert data["shards"]["missing"] == [2] and data["shards"]["merged"] == [1, 3]
    n2 = len(_log(sharded / "logs" / "shard2.jsonl"))
    assert f"shard 2 of 3 missing ({n2} of the run's 210 selected items)" in merged.stderr
    assert data["selection"]["not_recorded"] == n2 and data["selection"]["short"] == []
    text = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(folder)], cwd=REPO,
                          capture_output=True, text=True, timeout=300).stdout
    assert "status incomplete: shard 2 missing" in text


def test_a_repeated_shard_is_refused_or_kept_once_by_choice(sharded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = [str(sharded / "logs" / f"shard{i}.jsonl") for i in (1, 2, 3)]
    assert main(["report", *logs, logs[1], "--json"]) == 2
    err = capsys.readouterr().err
    assert "tau-airline/" in err and "counted twice" in err and logs[1] in err
    whole = json.loads((sharded / "whole.json").read_text())
    for choice in ("first", "last"):
        assert main(["report", *logs, logs[1], "--json", "--duplicates", choice]) == 0
        out = capsys.readouterr()
        data = json.loads(out.out)
        assert _figures(data) == _figures(whole)
        n2 = len((sharded / "logs" / "shard2.jsonl").read_text().splitlines())
        assert data["shards"]["duplicates_dropped"] == n2 and f"{n2} repeated records left out" in out.err


def test_shards_that_collected_different_label_sets_are_refused(sharded: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Shard 3 run on a checkout where one case of shard 1 has another label: its records are refused."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "cases", checkout / "cases")
    shutil.copy(REPO / "pyproject.toml", checkout)
    if (REPO / "oracle").is_dir():
        shutil.copytree(REPO / "oracle", checkout / "oracle")
    in_shard1 = json.loads((sharded / "logs" / "shard1.jsonl").read_text().splitlines()[0])["case_id"]
    path = checkout / FAMILY / "cases.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        case = json.loads(line)
        if case["id"] == in_shard1:
            case["label"]["reason"] = "relabelled"
            case["label"]["valid_actions"] = [{"tool": None}, *case["label"]["valid_actions"]]
        lines.append(json.dumps(case))
    path.write_text("\n".join(lines) + "\n")
    _run(tmp_path, "shard3b", f"{OPT_SHARD}=3/3", cwd=checkout)
    logs = [str(sharded / "logs" / "shard1.jsonl"), str(sharded / "logs" / "shard2.jsonl"),
            str(tmp_path / "logs" / "shard3b.jsonl")]
    assert main(["report", *logs]) == 2
    err = capsys.readouterr().err
    assert "label-set fingerprint" in err and "tau-airline" in err and "shard3b.jsonl" in err


def test_logs_of_different_shard_counts_or_unsharded_are_not_one_run(sharded: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    recs = [json.loads(x) for x in (sharded / "logs" / "shard1.jsonl").read_text().splitlines()]
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({**r, "shard": {**r["shard"], "count": 4}}) + "\n" for r in recs[:1]))
    assert main(["report", str(sharded / "logs" / "shard2.jsonl"), str(other)]) == 2
    assert "a run of 4 shards" in capsys.readouterr().err
    assert main(["report", str(sharded / "logs" / "shard2.jsonl"), str(sharded / "logs" / "whole.jsonl")]) == 2
    assert "an unsharded run" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "nothing-here")]) == 2
    assert "no such record log" in capsys.readouterr().err


def test_a_shard_outside_its_count_is_a_usage_error(pytester: pytest.Pytester) -> None:
    for bad in ("0/3", "4/3", "3", "a/b"):
        result = pytester.runpytest(f"{OPT_SHARD}={bad}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert OPT_SHARD in result.stderr.str()


def _with_shard(recs: list[dict[str, Any]], path: Path, **shard: Any) -> Path:
    path.write_text("".join(json.dumps({**r, "shard": {**r["shard"], **shard}}) + "\n" for r in recs))
    return path


def test_a_record_whose_shard_is_not_one_of_its_count_is_refused(sharded: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    recs = [json.loads(x) for x in (sharded / "logs" / "shard1.jsonl").read_text().splitlines()][:2]
    for shard, problem in (({"index": 7, "count": 3}, "index 7 is not a shard of 3"),
                           ({"index": 0, "count": 3}, "index 0 is not a shard of 3"),
                           ({"index": 1, "count": 0}, "shard.count"),
                           ({"index": 1, "count": MAX_SHARDS + 1}, f"less than or equal to {MAX_SHARDS}"),
                           ({"index": 1, "count": 10**9}, f"less than or equal to {MAX_SHARDS}")):
        log = _with_shard(recs, tmp_path / "bad.jsonl", **shard)
        assert main(["report", str(log)]) == 2
        err = capsys.readouterr().err
        assert str(log) in err and "line 1" in err and problem in err, (shard, err)


def test_the_most_shards_merge_and_the_missing_ones_are_named_in_ranges(sharded: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    recs = [json.loads(x) for x in (sharded / "logs" / "shard1.jsonl").read_text().splitlines()]
    a = _with_shard(recs[:1], tmp_path / "a.jsonl", index=1000, count=MAX_SHARDS)
    b = _with_shard(recs[1:2], tmp_path / "b.jsonl", index=1002, count=MAX_SHARDS)
    assert main(["report", str(a), str(b), "--json"]) == 1
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert data["status"] == "incomplete" and data["shards"]["merged"] == [1000, 1002]
    assert len(data["shards"]["missing"]) == MAX_SHARDS - 2
    assert f"shards 1-999, 1001, 1003-{MAX_SHARDS} of {MAX_SHARDS} missing" in out.err
    line = next(x for x in out.err.splitlines() if " missing (" in x)
    assert len(line) < 300
    assert main(["report", str(a), str(b)]) == 1
    text = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert f"shards 1000, 1002 of {MAX_SHARDS} merged" in text and f"1-999, 1001, 1003-{MAX_SHARDS} missing" in text


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _write(path: Path, recs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_every_record_says_what_its_run_selected_and_under_which_rules(sharded: Path) -> None:
    whole = _log(sharded / "logs" / "whole.jsonl")
    parts = {i: _log(sharded / "logs" / f"shard{i}.jsonl") for i in (1, 2, 3)}
    stamp = whole[0]["selection"]
    assert stamp["collected"] == stamp["count"] == stamp["run_count"] == 210
    assert stamp["digest"] == stamp["run_digest"] and all(r["selection"] == stamp for r in whole)
    assert {json.dumps(r["fingerprints"]) for r in whole} == {json.dumps(whole[0]["fingerprints"])}
    block = json.loads((sharded / "whole.json").read_text())["blocks"][0]
    assert whole[0]["fingerprints"]["labels"] == block["label_set_fingerprint"]  # the report's formula
    for recs in parts.values():  # each shard: its own part, and the whole run's selection
        sel = {json.dumps(r["selection"], sort_keys=True) for r in recs}
        assert len(sel) == 1
        mine = recs[0]["selection"]
        assert mine["count"] == len(recs) and mine["digest"] != stamp["digest"]
        assert (mine["run_count"], mine["run_digest"], mine["collected"]) == (210, stamp["run_digest"], 210)
        assert all(r["fingerprints"] == whole[0]["fingerprints"] for r in recs)
        assert recs[0]["fingerprints"]["labels"] == recs[0]["shard"]["family_fingerprint"]


def test_a_shard_cut_short_makes_the_merge_incomplete_and_names_what_is_missing(sharded: Path, tmp_path: Path) -> None:
    """A shard killed after 10 of its records, merged with the others: not ``complete``, exit 1."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in (1, 2, 3):
        shutil.copy(sharded / "logs" / f"shard{i}.jsonl", folder)
    n1 = len(_log(folder / "shard1.jsonl"))
    _write(folder / "shard1.jsonl", _log(folder / "shard1.jsonl")[:10])
    merged = _cli(str(folder))
    assert merged.returncode == 1, merged.stderr
    data = json.loads(merged.stdout)
    assert data["status"] == "incomplete" and data["shards"]["missing"] == []
    assert data["selection"]["short"] == [{"shard": 1, "selected": n1, "recorded": 10}]
    assert data["selection"]["recorded"] == 210 - n1 + 10 and data["selection"]["not_recorded"] == n1 - 10
    assert f"incomplete: shard 1/3: 10 of {n1} selected items have a record ({n1 - 10} missing" in merged.stderr
    text = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(folder)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert text.returncode == 1 and f"shard 1: 10 of {n1} selected items have a record" in text.stdout
    page = re.search(r"<p class=\"meta warn\" data-selection>(.*?)</p>", render_html(Report.model_validate(data)))
    assert page is not None and page.group(1) == (f"the run selected 210 of 210 case items collected (selection "
                                                  f"{data['selection']['digest']}); {210 - n1 + 10} have a record, "
                                                  f"{n1 - 10} do not; shard 1: 10 of {n1}")
    # an unsharded run cut short likewise: 50 of its 210 items
    cut = _write(tmp_path / "whole-cut.jsonl", _log(sharded / "logs" / "whole.jsonl")[:50])
    alone = _cli(str(cut))
    assert alone.returncode == 1 and json.loads(alone.stdout)["status"] == "incomplete"
    assert "incomplete: 50 of 210 selected items have a record (160 missing" in alone.stderr


def test_partial_runs_are_not_one_run(sharded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of a few cases each (``-k``): each complete alone, refused together."""
    ids = [r["case_id"] for r in _log(sharded / "logs" / "whole.jsonl")]
    _run(tmp_path, "ka", "-k", ids[0])
    _run(tmp_path, "kb", "-k", ids[1])
    a, b = tmp_path / "logs" / "ka.jsonl", tmp_path / "logs" / "kb.jsonl"
    assert main(["report", str(a), "--json"]) == 0  # a run of one selected item, whole: complete
    alone = json.loads(capsys.readouterr().out)
    assert alone["status"] == "complete" and alone["selection"]["selected"] == 1
    assert alone["selection"]["collected"] == 210
    assert main(["report", str(a), str(b), "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "not parts of one run" in out.err and str(a) in out.err and str(b) in out.err
    assert "selected 1 of 210 case items collected" in out.err


def test_a_shard_run_under_changed_oracle_rules_is_refused(sharded: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Shard 3 run where the family's rules fold case in strings (the labels the same): refused."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "cases", checkout / "cases")
    shutil.copytree(REPO / "oracle", checkout / "oracle")
    shutil.copy(REPO / "pyproject.toml", checkout)
    rules = checkout / "oracle" / "tau-airline.yaml"
    text = rules.read_text()
    assert "string: {normalise: [nfkc, strip]}" in text
    rules.write_text(text.replace("string: {normalise: [nfkc, strip]}", "string: {normalise: [nfkc, strip, casefold]}"))
    _run(tmp_path, "shard3r", f"{OPT_SHARD}=3/3", cwd=checkout)
    changed = _log(tmp_path / "logs" / "shard3r.jsonl")
    assert changed[0]["shard"]["family_fingerprint"] == _log(sharded / "logs" / "shard3.jsonl")[0]["shard"][
        "family_fingerprint"]  # the same labels
    logs = [str(sharded / "logs" / "shard1.jsonl"), str(sharded / "logs" / "shard2.jsonl"),
            str(tmp_path / "logs" / "shard3r.jsonl")]
    assert main(["report", *logs]) == 2
    err = capsys.readouterr().err
    assert "oracle rules fingerprint" in err and "tau-airline" in err and "shard3r.jsonl" in err


def test_logs_that_do_not_say_what_their_run_selected(sharded: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Logs written before records said it: merged as before, with a note; mixed with newer ones: refused."""
    old = [{k: v for k, v in r.items() if k not in ("selection", "fingerprints")}
           for r in _log(sharded / "logs" / "shard1.jsonl")]
    older = _write(tmp_path / "older.jsonl", old)
    assert main(["report", str(older), "--json"]) == 1  # shards 2 and 3 missing all the same
    out = capsys.readouterr()
    assert "selection" not in json.loads(out.out)
    assert "do not say what their run selected" in out.err
    assert main(["report", str(older), str(sharded / "logs" / "shard2.jsonl")]) == 2
    assert "not one run" in capsys.readouterr().err


def test_shard_ranges_are_runs_and_their_length_is_bounded() -> None:
    assert shard_ranges([]) == ""
    assert shard_ranges([2, 3, 4, 7, 9, 10]) == "2-4, 7, 9-10"
    every_other = list(range(1, MAX_SHARDS + 1, 2))
    text = shard_ranges(every_other)
    assert text.startswith("1, 3, 5, ") and len(text) < 200
    assert text.endswith(f"… and {len(every_other) - RANGES_SHOWN:,} more in {len(every_other) - RANGES_SHOWN:,} runs")


def test_logs_that_hold_no_record_are_refused_not_complete(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text("")
    assert main(["report", str(one)]) == 2
    err = capsys.readouterr().err
    assert "no record in" in err and str(one) in err
    folder = tmp_path / "pods"
    folder.mkdir()
    for i in (1, 2, 3, 4):
        (folder / f"shard-{i}.jsonl").write_text("")
    assert main(["report", str(folder), "--json"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "no record in" in out.err and "shard-1.jsonl" in out.err and "1 more" in out.err
