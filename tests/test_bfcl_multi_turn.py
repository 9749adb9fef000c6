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

from pytest_tooleffect.data.importers.bfcl_multi_turn import MULTI_TURN, import_multi_turn, parse_call
from pytest_tooleffect.formats import Effect
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


@pytest.mark.shared
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


@pytest.mark.shared
def test_a_missing_function_is_not_offered_until_its_turn(imported: tuple[Path, dict[str, Any]]) -> None:
    out, _ = imported
    entry = json.loads((BFCL / MULTI_TURN["multi_turn_miss_func"][0]).read_text().splitlines()[0])
    ((turn, names),) = entry["missed_function"].items()
    for case in _cases(out, "multi_turn_miss_func"):
        if case["source"]["trace_id"] != entry["id"]:
            continue
        offered = {t["name"] for t in case["tools"]}
        assert set(names) <= offered if case["source"]["position"] >= int(turn) else not set(names) & offered


@pytest.mark.shared
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


@pytest.mark.shared
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


# ------------------------------------------------------------------ conversations played through

def _conversation_script(entries: dict[str, tuple[dict[str, Any], list[list[str]]]], world: Any,
                         wrong: tuple[str, int, int]) -> Any:
    """A scripted model that follows each conversation's ground truth, except one call (``wrong``:
    entry id, turn, call) whose first argument it changes; at a turn whose ground truth is ``[]``
    it asks (miss_param) or says the function is not available (miss_func)."""
    import inspect

    from pytest_tooleffect.data.importers.bfcl_multi_turn import ADDITIONAL_FUNCTION_PROMPT
    from pytest_tooleffect.servers.scripted import Reply

    opening = {entry["question"][0][0]["content"]: eid for eid, (entry, _) in entries.items()}

    def script(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        users = [i for i, m in enumerate(messages) if m["role"] == "user"]
        eid = opening[next(m["content"] for m in messages if m["role"] == "user")]
        entry, truth = entries[eid]
        contents = [(q[0]["content"] if q else ADDITIONAL_FUNCTION_PROMPT) for q in entry["question"]]
        turn = max(t for t, c in enumerate(contents) if c == messages[users[-1]]["content"])
        made = sum(1 for m in messages[users[-1]:] if m["role"] == "assistant" and m.get("tool_calls"))
        if made < len(truth[turn]):
            signatures = {m: inspect.signature(f) for c in entry["involved_classes"]
                          for m, f in world.methods(world.load_class(c)).items()}
            name, args = parse_call(truth[turn][made], signatures)
            if (eid, turn, made) == wrong:
                key = next(iter(args))
                args[key] = f"{args[key]}_x"
            return Reply(tool_calls=[(name, args)])
        if truth[turn]:
            return Reply(text="Done: that is finished.")
        if "miss_func" in eid:
            return Reply(text="I cannot do that: the function it needs is not available to me.")
        return Reply(text="Which file should I use for that?")
    return script


@pytest.mark.shared
@pytest.mark.parametrize("workers", [0, 2])
def test_a_conversation_is_played_through_and_judged_per_turn_beside_its_teacher_forced_decisions(
        pytester: pytest.Pytester, tmp_path: Path, world: Any, workers: int) -> None:
    import jsonschema

    from pytest_tooleffect.options import OPT_API_BASE, OPT_MODEL, OPT_REPORT, OPT_ROLLOUT
    from pytest_tooleffect.servers.scripted import ScriptedServer
    from tests.conftest import generated_report_schema

    keep = {"multi_turn_miss_param": "multi_turn_miss_param_1", "multi_turn_miss_func": "multi_turn_miss_func_0"}
    entries: dict[str, tuple[dict[str, Any], list[list[str]]]] = {}
    for category, eid in keep.items():
        import_multi_turn(BFCL, tmp_path, category, limit=2)
        cases = [c for c in _cases(tmp_path, category) if c["source"]["trace_id"] == eid]
        (pytester.path / category).mkdir()
        for name in ("family.yaml", "rules.yaml"):
            (pytester.path / category / name).write_text((tmp_path / category / name).read_text())
        (pytester.path / category / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
        data, answers = (BFCL / f for f in MULTI_TURN[category])
        entry = next(e for e in map(json.loads, data.read_text().splitlines()) if e["id"] == eid)
        truth = next(a for a in map(json.loads, answers.read_text().splitlines()) if a["id"] == eid)["ground_truth"]
        entries[eid] = (entry, truth)
    # miss_param_1, turn 1: mv(source='log.txt', destination='archive') moves the log elsewhere
    wrong = ("multi_turn_miss_param_1", 1, 1)
    with ScriptedServer(_conversation_script(entries, world, wrong)) as srv:
        result = pytester.runpytest(*keep, f"{OPT_SANDBOX}=docker", OPT_MODEL, "openai/scripted", OPT_API_BASE,
                                    srv.base_url, OPT_ROLLOUT, "6", f"{OPT_RECORDS}=rec.jsonl",
                                    f"{OPT_REPORT}=report.json", "-p", "no:randomly", "-n", str(workers))
        requests = srv.requests
    records = {r["case_id"]: r for r in map(json.loads, (pytester.path / "rec.jsonl").read_text().splitlines())}
    assert {r["sandbox"]["worker"] == "main" for r in records.values()} == {not workers}
    played = {cid: r for cid, r in records.items() if r.get("conversation")}
    assert set(played) == {"multi_turn_miss_param_1.t0.c0", "multi_turn_miss_func_0.t0.c0"}
    # the whole conversation, self-steered: every turn, its calls run against the world and judged
    right = played["multi_turn_miss_func_0.t0.c0"]
    entry, truth = entries["multi_turn_miss_func_0"]
    assert right["conversation"] == {"passed": True, "kind": "ok", "turn": None, "message": "",
                                     "turns_ok": len(truth), "turns": len(truth)}
    assert right["rollout"]["steps"] == sum(len(t) + 1 for t in truth) and right["rollout"]["limit"] == 6
    called = [c["name"] for s in right["steps"] for c in s["calls"]]
    assert called == [parse_call(c, {n: _sig(world, entry, n) for n in _names(world, entry)})[0]
                      for t in truth for c in t]
    # the held-back function is offered from its turn on, in the self-steered run as in BFCL
    steered = [r for r in requests if r["messages"][0]["content"] == entry["question"][0][0]["content"]
               and len([m for m in r["messages"] if m["role"] == "user"]) == len(truth)]
    assert steered and all("sort" in {t["function"]["name"] for t in r["tools"]} for r in steered)
    early = [r for r in requests if r["messages"][0]["content"] == entry["question"][0][0]["content"]
             and len([m for m in r["messages"] if m["role"] == "user"]) == 1]
    assert early and all("sort" not in {t["function"]["name"] for t in r["tools"]} for r in early)
    # one argument wrong: the conversation fails at that turn on the world's state
    failed = played["multi_turn_miss_param_1.t0.c0"]["conversation"]
    assert (failed["passed"], failed["kind"], failed["turn"], failed["turns_ok"]) == (False, "state_mismatch", 1, 1)
    # teacher-forced, only that one decision fails; every other decision point passes
    assert {cid for cid, r in records.items() if r["verdict"]["kind"] not in ("ok", "ok_no_tool")} == \
        {"multi_turn_miss_param_1.t1.c1"}
    no_call = [r for cid, r in records.items() if r["class"] == "no_tool"]
    assert no_call and all(r["verdict"]["kind"] == "ok_no_tool" for r in no_call)
    report = json.loads((pytester.path / "report.json").read_text())
    jsonschema.validate(report, generated_report_schema())
    conv = {b["family"]: b["effects"]["conversations"] for b in report["blocks"]}
    n_mp = sum(1 for cid in records if cid.startswith("multi_turn_miss_param_1."))
    n_turns = len(entries["multi_turn_miss_param_1"][1])
    mp = conv["bfcl-multi-turn-miss-param"]
    assert {k: mp[k] for k in ("n", "limit", "passed", "self_steered_display", "decisions", "turns", "kinds")} == {
        "n": 1, "limit": 6, "passed": 0, "self_steered_display": "0.0", "decisions": n_mp, "turns": n_turns,
        "kinds": {"state_mismatch": 1}}
    assert conv["bfcl-multi-turn-miss-param"]["decisions_pct"] == pytest.approx(100 * (n_mp - 1) / n_mp, abs=0.05)
    assert conv["bfcl-multi-turn-miss-param"]["turns_pct"] == pytest.approx(100 * (n_turns - 1) / n_turns, abs=0.05)
    assert conv["bfcl-multi-turn-miss-func"]["self_steered_display"] == "100.0"
    assert conv["bfcl-multi-turn-miss-func"]["decisions_display"] == "100.0"
    # teacher-forced items stayed one step: only the conversations' first cases rolled on
    assert {r["rollout"]["steps"] for cid, r in records.items() if cid not in played} == {1}
    result.assert_outcomes(passed=len(records) - 2, failed=2)
    result.stdout.fnmatch_lines(["*conversations played through (self-steered, up to 6 steps a turn): 0.0 % (0/1)*"])


def _names(world: Any, entry: dict[str, Any]) -> list[str]:
    return [m for c in entry["involved_classes"] for m in world.methods(world.load_class(c))]


def _sig(world: Any, entry: dict[str, Any], name: str) -> Any:
    import inspect

    return next(inspect.signature(f) for c in entry["involved_classes"]
                for m, f in world.methods(world.load_class(c)).items() if m == name)


@pytest.mark.shared
def test_a_turn_that_adds_functions_opens_with_bfcls_own_user_message_and_miss_func_replies_say_so(
        imported: tuple[Path, dict[str, Any]]) -> None:
    from pytest_tooleffect.data.importers.bfcl_multi_turn import ADDITIONAL_FUNCTION_PROMPT, NOT_AVAILABLE

    out, _ = imported
    entry = json.loads((BFCL / MULTI_TURN["multi_turn_miss_func"][0]).read_text().splitlines()[0])
    ((turn, _names),) = entry["missed_function"].items()
    assert entry["question"][int(turn)] == []  # BFCL's data leaves the turn empty; its inference loop fills it
    cases = [c for c in _cases(out, "multi_turn_miss_func") if c["source"]["trace_id"] == entry["id"]]
    at_turn = [c for c in cases if c["source"]["position"] == int(turn)]
    users = [m for m in at_turn[0]["messages"] if m["role"] == "user"]
    assert len(users) == int(turn) + 1 and users[-1]["content"] == ADDITIONAL_FUNCTION_PROMPT
    conversation = cases[0]["conversation"]
    assert conversation["turns"][int(turn)]["user"] == [{"role": "user", "content": ADDITIONAL_FUNCTION_PROMPT}]
    assert "sort" in {t["name"] for t in conversation["turns"][int(turn)]["tools"]}
    assert all("conversation" not in c for c in cases[1:])
    empty = [c for c in cases if c["id"].endswith(".stop") and not c["expected_effects"][0]["same_as_after"]
             and c["label"]["valid_actions"][0].get("reply") == "refuse"]
    assert empty and all(c["label"]["valid_actions"][0]["must"] == [NOT_AVAILABLE] for c in empty)


def test_a_conversation_is_checked_at_load() -> None:
    from pytest_tooleffect.formats import Case

    base = {"id": "c", "placement": {"step": 0, "run_length": 1, "bucket": "first"}, "source": "authored",
            "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ValueError, match=r"turns\[0\].user"):
        Case.model_validate({**base, "conversation": {"turns": [{"user": [{"role": "user", "content": "x"}]}]}})
    with pytest.raises(ValueError, match=r"turns\[1\].user"):
        Case.model_validate({**base, "conversation": {"turns": [{}, {"user": []}]}})
    # a step limit reached mid-turn ends the conversation there (BFCL: force_terminated)
    cut = judge_conversation([TurnCheck(0, ("r",), ("r",)), TurnCheck(1, ("r2",), ("a", "b"), step_limit=True)])
    assert (cut.kind, cut.turn, cut.turns_ok) == ("step_limit", 1, 1)


@pytest.mark.shared
def test_a_conversation_calling_a_function_not_offered_is_refused_and_the_importer_leaves_it_out(
        imported: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    from pytest_tooleffect.collect.cases import load_family, validate_case
    from pytest_tooleffect.formats import Case

    out, _ = imported
    case = _cases(out, "multi_turn_base")[0]
    family = load_family(out / "multi_turn_base")
    assert validate_case(Case.model_validate(case), family) == []
    reference = case["conversation"]["turns"][0]["reference"]
    reference.append({"name": "no_such_function", "arguments": {}})
    assert validate_case(Case.model_validate(case), family) == [
        (f"conversation.turns[0].reference[{len(reference) - 1}].name", "'no_such_function' is not offered at turn 0")]
    reference.pop()
    fam = tmp_path / "fam"
    fam.mkdir()
    (fam / "family.yaml").write_text((out / "multi_turn_base" / "family.yaml").read_text()
                                     .replace(", rollout: conversation", ""))
    (fam / "rules.yaml").write_text((out / "multi_turn_base" / "rules.yaml").read_text())
    problems = validate_case(Case.model_validate(case), load_family(fam))
    assert [f for f, _ in problems] == ["conversation"] and "rollout: conversation" in problems[0][1]
    # BFCL's miss_func_49 calls tail, which its turn does not offer: the decision stays, the conversation is listed
    counts = import_multi_turn(BFCL, tmp_path / "mf", "multi_turn_miss_func", limit=50)
    assert counts["conversations_left_out"] == 1
    listed = json.loads((tmp_path / "mf" / "multi_turn_miss_func" / "rejected.json").read_text())
    assert {"id": "multi_turn_miss_func_49.t0.c0", "field": "conversation",
            "problems": ["conversation.turns[1].reference[1].name: 'tail' is not offered at turn 1"]} in listed
    kept = next(c for c in _cases(tmp_path / "mf", "multi_turn_miss_func") if c["id"] == "multi_turn_miss_func_49.t0.c0")
    assert "conversation" not in kept


@pytest.mark.shared
def test_the_no_call_turns_are_reported_apart_by_the_reply_due(
        pytester: pytest.Pytester, imported: tuple[Path, dict[str, Any]]) -> None:
    import shutil

    from pytest_tooleffect.options import OPT_REPORT

    out, _ = imported
    shutil.copytree(out / "multi_turn_miss_param", pytester.path / "multi_turn_miss_param")
    cases = _cases(pytester.path, "multi_turn_miss_param")
    empty = [c for c in cases if c["label"]["valid_actions"][0].get("reply") == "ask"]
    ends = [c for c in cases if c["label"]["valid_actions"][0].get("reply") == "answer"]
    assert len(empty) >= 2 and all("ground truth is []" in c["label"]["valid_actions"][0]["reason"] for c in empty)
    empty[0]["recorded"] = {"tool_calls": [], "text": "Done."}  # a guess where a question was due
    empty[1]["recorded"] = {"tool_calls": [{"name": "ls", "arguments": {}}]}  # a call where none was right
    (pytester.path / "multi_turn_miss_param" / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    result = pytester.runpytest("multi_turn_miss_param", f"{OPT_SANDBOX}=local", f"{OPT_RECORDS}=rec.jsonl",
                                f"{OPT_REPORT}=report.json", "-p", "no:randomly")
    result.assert_outcomes(passed=len(cases) - 2, failed=2)
    records = {r["case_id"]: r for r in map(json.loads, (pytester.path / "rec.jsonl").read_text().splitlines())}
    assert {cid: r["reply_due"] for cid, r in records.items() if "reply_due" in r} == {
        **{c["id"]: "ask" for c in empty}, **{c["id"]: "answer" for c in ends}}
    (block,) = json.loads((pytester.path / "report.json").read_text())["blocks"]
    n = len(empty)
    assert block["no_tool_by_reply"]["ask"] == {
        "n": n, "no_call_pct": pytest.approx(100 * (n - 1) / n, abs=0.05),
        "no_call_display": f"{100 * (n - 1) / n:.1f}", "right_pct": pytest.approx(100 * (n - 2) / n, abs=0.05),
        "right_display": f"{100 * (n - 2) / n:.1f}"}
    assert block["no_tool_by_reply"]["answer"]["n"] == len(ends)
    assert block["no_tool_by_reply"]["answer"]["right_display"] == "100.0"
    assert set(block["no_tool_by_reply"]) == {"ask", "answer"}
    assert block["classes"]["no_tool"]["n"] == n + len(ends)
    result.stdout.fnmatch_lines([f"*no_tool by the reply due: ask {n} (no call *"])


def _bad_source(tmp: Path) -> Path:
    """A BFCL folder whose base data file holds two good conversations around five bad lines."""
    src = tmp / "bfcl"
    (src / "possible_answer").mkdir(parents=True)
    (src / "multi_turn_func_doc").symlink_to(BFCL / "multi_turn_func_doc")
    data, answers = MULTI_TURN["multi_turn_base"]
    (src / answers).symlink_to(BFCL / answers)
    good = [json.loads(line) for line in (BFCL / data).read_text().splitlines()[:2]]
    unknown = {**good[0], "id": "multi_turn_base_2", "involved_classes": ["NoSuchAPI"]}
    no_question = {k: v for k, v in good[0].items() if k != "question"} | {"id": "multi_turn_base_3"}
    no_answer = {**good[0], "id": "no_such_answer"}
    bad_config = {**good[0], "id": "multi_turn_base_4", "initial_config": ["not", "an", "object"]}
    lines = [json.dumps(good[0]), "not json at all", json.dumps(unknown), json.dumps(no_question),
             json.dumps(no_answer), json.dumps(bad_config), json.dumps(good[1])]
    (src / data).write_text("\n".join(lines) + "\n")
    return src


@pytest.mark.shared
def test_a_malformed_conversation_is_rejected_by_id_and_field_and_the_rest_imported(tmp_path: Path) -> None:
    src = _bad_source(tmp_path)
    said: list[str] = []
    counts = import_multi_turn(src, tmp_path / "out", "multi_turn_base", on_reject=said.append)
    assert counts["conversations"] == 2 and counts["conversations_rejected"] == 5
    fam = tmp_path / "out" / "multi_turn_base"
    listed = {(r["id"], r.get("field")) for r in json.loads((fam / "rejected.json").read_text())}
    assert {("line 2", "entry"), ("multi_turn_base_2", "involved_classes"), ("multi_turn_base_3", "question"),
            ("no_such_answer", "ground_truth"), ("multi_turn_base_4", "initial_config")} <= listed
    assert {c["source"]["trace_id"] for c in _cases(tmp_path / "out", "multi_turn_base")} == {
        "multi_turn_base_0", "multi_turn_base_1"}
    data = str(src / MULTI_TURN["multi_turn_base"][0])
    assert len(said) == 5 and all(line.startswith(data + ": ") and "\n" not in line for line in said)
    assert any("multi_turn_base_2: involved_classes: no BFCL back-end class 'NoSuchAPI'" in line for line in said)


@pytest.mark.shared
@pytest.mark.parametrize("kind", ["garbage", "unknown_class", "no_question"])
def test_import_bfcl_names_the_file_entry_and_field_of_a_bad_conversation_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    from pytest_tooleffect.cli import main

    src = _bad_source(tmp_path / "shared" / "datasets")
    data = src / MULTI_TURN["multi_turn_base"][0]
    lines = data.read_text().splitlines()
    data.write_text(lines[{"garbage": 1, "unknown_class": 2, "no_question": 3}[kind]] + "\n")
    rc = main(["import", "bfcl", "--shared", str(tmp_path / "shared"), "--category", "multi_turn_base",
               "--limit", "1", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and "Traceback" not in err and len(err.splitlines()) == 1
    field = {"garbage": "line 1: entry", "unknown_class": "multi_turn_base_2: involved_classes",
             "no_question": "multi_turn_base_3: question"}[kind]
    assert err.startswith(f"tooleffect import: {data}: {field}: ")


@pytest.mark.shared
def test_a_bfcl_possible_answer_file_that_is_not_json_is_named_with_its_line(tmp_path: Path) -> None:
    src = _bad_source(tmp_path)
    answers = src / MULTI_TURN["multi_turn_base"][1]
    answers.unlink()
    answers.write_text("{\"id\": \"multi_turn_base_0\", \"ground_truth\": []}\n{oops\n")
    with pytest.raises(ValueError, match=rf"^{answers}: line 2: not valid JSON"):
        import_multi_turn(src, tmp_path / "out", "multi_turn_base")
