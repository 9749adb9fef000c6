"""BFCL import: dialect mapping, alternatives, parallel groups, irrelevance, rejected entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.data.importers.bfcl import convert_schema, label_from_ground_truth
from pytest_tooleffect.oracle import score
from tests.conftest import SHARED


def _cases(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in map(json.loads, path.read_text().splitlines())}


def test_schema_dialect() -> None:
    got = convert_schema({"type": "dict", "properties": {
        "x": {"type": "float"}, "t": {"type": "tuple", "items": {"type": "integer"}}, "a": {"type": "any"},
        "m": {"type": "array", "items": {"type": "string"}, "enum": ["u", "v"]}}})
    assert got == {"type": "object", "properties": {
        "x": {"type": "number"}, "t": {"type": "array", "items": {"type": "integer"}}, "a": {},
        "m": {"type": "array", "items": {"type": "string", "enum": ["u", "v"]}}}}


def test_alternatives_and_groups() -> None:
    one = label_from_ground_truth([{"f": {"a": [1], "b": ["x", "X", ""], "c": ["", None], "d": [{"k": ["v", "w"]}]}}])
    assert one["valid_actions"] == [{"tool": "f", "args": {
        "a": 1, "b": {"$any_of": ["x", "X", {"$omitted": True}]}, "c": {"$any_of": [{"$omitted": True}, None]},
        "d": {"k": {"$any_of": ["v", "w"]}}}}]
    two = label_from_ground_truth([{"f": {"a": [1]}}, {"g": {"b": [2]}}])
    assert two["valid_actions"] == [{"parallel": [{"tool": "f", "args": {"a": 1}}, {"tool": "g", "args": {"b": 2}}],
                                     "order_matters": False}]


@pytest.mark.shared
def test_import_and_score(tmp_path: Path) -> None:
    assert main(["import", "bfcl", "--shared", str(SHARED), "--out", str(tmp_path), "--category", "simple",
                 "--category", "parallel", "--category", "irrelevance", "--category", "live_simple"]) == 0
    simple = _cases(tmp_path / "simple" / "cases.jsonl")
    case = simple["simple_python_0"]
    assert case["tools"][0]["parameters"]["type"] == "object"
    label, tools = case["label"], case["tools"]
    ok = {"tool_calls": [{"name": "calculate_triangle_area", "arguments": '{"base": 10, "height": 5}'}]}
    assert score(ok, label, tools).kind == "ok"  # unit may be omitted ("" among its alternatives)
    bad = {"tool_calls": [{"name": "calculate_triangle_area", "arguments": '{"base": 10, "height": 5, "unit": "cm"}'}]}
    assert score(bad, label, tools).kind == "right_tool_wrong_args"
    parallel = _cases(tmp_path / "parallel" / "cases.jsonl")
    assert all("parallel" in c["label"]["valid_actions"][0] for c in parallel.values())
    irrelevance = _cases(tmp_path / "irrelevance" / "cases.jsonl")
    assert len(irrelevance) == 240 and all(c["label"]["valid_actions"][0]["tool"] is None for c in irrelevance.values())
    rejected = json.loads((tmp_path / "live_simple" / "rejected.json").read_text())
    assert rejected and all(r["problems"] for r in rejected)
    assert len(_cases(tmp_path / "live_simple" / "cases.jsonl")) + len(rejected) == 258


def _first(value: object) -> object:
    """The label's first acceptable value (``$omitted`` skipped), nested objects included."""
    if isinstance(value, dict) and "$any_of" in value:
        taken = [v for v in value["$any_of"] if not (isinstance(v, dict) and "$omitted" in v)]
        return _first(taken[0]) if taken else None
    if isinstance(value, dict):
        return {k: _first(v) for k, v in value.items()}
    return value


def _turns(label: dict) -> list[dict]:
    """The label's first values as a turn, and the same with every top-level string upper-cased."""
    alt = label["valid_actions"][0]
    calls = alt.get("parallel", [alt])
    first = [{"name": c["tool"], "arguments": _first(c.get("args", {}))} for c in calls]
    shouted = [{**c, "arguments": {k: v.upper() if isinstance(v, str) else v for k, v in c["arguments"].items()}}
               for c in first]
    return [{"tool_calls": first}, {"tool_calls": shouted}, {"tool_calls": first[::-1]}]


