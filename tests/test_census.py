"""A family's ``quota`` and ``population`` checked against its cases, and every case reported at its
own line (JSONL and YAML, scored, skipped or invalid).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.collect.census import census_problems
from pytest_tooleffect.options import OPT_REPORT
from tests.demo_family import NULL, case, write_demo

STOP = {"tool_calls": [], "text": "Done."}


def _family(root: Path, name: str, quota: dict[str, int] | None, population: dict[str, int] | None,
            files: dict[str, list[dict[str, Any]]]) -> Path:
    fam = root / "cases" / name
    fam.mkdir(parents=True)
    doc: dict[str, Any] = {"name": name, "tools": [{"name": "read_thread", "parameters": {
        "type": "object", "properties": {"thread_id": {"type": "string"}}, "required": ["thread_id"]}}]}
    if quota is not None:
        doc["quota"] = quota
    if population is not None:
        doc["population"] = population
    (fam / "family.yaml").write_text(json.dumps(doc))
    for fname, cases in files.items():
        (fam / fname).write_text("".join(json.dumps(c) + "\n" for c in cases))
    return fam


def _stops(prefix: str, bucket: str, n: int) -> list[dict[str, Any]]:
    return [case(f"{prefix}{i}", bucket, {"valid_actions": [NULL]}, STOP) for i in range(n)]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_quota_that_disagrees_with_the_cases_is_an_error_of_its_family_and_the_run_goes_on(
        pytester: pytest.Pytester, workers: int) -> None:
    """The trial's family: "quota 9 · population 9" printed for 10 cases.  Now the family is refused,
    naming the file, the field and both numbers; another family of the run is scored, at -n 0 as at -n 2.
    """
    fam = _family(pytester.path, "support", {"first": 1, "last": 9}, {"first": 1, "last": 9},
                  {"cases.jsonl": _stops("f", "first", 1) + _stops("l", "last", 10)})
    write_demo(pytester.path)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "-p", "no:cacheprovider",
                                *(["-n", str(workers)] if workers else []))
    result.assert_outcomes(passed=3, failed=2, skipped=1, xfailed=1, errors=1)
    family_file = fam / "family.yaml"
    result.stdout.fnmatch_lines([
        f"*{family_file}: quota.last: 9, but the family's case files hold 10 cases in bucket last*",
        f"*{family_file}: population.last: 9 states, but the family's case files hold 10 cases in bucket last*"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["status"] == "incomplete"
    assert [b["family"] for b in report["blocks"]] == ["demo"]  # the rest of the run went on
    (invalid,) = report["invalid"]
    assert invalid["family"] == "support" and "quota.last: 9" in invalid["cases"][0]["problems"][0]


def test_cases_in_several_files_are_counted_together_even_when_one_file_is_run(pytester: pytest.Pytester) -> None:
    _family(pytester.path, "split", {"first": 2, "last": 1}, None,
            {"a.jsonl": _stops("a", "first", 2), "b.jsonl": _stops("b", "last", 1)})
    pytester.runpytest("cases/", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    pytester.runpytest("cases/split/b.jsonl", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_sampled_bucket_smaller_than_its_quota_holds_its_whole_population(pytester: pytest.Pytester) -> None:
    """A sampler asked for 5 states of a bucket that held 2 takes both: quota 5, population 2, 2 cases."""
    _family(pytester.path, "sampled", {"first": 5, "last": 1}, {"first": 2, "last": 40},
            {"cases.jsonl": _stops("f", "first", 2) + _stops("l", "last", 1)})
    pytester.runpytest("cases/", "-p", "no:cacheprovider").assert_outcomes(passed=3)
    (pytester.path / "cases" / "sampled" / "cases.jsonl").write_text(
        "".join(json.dumps(c) + "\n" for c in _stops("f", "first", 1) + _stops("l", "last", 1)))
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*quota.first: 5, capped at population.first 2, but the family's case files hold "
                                 "1 case in bucket first*"])


def test_invalid_cases_count_in_their_bucket_and_no_family_error_is_added(pytester: pytest.Pytester) -> None:
    bad = case("bad", "last", {"valid_actions": [{"tool": "no_such_tool"}]}, STOP)
    _family(pytester.path, "onebad", {"last": 2}, {"last": 2}, {"cases.jsonl": _stops("l", "last", 1) + [bad]})
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", "-rE")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["ERROR cases/onebad/cases.jsonl::bad[[]invalid[]]*"])
    result.stdout.no_fnmatch_line("*quota.last*")


@pytest.mark.parametrize(("quota", "population", "counts", "says"), [
    ({"first": 2}, None, {"first": 2, "last": 1},
     ["F: quota.last: 0 (the bucket is not listed), but the family's case files hold 1 case in bucket last"]),
    (None, {"first": 3}, {"first": 3, "q9": 1},
     ["F: population.q9: 0 (the bucket is not listed) states, but the family's case files hold 1 cases in bucket "
      "q9 (a bucket holds at least the cases drawn from it)"]),
    ({"first": 2, "middle": 0}, {"first": 200, "middle": 2054}, {"first": 2},
     ["F: population.middle: 2054 states, but the family's case files hold no case in bucket middle: the "
      "post-stratified estimate of the production rate would leave out 2054 of the 2254 states (draw cases from "
      "the bucket, or leave it out of population to estimate over the other buckets only)"]),
    ({"first": 2, "middle": 0}, {"first": 200, "middle": 0}, {"first": 2}, []),  # a bucket that held no state
    # break-it: a bucket no case uses dropped half the population from the estimate, silently
    ({"first": 3, "last": 2}, {"first": 3, "last": 2, "nowhere": 5}, {"first": 3, "last": 2},
     ["F: population.nowhere: 5 states, but the family's case files hold no case in bucket nowhere: the "
      "post-stratified estimate of the production rate would leave out 5 of the 10 states (draw cases from "
      "the bucket, or leave it out of population to estimate over the other buckets only)"]),
    ({"first": 3, "nowhere": 4}, None, {"first": 3},
     ["F: quota.nowhere: 4, but the family's case files hold 0 cases in bucket nowhere"]),
    ({"first": 3, "nowhere": 4}, {"first": 3}, {"first": 3}, []),  # the sampler found no state in it
    (None, None, {"first": 7}, []),
])
def test_census_problems_per_bucket(quota: dict[str, int] | None, population: dict[str, int] | None,
                                    counts: dict[str, int], says: list[str]) -> None:
    assert census_problems(Path("F"), quota, population, Counter(counts)) == says


def test_an_unreadable_entry_leaves_the_counts_unchecked() -> None:
    """A line that is not JSON is an error of the run already; its bucket cannot be told."""
    assert census_problems(Path("F"), {"first": 3}, None, Counter({"first": 2}), unreadable=1) == []


YAML_CASES = """\
- id: a-labelled
  placement: {step: 0, run_length: 2, bucket: first}
  messages: [{role: user, content: hi}]
  label: {valid_actions: [{tool: null}]}
  recorded: {text: hello}
  source: authored
