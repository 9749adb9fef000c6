"""A run holds no typed record per decision: the item lets its record go once its reports carry it,
the reporter keeps each record's JSON text (a :class:`Record` is made of it when read), and the
report's counting keeps a row per record, not the record.  Nothing here is timed or weighed:
the tests count the records alive (``bench/replay_scale.py`` measures the memory).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.report import summarise
from pytest_tooleffect.report.store import RecordStore
from pytest_tooleffect.scoring.record import Record
from tests.demo_family import CASES, write_demo

REDUNDANT = next(c for c in CASES if c["id"] == "e-redundant")  # fails: a read where no tool was needed
READ_OK = next(c for c in CASES if c["id"] == "a-read")

ALIVE_CONFTEST = """
import gc, json
import pytest
from pytest_tooleffect.scoring.record import Record

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):  # every item has run; the reporter has not made the report yet
    gc.collect()
    alive = sum(1 for o in gc.get_objects() if isinstance(o, Record))
    name = getattr(session.config, "workerinput", {}).get("workerid", "main")
    with open(session.config.rootpath / f"alive-{name}.json", "w") as fh:
        json.dump({"records": alive}, fh)
"""


def _many(n: int) -> list[dict[str, object]]:
    """``n`` decisions, every other one failing."""
    return [{**(REDUNDANT if i % 2 else READ_OK), "id": f"c{i:03d}"} for i in range(n)]


@pytest.mark.parametrize("workers", [0, 2])
def test_no_process_holds_a_typed_record_per_item_it_ran(pytester: pytest.Pytester, workers: int) -> None:
    """Once every item has run, neither the controller (its reporter holds the records' JSON
    texts) nor a worker (an item lets its record go after its teardown report) holds a
    :class:`Record` of any of them.
    """
    n = 12
    write_demo(pytester.path, _many(n))
    pytester.makeconftest(ALIVE_CONFTEST)
    result = pytester.runpytest("cases/", "-n", str(workers), "--tooleffect-records=r.jsonl",
                                "--tooleffect-no-summary", "-p", "no:randomly")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    assert len((pytester.path / "r.jsonl").read_text().splitlines()) == n  # every record was made and kept
    seen = {p.name: json.loads(p.read_text()) for p in pytester.path.glob("alive-*.json")}
    assert len(seen) == 1 + workers, seen
    assert all(s["records"] == 0 for s in seen.values()), seen


def _records(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    """The demo family's records (scored and failing alike), as a run's log holds them."""
    write_demo(pytester.path)
    result = pytester.runpytest("cases/", "--tooleffect-records=r.jsonl", "--tooleffect-no-summary")
    assert result.ret == 1
    return [json.loads(line) for line in (pytester.path / "r.jsonl").read_text().splitlines()]


def test_the_counting_keeps_no_record_it_has_read(pytester: pytest.Pytester) -> None:
    """:func:`summarise` reads its records one at a time and keeps their rows: the records handed to
    it one by one are let go as it goes, and the report is the one a list of the same records gives.
    """
    base = _records(pytester)
    copies = [{**r, "id": f"{r['id']}-{k}", "case_id": f"{r['case_id']}-{k}"} for k in range(30) for r in base]
    alive: list[int] = [0]
    peak: list[int] = [0]

    class Tracked(Record):
        def __del__(self) -> None:
            alive[0] -= 1

    def one_by_one() -> Any:
        for r in copies:
            record = Tracked.model_validate(r)
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
            yield record
            del record

    report = summarise(one_by_one(), {})
    assert peak[0] <= 2, f"{peak[0]} of {len(copies)} records alive at once"
    assert report == summarise([Record.model_validate(r) for r in copies], {})
    assert report.blocks[0].n_scored + report.blocks[0].n_errors == len(copies)


def test_a_record_store_reads_as_the_records_it_holds(pytester: pytest.Pytester) -> None:
    """A :class:`RecordStore` is a sequence of typed records made from the JSON texts it keeps:
    each read gives a :class:`Record` equal to the record the text was made from, and ``to_json``
    gives fresh objects.
    """
    base = _records(pytester)
    texts = [Record.model_validate(r).to_json_text() for r in base]
    store = RecordStore(texts[:2])
    for t in texts[2:]:
        store.append(t)
    assert len(store) == len(base) and bool(store)
    assert all(type(r) is Record for r in store)
    assert [r.to_json() for r in store] == base
    assert store[0] == Record.model_validate(base[0]) and store[-1].id == base[-1]["id"]
    assert [r.id for r in store[1:3]] == [r["id"] for r in base[1:3]]
    out = store.to_json()
    out[0]["id"] = "changed"
    assert store[0].id == base[0]["id"] != "changed"
    assert summarise(store, {}) == summarise([Record.model_validate(r) for r in base], {})
    assert not RecordStore()


def test_a_test_report_carries_its_record_as_json_text(pytester: pytest.Pytester) -> None:
    """The setup or call report of a case item carries its record as one line of JSON text, the
    record the log holds (keys in the record's field order), for the controller to keep as it is.
    """
    from pytest_tooleffect import wire

    write_demo(pytester.path)
    reprec = pytester.inline_run("cases/", "--tooleffect-records=r.jsonl", "--tooleffect-no-summary")
    sent = [getattr(r, wire.REPORT_RECORD) for r in reprec.getreports("pytest_runtest_logreport")
            if hasattr(r, wire.REPORT_RECORD)]
    logged = [json.loads(line) for line in (pytester.path / "r.jsonl").read_text().splitlines()]
    assert sent and all(isinstance(t, str) and "\n" not in t for t in sent), sent
    assert sorted((json.loads(t) for t in sent), key=lambda r: r["id"]) == sorted(logged, key=lambda r: r["id"])
    assert [Record.model_validate_json(t).to_json_text() for t in sent] == sent


def test_a_run_without_variants_has_no_robustness_section_and_types_no_record_for_it() -> None:
    """The robustness section once typed every record of the run and kept them all (a typed record per
    decision, 8 KiB each, at the end of every run): a store whose texts hold no ``perturbation`` key
    gives none without reading a record; a key only inside a string is no variant."""
    from pytest_tooleffect.report.robustness import robustness

    not_records = RecordStore(['{"id": "a", "note": "no \\"perturbation\\": here"}', "not JSON at all"])
    assert not not_records.may_hold("perturbation")
    assert robustness(not_records) is None  # typing either text would raise
    assert RecordStore(['{"perturbation": {}}']).may_hold("perturbation")
    assert RecordStore(['{"x": 1}', '{"perturbation" :\n {}}']).may_hold("perturbation")
    assert not RecordStore(['{"x": "perturbation"}']).may_hold("perturbation")