@pytest.mark.shared
def test_scoring_a_label_again_through_its_compiled_calls_gives_the_same_verdicts(tmp_path: Path) -> None:
    # the first use of a label call goes to the comparator, later ones to the compiled call
    from pytest_tooleffect.formats import Label, ToolSpec
    from pytest_tooleffect.oracle import RuleSet

    rules = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}}})

    assert main(["import", "bfcl", "--shared", str(SHARED), "--out", str(tmp_path), "--category", "multiple",
                 "--category", "parallel_multiple"]) == 0
    n = 0
    for category in ("multiple", "parallel_multiple"):
        for case in _cases(tmp_path / category / "cases.jsonl").values():
            label = Label.model_validate(case["label"])
            tools = [ToolSpec.model_validate(t) for t in case["tools"]]
            for turn in _turns(case["label"]):
                # a fresh copy of the label is scored through the comparator (its calls' first use)
                reference = score(turn, label.model_copy(deep=True), tools, rules).to_dict()
                assert score(turn, label, tools, rules).to_dict() == reference
                assert score(turn, label, tools, rules).to_dict() == reference
                n += 1
    assert n == 3 * (199 + 192)  # every imported case (the rest are rejected on import)


# ------------------------------------------------------------------ entries the import refuses whole

ENTRY = {"question": [[{"role": "user", "content": "Area of a triangle, base 10 and height 5?"}]],
         "function": [{"name": "triangle_area", "description": "Area of a triangle.", "parameters": {
             "type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
             "required": ["base", "height"]}}]}
ANSWER = [{"triangle_area": {"base": [10], "height": [5]}}]


