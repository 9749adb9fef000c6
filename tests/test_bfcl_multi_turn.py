"""BFCL multi-turn in the sandbox: the bfcl world (BFCL's own back-ends from the pinned wheel), the
importer's decision points, the exact state check against the ground truth's trajectory (in-process
and in the real Docker engine), the conversation judgement, and conformance with BFCL's own
multi-turn checker on a sample.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.importers.bfcl_multi_turn import MULTI_TURN, import_multi_turn, parse_call
from pytest_tooleffect.models import Effect
from pytest_tooleffect.options import OPT_RECORDS, OPT_SANDBOX
from pytest_tooleffect.oracle.conversation import TurnCheck, judge_conversation, missing_results
from pytest_tooleffect.oracle.effects import judge_effects, reference_key
from pytest_tooleffect.sandbox.bfcl_source import activate
from pytest_tooleffect.sandbox.local import load_service
from tests.conftest import REPO, SHARED

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
BFCL = SHARED / "datasets" / "bfcl"


@pytest.fixture(scope="module")
def world() -> Any:
    activate()
    return load_service().load_world("bfcl")


def _fs_world(world: Any, history: list[dict[str, Any]] | None = None) -> Any:
    config = {"root": {"alice": {"type": "directory", "contents": {
        "notes.txt": {"type": "file", "content": "hello"}}}}}
    return world.ObjectWorld({"classes": [{"class": "GorillaFileSystem", "config": config}],
                              "history": history or []})


def test_render_is_equal_exactly_when_python_finds_the_values_equal(world: Any) -> None:
    a, b = _fs_world(world), _fs_world(world)
    pairs = [((1, 2), [1, 2]), ({1: "x"}, {"1": "x"}), ({"a": [1, 2]}, {"a": [2, 1]}), (1, 1.0), ("A", "a"),
             ({1, 2}, {2, 1}), (a.instances["GorillaFileSystem"].root, b.instances["GorillaFileSystem"].root)]
    for left, right in pairs:
        assert (world.render(left) == world.render(right)) == (left == right), (left, right)
    b.call("touch", {"file_name": "new.txt"})
    root_a, root_b = a.instances["GorillaFileSystem"].root, b.instances["GorillaFileSystem"].root
    assert root_a != root_b and world.render(root_a) != world.render(root_b)


def test_the_world_replays_its_history_and_snapshots_public_attributes_only(world: Any) -> None:
    fresh = _fs_world(world)
    assert fresh.call("ls", {}) == ('{"current_directory_content": ["notes.txt"]}', False)
    replayed = _fs_world(world, [{"step": 0, "name": "mkdir", "arguments": {"dir_name": "tmp"}},
                                 {"step": 1, "name": "cd", "arguments": {"folder": "tmp"}}])
    assert replayed.call("pwd", {})[0] == '{"current_working_directory": "/alice/tmp"}'
    slots = {row["slot"] for row in replayed.snapshot()["state"]}
    assert "GorillaFileSystem.root" in slots and not any(".\u005f" in s for s in slots)  # _current_dir is private
    text, error = replayed.call("cat", {"file_name": "missing.txt"})
    assert error is False and "No such file" in text  # BFCL's own answer, as the model reads it
    assert replayed.call("kill", {})[1] is True
    assert replayed.call("not_a_method", {})[1] is True


def test_ground_truth_calls_get_their_positional_arguments_named(world: Any) -> None:
    import inspect

    signatures = {m: inspect.signature(f) for m, f in world.methods(world.load_class("GorillaFileSystem")).items()}
    assert parse_call("sort('final_report.pdf')", signatures) == ("sort", {"file_name": "final_report.pdf"})
    assert parse_call("mv(source='a', destination='b')", signatures) == ("mv", {"source": "a", "destination": "b"})
    for bad in ("os.system('x')", "nope(1)", "sort(x)", "sort('a', 'b', 'c')", "sort("):
        with pytest.raises(ValueError):
            parse_call(bad, signatures)


def test_same_as_after_holds_only_when_the_world_equals_the_reference_exactly() -> None:
    layout = {"state": {"key": "slot", "columns": {"slot": "TEXT", "value": "JSON"}}}
    seed = {"state": [{"slot": "A.items", "value": [1, 2]}]}
    effect = Effect.model_validate({"same_as_after": [{"name": "add", "arguments": {"x": 3}}]})
    reference = {"state": [{"slot": "A.items", "value": [1, 2, 3]}]}
    refs = {reference_key(effect.same_as_after or []): reference}
    assert judge_effects(seed, reference, layout, [effect], [], references=refs).kind == "ok"
    # another order is another state (a list compares in order, as Python's == does); so is another case
    for after in ([3, 1, 2], [1, 2, "3"], [1, 2]):
        verdict = judge_effects(seed, {"state": [{"slot": "A.items", "value": after}]}, layout, [effect], [],
                                references=refs)
        assert verdict.kind == "effect_missing" and "A.items" in verdict.failures[0]
    assert judge_effects(seed, reference, layout, [effect], []).kind == "effect_missing"  # never run: never ok
    with pytest.raises(ValueError, match="exactly one of"):
        Effect.model_validate({"same_as_after": [], "unchanged": ["state"]})


def test_the_conversation_judgement_follows_bfcl_and_fails_calls_at_no_tool_turns() -> None:
    ok = TurnCheck(0, ("r1",), ("r1",))
    assert judge_conversation([ok]).passed
    assert judge_conversation([TurnCheck(0, ("r1",), ())]).kind == "no_call_when_needed"
    assert judge_conversation([ok, TurnCheck(1, ("r2",), ("r2",), {"state": {"updated": [{}]}})]).kind == \
        "state_mismatch"
    # a result returned in an earlier turn counts (BFCL checks the results of all turns so far)
    assert judge_conversation([TurnCheck(0, ("r1",), ("r1", "r2")), TurnCheck(1, ("r2",), ("x",))]).passed
    assert judge_conversation([TurnCheck(0, ("r1", "r1"), ("r1",))]).kind == "response_mismatch"
    at_empty = [ok, TurnCheck(1, (), ("r9",))]
    assert judge_conversation(at_empty).kind == "call_at_no_tool_turn"
    assert judge_conversation(at_empty, no_tool_turns="bfcl").passed
    assert missing_results(["a", "a", "b"], ["a", "b", "c"]) == ["a"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("bfcl") / "bfcl"
    counts = {c: import_multi_turn(BFCL, out, c, limit=3) for c in MULTI_TURN}
    return out, counts


def _cases(out: Path, category: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / category / "cases.jsonl").read_text().splitlines()]


def test_each_ground_truth_call_and_each_turn_end_is_a_decision_point(imported: tuple[Path, dict[str, Any]]) -> None:
    out, counts = imported
    answers = {json.loads(line)["id"]: json.loads(line)["ground_truth"]
               for line in (BFCL / MULTI_TURN["multi_turn_miss_param"][1]).read_text().splitlines()}
    cases = _cases(out, "multi_turn_miss_param")
    first = [c for c in cases if c["source"]["trace_id"] == "multi_turn_miss_param_0"]
    truth = answers["multi_turn_miss_param_0"]
    assert len(first) == sum(len(t) for t in truth) + len(truth)
    assert counts["multi_turn_miss_param"]["cases"] == len(cases)
    for case in first:
        turn = case["source"]["position"]
        action = case["label"]["valid_actions"][0]
        if case["id"].endswith(".stop"):
            assert action["tool"] is None and case["recorded"]["tool_calls"] == []
            assert action.get("reply", "ask" if not truth[turn] else "answer") == ("ask" if not truth[turn]
                                                                                   else "answer")
        else:
            k = int(case["id"].rsplit(".c", 1)[1])
            assert truth[turn][k].startswith(action["tool"] + "(")
            assert case["expected_effects"][0]["same_as_after"][0]["name"] == action["tool"]
            # the history holds every earlier ground-truth call, each with its result
            assert len(case["world"]["history"]) == sum(len(t) for t in truth[:turn]) + k


def test_a_missing_function_is_not_offered_until_its_turn(imported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = imported
    entry = json.loads((BFCL / MULTI_TURN["multi_turn_miss_func"][0]).read_text().splitlines()[0])
    ((turn, names),) = entry["missed_function"].items()
    for case in _cases(out, "multi_turn_miss_func"):
        if case["source"]["trace_id"] != entry["id"]:
            continue
        offered = {t["name"] for t in case["tools"]}
        assert set(names) <= offered if case["source"]["position"] >= int(turn) else not set(names) & offered


@pytest.mark.parametrize("provider", ["local", "docker"])
def test_the_replayed_ground_truth_passes_every_state_check_and_a_wrong_call_fails_its_own(
        pytester: pytest.Pytester, imported: tuple[Path, dict[str, Any]], provider: str) -> None:
    out, _ = imported
    import shutil

    shutil.copytree(out / "multi_turn_base", pytester.path / "multi_turn_base")
    cases = _cases(pytester.path, "multi_turn_base")
    # a write (cd changes only the private working directory, which no state check sees, as in BFCL)
    wrong = next(c for c in cases if c["recorded"]["tool_calls"] and c["label"]["valid_actions"][0]["tool"] in
                 ("mkdir", "touch", "mv", "echo"))
    call = wrong["recorded"]["tool_calls"][0]
    key = next(iter(call["arguments"]))
    call["arguments"][key] = f"{call['arguments'][key]}-other" if isinstance(call["arguments"][key], str) else 987
    (pytester.path / "multi_turn_base" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    result = pytester.runpytest("multi_turn_base", f"{OPT_SANDBOX}={provider}", f"{OPT_RECORDS}=records.jsonl",
                                "-p", "no:randomly")
    records = {r["case_id"]: r for r in map(json.loads, (pytester.path / "records.jsonl").read_text().splitlines())}
    assert len(records) == len(cases)
    failed = {cid for cid, r in records.items() if r["effect"]["kind"] != "ok"}
    assert failed == {wrong["id"]}, failed
    assert records[wrong["id"]]["effect"]["kind"] == "effect_missing"
    result.assert_outcomes(passed=len(cases) - 1, failed=1)


def test_the_effect_judgement_agrees_with_bfcls_multi_turn_checker_on_a_sample() -> None:
    env = {**os.environ, "TOOLEFFECT_SHARED": str(SHARED)}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bfcl_multi_turn_conformance.py"), "--cached",
                           "--limit", "4"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "unexplained disagreements: 0" in done.stdout
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line[:1].isalpha()}
    # the ground truth passes BFCL's checker and ours on every entry; a dropped call fails both
    assert lines["ground_truth"][2:] == ["0", "0"] and lines["ground_truth"][1] == "0"
    assert lines["call_dropped"][0] == "0"
