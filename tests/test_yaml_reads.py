"""A case value YAML reads as a number, a boolean or null where a string is wanted is named as the
author wrote it, with the fix: ``order_id: 01042`` is YAML 1.1's octal 546, and "546 must be
string" alone names a value nobody wrote.
"""

from __future__ import annotations

from pathlib import Path

from pytest_tooleffect.collect.cases import case_refs, load_case_file
from pytest_tooleffect.collect.family import load_family, yaml_load_items, yaml_written
from tests.demo_family import write_demo

CASE = """\
- id: {cid}
  placement: {{step: 0, run_length: 2, bucket: first}}
  messages: [{{role: user, content: hi}}]
  label: {{valid_actions: [{{tool: read_thread, args: {{thread_id: {value}}}}}]}}
  source: authored
"""


def _problems(tmp_path: Path, text: str) -> list[tuple[str | None, str, str]]:
    fam = write_demo(tmp_path, [])
    (fam / "cases.jsonl").unlink()
    (fam / "cases.yaml").write_text(text)
    refs, problems = case_refs(fam / "cases.yaml", load_family(fam), set())
    cases, again = load_case_file(fam / "cases.yaml", load_family(fam), set())
    assert [(p.field, p.message) for p in again] == [(p.field, p.message) for p in problems]
    return [(p.case_id, p.field, p.message) for p in problems]


def test_an_octal_looking_label_arg_is_named_as_written_with_the_fix(tmp_path: Path) -> None:
    """Break-it row 66."""
    assert _problems(tmp_path, CASE.format(cid="a", value="01042")) == [
        ("a", "label.valid_actions[0].args.thread_id",
         "546 must be string (written 01042, which YAML reads as the number 546: quote it, '01042')")]


def test_every_unquoted_non_string_is_told_and_a_quoted_one_passes(tmp_path: Path) -> None:
    text = "".join(CASE.format(cid=c, value=v) for c, v in
                   [("b", "1.10"), ("c", "no"), ("d", "0x1F"), ("e", "'01042'"), ("f", '"no"')])
    got = {cid: message for cid, _, message in _problems(tmp_path, text)}
    assert got == {
        "b": "1.1 must be string (written 1.10, which YAML reads as the number 1.1: quote it, '1.10')",
        "c": "False must be string (written no, which YAML reads as the boolean false: quote it, 'no')",
        "d": "31 must be string (written 0x1F, which YAML reads as the number 31: quote it, '0x1F')"}


def test_a_case_field_of_the_case_model_is_told_too(tmp_path: Path) -> None:
    """The case's own fields (pydantic's "valid string") come through the same door."""
    problems = _problems(tmp_path, CASE.format(cid="0123", value="x"))
    assert [(f, m.split(" (written")[1]) for _, f, m in problems] == [
        ("id", " 0123, which YAML reads as the number 83: quote it, '0123')")]


def test_the_hint_follows_paths_and_leaves_other_values_alone() -> None:
    _, items = yaml_load_items("cases:\n- {a: [1, ~], b: '7', c: {d: yes}, e: 2}\n", "cases")
    assert items is not None
    node = items[0]
    assert yaml_written(node, "a[0]") == "written 1, which YAML reads as the number 1: quote it, '1'"
    assert yaml_written(node, "a[1]") == "written ~, which YAML reads as null: quote it, '~'"
    assert yaml_written(node, "c.d") == "written yes, which YAML reads as the boolean true: quote it, 'yes'"
    assert [yaml_written(node, f) for f in ("b", "a", "a[5]", "x", "c.d.e", "e.f")] == [None] * 6
    assert yaml_written(None, "a") is None


def test_a_number_wanted_as_a_number_gets_no_hint(tmp_path: Path) -> None:
    problems = _problems(tmp_path, CASE.format(cid="g", value="x").replace("step: 0", "step: -1"))
    assert [f for _, f, _ in problems] == ["placement.step"]
    assert "YAML reads" not in problems[0][2]