def _dataset(root: Path, simple_ids: list[str], irrelevance_ids: list[str]) -> Path:
    """A BFCL data folder with the simple and irrelevance categories, one entry per id given."""
    data = root / "datasets" / "bfcl"
    (data / "possible_answer").mkdir(parents=True)
    (data / "BFCL_v4_simple_python.json").write_text("".join(json.dumps({"id": i, **ENTRY}) + "\n"
                                                             for i in simple_ids))
    (data / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
        "".join(json.dumps({"id": i, "ground_truth": ANSWER}) + "\n" for i in simple_ids))
    (data / "BFCL_v4_irrelevance.json").write_text("".join(json.dumps({"id": i, **ENTRY}) + "\n"
                                                           for i in irrelevance_ids))
    return root


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("simple", "irrelevance", "said"), [
    (["simple_0", "simple_1", "simple_0"], ["irrelevance_0"],
     "BFCL_v4_simple_python.json: line 3: entry id 'simple_0' is given twice (lines 1 and 3)"),
    (["simple_0"], ["irrelevance_0", "../../escaped"],
     "BFCL_v4_irrelevance.json: line 2: entry id '../../escaped' is not a case id (id must start with a letter "
     "or digit and use only A-Z a-z 0-9 _ . : -)"),
])
def test_an_entry_id_the_import_cannot_take_refuses_it_whole_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], simple: list[str], irrelevance: list[str],
        said: str) -> None:
    good = _dataset(tmp_path / "good", ["simple_0", "simple_1"], ["irrelevance_0"])
    bad = _dataset(tmp_path / "bad", simple, irrelevance)
    out = tmp_path / "work" / "bfcl"
    args = ["--out", str(out), "--category", "simple", "--category", "irrelevance"]
    # nothing there yet: the refusal makes neither the folder nor anything beside it
    assert main(["import", "bfcl", "--shared", str(bad), *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and err.endswith("; nothing was imported\n"), err
    assert not out.exists() and not (tmp_path / "escaped").exists()
    # an earlier import is left as it was, byte for byte
    assert main(["import", "bfcl", "--shared", str(good), *args]) == 0
    capsys.readouterr()
    before = _files(out)
    assert set(before) == {f"{c}/{f}" for c in ("simple", "irrelevance")
                           for f in ("family.yaml", "rules.yaml", "cases.jsonl", "rejected.json")}
    assert main(["import", "bfcl", "--shared", str(bad), *args]) == 2
    assert said in capsys.readouterr().err
    assert _files(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["bfcl"]  # no staging folder left behind
    assert not (tmp_path / "escaped").exists() and not (out.parent / "escaped").exists()


def test_a_second_import_replaces_a_family_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bfcl"
    first = _dataset(tmp_path / "first", ["simple_0", "simple_1"], ["irrelevance_0"])
    second = _dataset(tmp_path / "second", ["simple_7"], ["irrelevance_0"])
    for shared in (first, second):
        assert main(["import", "bfcl", "--shared", str(shared), "--out", str(out), "--category", "simple"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"simple": 1}
    assert list(_cases(out / "simple" / "cases.jsonl")) == ["simple_7"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bfcl", "first", "second"]


def test_an_id_answered_twice_refuses_the_import_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """possible_answer giving simple_0 twice (its answer, then another) was imported with the last
    answer as the ground truth, no word: refused now as an entry given twice is."""
    shared = _dataset(tmp_path / "shared", ["simple_0", "simple_1"], ["irrelevance_0"])
    answers = shared / "datasets" / "bfcl" / "possible_answer" / "BFCL_v4_simple_python.json"
    other = [{"triangle_area": {"base": [99], "height": [99]}}]
    with answers.open("a") as fh:
        fh.write(json.dumps({"id": "simple_0", "ground_truth": other}) + "\n")
    out = tmp_path / "bfcl"
    assert main(["import", "bfcl", "--shared", str(shared), "--out", str(out), "--category", "simple"]) == 2
    err = capsys.readouterr().err
    assert (f"{answers}: line 3: entry id 'simple_0' is given twice (lines 1 and 3): which answer is the ground "
            "truth?; nothing was imported") in err
    assert not out.exists()
    turns = shared / "datasets" / "bfcl" / "BFCL_v4_multi_turn_base.json"
    turns.write_text(json.dumps({"id": "multi_turn_base_0", "question": [[{"role": "user", "content": "hi"}]]}) + "\n")
    (answers.parent / turns.name).write_text("".join(json.dumps({"id": "multi_turn_base_0", "ground_truth": [[]]})
                                                     + "\n" for _ in range(2)))
    assert main(["import", "bfcl", "--shared", str(shared), "--out", str(out), "--category", "multi_turn_base"]) == 2
    assert "line 2: entry id 'multi_turn_base_0' is given twice (lines 1 and 2): which answer" in capsys.readouterr().err
    assert not out.exists()


def test_a_multi_turn_entry_id_given_twice_refuses_the_import_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = _dataset(tmp_path / "shared", ["simple_0"], ["irrelevance_0"])
    turns = shared / "datasets" / "bfcl" / "BFCL_v4_multi_turn_base.json"
    turns.write_text("".join(json.dumps({"id": i, "question": [[{"role": "user", "content": "hi"}]]}) + "\n"
                             for i in ("multi_turn_base_0", "multi_turn_base_0")))
    out = tmp_path / "bfcl"
    assert main(["import", "bfcl", "--shared", str(shared), "--out", str(out), "--category", "simple",
                 "--category", "multi_turn_base"]) == 2
    err = capsys.readouterr().err
    assert "BFCL_v4_multi_turn_base.json: line 2: entry id 'multi_turn_base_0' is given twice" in err
    assert err.count("\n") == 1 and not out.exists()  # the single-turn family before it is not written either


@pytest.mark.parametrize("where", ["the dataset's own file", "/dev/null", "a folder under a file"])
def test_an_out_that_is_not_a_folder_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    """Before, an existing file (or /dev/null) as --out gave a raw "[Errno 17] File exists"."""
    shared = _dataset(tmp_path / "shared", ["simple_0"], ["irrelevance_0"])
    data = shared / "datasets" / "bfcl" / "BFCL_v4_simple_python.json"
    before = data.read_bytes()
    out, said = {"the dataset's own file": (data, f"--out {data}: is a file, not a folder"),
                 "/dev/null": (Path("/dev/null"), "--out /dev/null: is a character device, not a folder"),
                 "a folder under a file": (data / "bfcl", f"--out {data / 'bfcl'}: lies under {data}, which is a "
                                                          "file, not a folder")}[where]
    assert main(["import", "bfcl", "--shared", str(shared), "--out", str(out), "--category", "simple"]) == 2
    err = capsys.readouterr().err
    assert err == f"tooleffect import: {said}: the import writes one family folder per category into it\n"
    assert data.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]  # no staging folder left anywhere


@pytest.mark.parametrize("argv", [
    ["import", "tooltalk", "--out"], ["import", "tau-airline", "--out"],
    ["import", "labelled-jsonl", "--input", "rows.jsonl", "--out"], ["sample", "rows.jsonl", "--out"],
    ["generate", "spec.yaml", "--out"]], ids=lambda a: " ".join(a[:2]))
def test_every_command_writing_a_family_folder_refuses_a_file_as_its_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text("{}\n")
    (tmp_path / "spec.yaml").write_text("{}\n")
    (tmp_path / "afile").write_text("kept\n")
    assert main([*argv, "afile", *(["--shared", str(tmp_path)] if argv[0] == "import" else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ": --out afile: is a file, not a folder: " in err, err
    assert (tmp_path / "afile").read_text() == "kept\n"
