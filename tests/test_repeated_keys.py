"""A JSON object that gives one key twice is refused by every reader of the plugin's inputs, naming
the file, the line, the entry's id and the key: Python's ``json`` keeps the last one in silence,
so a case's second ``label`` would replace the first (and its forbidden actions) unseen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.ci.baseline import Baseline, BaselineError
from pytest_tooleffect.cli import main
from pytest_tooleffect.collect.cases import case_refs
from pytest_tooleffect.collect.family import FamilyError, load_family
from pytest_tooleffect.collect.traces import TraceError, read_openai_jsonl, read_otel
from pytest_tooleffect.data.labelling import read_labels
from pytest_tooleffect.report.record_log import load_records
from pytest_tooleffect.util.jsonl import RepeatedKey, json_lines, loads
from tests.demo_family import CASES, write_demo

FORBIDS = '{"valid_actions": [{"tool": null}], "forbidden_actions": ["calendar.create_event"]}'
ALLOWS = ('{"valid_actions": [{"tool": null}, {"tool": "calendar.create_event", "args": {"title": "x", '
          '"start": "2025-03-19T14:00:00"}}]}')
#: a case whose second ``label`` would allow what the first forbids, and that calls it
TWO_LABELS = ('{"id": "twice", "placement": {"step": 0, "run_length": 1, "bucket": "first"}, "messages": '
              '[{"role": "user", "content": "hi"}], "label": ' + FORBIDS + ', "source": "authored", '
              '"recorded": {"tool_calls": [{"name": "calendar.create_event", "arguments": '
              '"{\\"title\\": \\"x\\", \\"start\\": \\"2025-03-19T14:00:00\\"}"}]}, "label": ' + ALLOWS + '}')


def test_the_shared_reader_refuses_a_repeated_key_at_any_depth_and_names_the_entry() -> None:
    with pytest.raises(RepeatedKey) as top:
        loads('{"id": "a", "id": "b"}')
    assert (top.value.key, top.value.owner) == ("id", "b")
    with pytest.raises(RepeatedKey, match=r"the key 'x' is given twice in one object \(in the entry of id 'c'\)"):
        loads(b'{"id": "c", "label": {"x": 1, "x": 1}}')
    assert loads('{"a": [{"b": 1}, {"b": 2}]}') == {"a": [{"b": 1}, {"b": 2}]}  # the same key in two objects


def test_a_json_lines_line_with_a_repeated_key_is_named_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a"}\n{"id": "a", "id": "b"}\n{"id": "c"}\n')
    assert list(json_lines(path)) == [
        (1, {"id": "a"}, None),
        (2, None, "the key 'id' is given twice in one object (in the entry of id 'b'): JSON keeps only one of them "
                  "without a word; give each key once"),
        (3, {"id": "c"}, None)]


def test_a_case_with_two_labels_is_an_invalid_case_not_a_pass(pytester: pytest.Pytester) -> None:
    """Break-it rows 199/200: the second ``label`` removed the first one's forbidden action; the case passed."""
    write_demo(pytester.path, [CASES[0]], extra_lines=[TWO_LABELS])
    result = pytester.runpytest("cases/", "-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*cases.jsonl: case twice: label: line 2: the key 'label' is given twice in one "
                                 "object: JSON keeps only one of them without a word; give each key once*"])


def test_a_case_with_two_ids_is_refused_naming_the_line(tmp_path: Path) -> None:
    case = dict(CASES[0])
    line = json.dumps(case).replace('"id": "a-read"', '"id": "a-read", "id": "b"')
    fam = write_demo(tmp_path, [], extra_lines=[line])
    refs, problems = case_refs(fam / "cases.jsonl", load_family(fam), set())
    assert refs == [] and [(p.case_id, p.field) for p in problems] == [("b", "id")]
    assert "line 1: the key 'id' is given twice" in problems[0].message


def test_a_family_tools_file_with_a_repeated_key_is_refused(tmp_path: Path) -> None:
    fam = tmp_path / "cases" / "t"
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text("name: t\ntools_file: tools.json\n")
    (fam / "tools.json").write_text('[{"name": "a", "parameters": {"type": "object"}, "name": "b"}]')
    with pytest.raises(FamilyError, match=r"tools_file .*tools.json: the key 'name' is given twice"):
        load_family(fam)


def test_record_logs_baselines_label_files_and_traces_refuse_a_repeated_key(tmp_path: Path) -> None:
    log = tmp_path / "r.jsonl"
    log.write_text('{"id": "x", "outcome": "scored", "outcome": "error"}\n')
    with pytest.raises(ValueError, match=r"line 1: the key 'outcome' is given twice .*id 'x'"):
        load_records(log)
    base = tmp_path / "b.json"
    base.write_text('{"kind": "tooleffect-baseline", "version": 1, "version": 1}')
    with pytest.raises(BaselineError, match="the key 'version' is given twice"):
        Baseline.load(base)
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"id": "a", "valid_actions": [{"tool": null}], "valid_actions": []}\n')
    with pytest.raises(ValueError, match=r"labels.jsonl: line 1: the key 'valid_actions' is given twice"):
        read_labels(labels)
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"id": "r", "messages": [{"role": "user", "content": "a", "content": "b"}]}\n')
    with pytest.raises(TraceError, match=r"t.jsonl: line 1: the key 'content' is given twice .*id 'r'"):
        list(read_openai_jsonl(trace))
    otel = tmp_path / "o.json"
    otel.write_text('{"resourceSpans": [], "resourceSpans": []}')
    with pytest.raises(TraceError, match=r"o.json: the key 'resourceSpans' is given twice"):
        list(read_otel(otel))


def test_tooleffect_report_names_the_repeated_key_of_a_record_log(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "r.jsonl"
    log.write_text('{"id": "x", "id": "y"}\n')
    assert main(["report", str(log)]) == 2
    assert "line 1: the key 'id' is given twice in one object (in the entry of id 'y')" in capsys.readouterr().err