# a comment between cases
- id: b-unlabelled
  placement: {step: 1, run_length: 2, bucket: last}
  messages: [{role: user, content: hi}]
  recorded: {text: hello}
  source: authored
-
  id: c-invalid
  placement: {step: 1, run_length: 2, bucket: last}
  messages: [{role: user, content: hi}]
  label: {valid_actions: [{tool: no_such_tool}]}
  source: authored
"""


@pytest.mark.parametrize("suffix", ["yaml", "jsonl"])
def test_each_case_is_reported_at_its_own_line(pytester: pytest.Pytester, suffix: str) -> None:
    """An unlabelled case was skipped "at line 1" of its YAML file; an invalid case's error was at line 1
    of either kind of file.  Each is now at the line its case starts on.
    """
    import yaml

    fam = _family(pytester.path, "lines", None, None, {})
    if suffix == "yaml":
        (fam / "cases.yaml").write_text(YAML_CASES)
        lines = {"a-labelled": 1, "b-unlabelled": 8, "c-invalid": 14}  # a case under a bare "-": its first key
    else:
        rows = yaml.safe_load(YAML_CASES)
        (fam / "cases.jsonl").write_text("\n" + "".join(json.dumps(c) + "\n\n" for c in rows))
        lines = {"a-labelled": 2, "b-unlabelled": 4, "c-invalid": 6}
    result = pytester.runpytest("cases/", "-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] cases/lines/cases.{suffix}:{lines['b-unlabelled']}: "
                                 "unlabelled case: nothing to score against"])
    rec = pytester.inline_run("cases/", "-p", "no:cacheprovider")
    located = {r.nodeid.split("::")[1].split("[")[0]: r.location[1] for r in rec.getreports("pytest_runtest_logreport")
               if r.when == "setup"}
    assert located == {cid: line - 1 for cid, line in lines.items()}  # pytest's locations are 0-based
