"""Import BFCL v4's multi-turn categories as sandboxed families (``sandbox: {world: bfcl}``).

Source: ``BFCL_v4_multi_turn_<category>.json`` (conversations: ``question`` = one list of user
messages per turn, ``initial_config``, ``involved_classes``, ``excluded_function``, and for
``miss_func`` ``missed_function`` = ``{turn: [names]}`` held back until that turn), the
``possible_answer/`` file (``ground_truth`` = one list of Python call strings per turn) and
``multi_turn_func_doc/`` (the functions' documents), all Apache-2.0.

How a conversation becomes labelled decision points (teacher-forced, fixed):

* Every ground-truth call of a turn is one decision point, in the ground truth's order: the
  state holds the conversation so far with the earlier calls made and their results (executed
  by BFCL's own back-ends in the ``bfcl`` world), and the one valid action is the next call.  A
  turn's calls are a **sequence**, not a parallel group: BFCL's ground truth is ordered (``cd``
  before ``mv``) and scored by executing it, so each call is its own decision.  The effect check
  is order-free where the state is: the world after the decision must equal the world after the
  ground-truth call (``same_as_after``), compared exactly as BFCL's state checker compares
  instances.
* After a turn's calls, one more decision point: the **stop** (``{tool: null}``, reply
  ``answer``); the world must not change.
* A turn whose ground truth is ``[]`` is a no-tool decision point: in ``miss_param`` the reply
  must **ask** for the missing value (the user gives it a turn later); in ``miss_func`` the
  needed function is not offered yet and the reply must say it cannot be done with the tools it
  has (reply ``refuse``, ``must``: :data:`NOT_AVAILABLE`); elsewhere (three turns in base /
  long_context) reply ``answer``.
* The conversation's first decision point also carries the whole ``conversation`` (each later
  turn's user messages, the tools offered when they change, each turn's ground-truth calls),
  and the family's ``sandbox.rollout`` is ``conversation``: with ``--tooleffect-rollout N`` and a
  live policy that case is played through whole (self-steered) while every other case stays
  teacher-forced.
* A ``miss_func`` turn that adds the held-back functions has no user message in BFCL's data; it
  gets the one BFCL's inference loop gives there (:data:`ADDITIONAL_FUNCTION_PROMPT`).
* Positional arguments in the ground truth are named from the back-end method's signature.
* ``recorded`` is the ground truth itself (replay scores the reference; texts of no-tool turns
  are written by the importer, since BFCL's ground truth has none), so
  ``pytest <out> --tooleffect-sandbox docker`` checks every state of the replayed ground truth.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_tooleffect.data.importers.bfcl import bfcl_tool, check_entry_ids
from pytest_tooleffect.util.jsonl import json_lines, read_objects

__all__ = ["MULTI_TURN", "EntryError", "check_entry", "import_multi_turn", "parse_call"]

#: category → (data file, possible-answer file)
MULTI_TURN: dict[str, tuple[str, str]] = {
    c: (f"BFCL_v4_{c}.json", f"possible_answer/BFCL_v4_{c}.json")
    for c in ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")
}

FAMILY = """\
# BFCL v4 {category}: imported by `tooleffect import bfcl` from the Berkeley Function Calling
# Leaderboard data (ShishirPatil/gorilla, Apache-2.0). One decision point per ground-truth call
# and per turn end, run in the bfcl sandbox world (BFCL's own back-ends). Replay the ground truth:
#   pytest {out} --tooleffect-sandbox docker
name: bfcl-{name}
description: BFCL v4 {category}, teacher-forced per turn; labels and replay from the ground truth.
oracle: rules.yaml
licence: Apache-2.0 (BFCL data and back-ends, ShishirPatil/gorilla)
sandbox: {{world: bfcl, rollout: conversation}}
"""

RULES = """\
# BFCL multi-turn families: arguments compare after NFKC, trimming and case-folding at the name +
# args level; the effect level compares the world exactly, as BFCL's state checker does.
defaults:
  string: {normalise: [nfkc, strip, casefold]}
"""

TEXTS = {"answer": "Done.", "ask": "Could you give me the missing detail so I can go on?",
         "refuse": "I cannot do that: the function it needs is not available to me."}
#: the user message BFCL's inference loop gives at a turn that adds held-back functions and has no
#: message of its own (``bfcl_eval.constants.default_prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC``)
ADDITIONAL_FUNCTION_PROMPT = "I have updated some more functions you can choose from. What about now?"
#: what a miss_func reply at a ``[]`` turn must say, beside its reply kind ``refuse``
NOT_AVAILABLE = "says the function it needs is not available"


class EntryError(ValueError):
    """A BFCL conversation that cannot become cases: ``field`` is the entry's key at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.problem = message


def check_entry(entry: Any, classes: dict[str, str]) -> None:
    """Check the shape of one BFCL multi-turn entry before it is read.

    Args:
        entry: one line of ``BFCL_v4_multi_turn_<category>.json``, parsed.
        classes: the known back-end class names (→ their module).

    Raises:
        EntryError: a missing or mistyped key, or an unknown back-end class (``field`` names it).
    """
    if not isinstance(entry, dict):
        raise EntryError("entry", f"not a JSON object but {type(entry).__name__}")
    if not isinstance(entry.get("id"), str) or not entry["id"]:
        raise EntryError("id", "missing or not a string")
    question = entry.get("question")
    if not isinstance(question, list) or not question:
        raise EntryError("question", "missing or not a non-empty list of turns")
    for t, users in enumerate(question):
        if not isinstance(users, list) or not all(isinstance(m, dict) and "role" in m for m in users):
            raise EntryError(f"question[{t}]", "not a list of messages (objects with a role)")
    involved = entry.get("involved_classes")
    if not isinstance(involved, list) or not involved or not all(isinstance(c, str) for c in involved):
        raise EntryError("involved_classes", "missing or not a non-empty list of class names")
    unknown = [c for c in involved if c not in classes]
    if unknown:
        raise EntryError("involved_classes", f"no BFCL back-end class {unknown[0]!r} (known: {', '.join(classes)})")
    config = entry.get("initial_config")
    if config is not None and not isinstance(config, dict):
        raise EntryError("initial_config", "not an object (class name → its configuration)")
    excluded = entry.get("excluded_function")
    if excluded is not None and not (isinstance(excluded, list) and all(isinstance(f, str) for f in excluded)):
        raise EntryError("excluded_function", "not a list of function names")
    missed = entry.get("missed_function")
    if missed is not None:
        if not isinstance(missed, dict) or not all(
                str(k).isdigit() and isinstance(v, list) and all(isinstance(f, str) for f in v)
                for k, v in missed.items()):
            raise EntryError("missed_function", "not an object of turn number → list of function names")


def _truth(value: Any) -> list[list[str]]:
    if not (isinstance(value, list) and all(isinstance(t, list) and all(isinstance(c, str) for c in t)
                                            for t in value)):
        raise EntryError("ground_truth", "not a list of turns, each a list of call strings")
    return value


def parse_call(text: str, signatures: dict[str, inspect.Signature]) -> tuple[str, dict[str, Any]]:
    """A ground-truth call string (``"mv(source='a', destination='b')"``) → name and arguments.

    Raises:
        ValueError: not one call of a known function with literal arguments.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {text!r} ({exc.msg})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call of a function name: {text!r}")
    name = node.func.id
    if name not in signatures:
        raise ValueError(f"{text!r}: no involved class has {name!r}")
    params = [p for p in signatures[name].parameters.values() if p.name != "self"]
    args: dict[str, Any] = {}
    try:
        for param, value in zip(params, node.args, strict=False):
            args[param.name] = ast.literal_eval(value)
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError(f"{text!r}: **kwargs")
            args[kw.arg] = ast.literal_eval(kw.value)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"{text!r}: an argument is not a literal ({exc})") from None
    if len(node.args) > len(params):
        raise ValueError(f"{text!r}: {len(node.args)} positional arguments for {len(params)} parameters")
    return name, args


def _docs(source: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((source / "multi_turn_func_doc").glob("*.json")):
        for _, spec in read_objects(path):
            if not isinstance(spec.get("name"), str):
                raise ValueError(f"{path}: a function document without a name")
            out[spec["name"]] = {**spec, "_file": path.stem}
    return out


def _reply(kind: str) -> dict[str, str]:
    """``{"reply": kind}`` where the label model has reply kinds."""
    from pytest_tooleffect.formats import Action

    return {"reply": kind} if "reply" in Action.model_fields else {}


def _bucket(step: int, length: int) -> str:
    from pytest_tooleffect.collect.traces import position_bucket

    return position_bucket(step, length)


def conversation_cases(entry: dict[str, Any], truth: list[list[str]], category: str,
                       docs: dict[str, dict[str, Any]], world: Any) -> list[dict[str, Any]]:
    """The labelled decision points of one conversation (see the module docstring).

    Args:
        entry: the BFCL entry.
        truth: its ground truth, one list of call strings per turn.
        category: e.g. ``multi_turn_miss_param``.
        docs: function name → document (with ``_file``, its back-end's doc file).
        world: the ``bfcl`` world module (``ObjectWorld``, ``CLASS_MODULES``, ``methods``).

    Raises:
        EntryError: an entry that does not have BFCL's shape (see :func:`check_entry`), or a
            ground-truth call that cannot be read (field ``ground_truth[turn]``).
    """
    check_entry(entry, world.CLASS_MODULES)
    truth = _truth(truth)
    classes = list(entry["involved_classes"])
    config = entry.get("initial_config") or {}
    seed = [{"class": c, "config": config.get(c, {})} for c in classes]
    if "long_context" in category:
        seed.append({"class": "$long_context", "config": True})
    try:
        state = world.ObjectWorld({"classes": seed, "history": []})
    except Exception as exc:  # the back-end refused its configuration
        raise EntryError("initial_config", f"{type(exc).__name__}: {exc}") from None
    signatures = {m: inspect.signature(f) for c in classes for m, f in world.methods(world.load_class(c)).items()}
    files = {world.CLASS_MODULES[c] for c in classes}
    excluded = set(entry.get("excluded_function") or [])
    missed = {int(k): set(v) for k, v in (entry.get("missed_function") or {}).items()}
    held = set().union(*missed.values()) if missed else set()
    messages: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    drafts: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    before: list[str] | None = None
    for turn, users in enumerate(entry["question"]):
        if turn in missed and not users:  # as BFCL's inference loop does at a turn that adds functions
            users = [{"role": "user", "content": ADDITIONAL_FUNCTION_PROMPT}]
        held -= missed.get(turn, set())
        offered = sorted(n for n, d in docs.items() if d["_file"] in files and n not in excluded and n not in held)
        tools = [bfcl_tool({k: v for k, v in docs[n].items() if k != "_file"}) for n in offered]
        messages += [dict(m) for m in users]
        calls = truth[turn] if turn < len(truth) else []
        turns.append({"user": [dict(m) for m in users] if turn else [], "reference": [],
                      **({"tools": tools} if turn and offered != before else {})})
        before = offered
        for k, text in enumerate(calls):
            try:
                name, args = parse_call(text, signatures)
            except ValueError as exc:
                raise EntryError(f"ground_truth[{turn}]", str(exc)) from None
            turns[-1]["reference"].append({"name": name, "arguments": args})
            drafts.append({
                "id": f"{entry['id']}.t{turn}.c{k}", "turn": turn, "messages": list(messages), "tools": tools,
                "label": {"valid_actions": [{"tool": name, "args": args, "reason":
                                             f"BFCL ground truth, turn {turn}, call {k + 1} of {len(calls)}"}],
                          "labelled_by": ["bfcl"]},
                "recorded": {"tool_calls": [{"name": name, "arguments": args}]},
                "world": {"classes": seed, "history": [dict(h) for h in history]},
                "expected_effects": [{"same_as_after": [{"name": name, "arguments": args}],
                                      "description": f"the world as after the ground truth's {name}"}],
            })
            content, _error = state.call(name, args)
            call_id = f"call_{turn}_{k}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
            history.append({"step": len(history), "name": name, "arguments": args})
        if calls:
            reply, why = "answer", f"turn {turn}'s ground-truth calls are all made: report the result"
        elif "miss_param" in category:
            reply, why = "ask", f"turn {turn}: BFCL's ground truth is [] (a needed value is missing: ask for it)"
        elif "miss_func" in category:
            reply, why = "refuse", (f"turn {turn}: BFCL's ground truth is [] (the needed function is not offered: "
                                    "say it cannot be done with these tools)")
        else:
            reply, why = "answer", f"turn {turn}: BFCL's ground truth is []"
        must = {"must": [NOT_AVAILABLE]} if not calls and "miss_func" in category else {}
        drafts.append({
            "id": f"{entry['id']}.t{turn}.stop", "turn": turn, "messages": list(messages), "tools": tools,
            "label": {"valid_actions": [{"tool": None, **_reply(reply), **must, "reason": why}],
                      "labelled_by": ["bfcl"]},
            "recorded": {"tool_calls": [], "text": TEXTS[reply]},
            "world": {"classes": seed, "history": [dict(h) for h in history]},
            "expected_effects": [{"same_as_after": [], "description": "the world unchanged"}],
        })
        messages.append({"role": "assistant", "content": TEXTS[reply]})
    drafts[0]["conversation"] = {"turns": turns}
    cases = []
    for step, draft in enumerate(drafts):
        turn = draft.pop("turn")
        cases.append({**draft, "placement": {"step": step, "run_length": len(drafts),
                                             "bucket": _bucket(step, len(drafts))},
                      "source": {"kind": "import", "dataset": f"bfcl/BFCL_v4_{category}.json",
                                 "trace_id": entry["id"], "position": turn, "note": f"turn {turn}"}})
    return cases


def import_multi_turn(source: Path, out: Path, category: str, limit: int | None = None,
                      on_reject: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Write the family of one multi-turn category into ``out/<category>/``.

    Args:
        source: the BFCL data folder (``../shared/datasets/bfcl``).
        out: where families go.
        category: a key of :data:`MULTI_TURN`.
        limit: import only the first ``limit`` conversations (rejected ones count).
        on_reject: called with one line (data file, entry id or line, field, problem) for each
            conversation rejected whole.

    Returns:
        ``{"conversations": n, "cases": n, "no_tool": n, "rejected": n, "conversations_left_out": n,
        "conversations_rejected": n}`` (``rejected``: cases not written; ``conversations_left_out``:
        first cases written without their ``conversation``, whose ground truth calls a function not
        offered at its turn; ``conversations_rejected``: entries that are not JSON, lack or mistype a
        key, name an unknown back-end class or have no readable ground truth, none of whose cases
        are written; all listed in ``rejected.json``, a rejected conversation under its ``field``).

    Raises:
        ValueError: an unknown category, an entry id that is not a case id or is given twice (before
            anything is written), or a possible-answer or function-document file that is not JSON
            lines (names the file and line).
        pytest_tooleffect.sandbox.SandboxError: BFCL's back-ends could not be downloaded.
    """
    from pytest_tooleffect.collect.cases import load_family, validate_case
    from pytest_tooleffect.formats import Case
    from pytest_tooleffect.sandbox.bfcl_source import activate
    from pytest_tooleffect.sandbox.local import load_service

    if category not in MULTI_TURN:
        raise ValueError(f"unknown BFCL multi-turn category {category!r} (known: {', '.join(MULTI_TURN)})")
    check_entry_ids(source / MULTI_TURN[category][0])
    check_entry_ids(source / MULTI_TURN[category][1], answers=True)  # an id answered twice: which is the truth?
    activate()
    world = load_service().load_world("bfcl")
    data_file, answer_file = MULTI_TURN[category]
    answers: dict[Any, Any] = {a.get("id"): a.get("ground_truth") for _, a in read_objects(source / answer_file)}
    docs = _docs(source)
    fam_dir = out / category
    fam_dir.mkdir(parents=True, exist_ok=True)
    name = category.replace("_", "-")
    (fam_dir / "family.yaml").write_text(FAMILY.format(category=category, name=name, out=fam_dir), encoding="utf-8")
    (fam_dir / "rules.yaml").write_text(RULES, encoding="utf-8")
    family = load_family(fam_dir)
    counts = {"conversations": 0, "cases": 0, "no_tool": 0, "rejected": 0, "conversations_left_out": 0,
              "conversations_rejected": 0}
    rejected: list[dict[str, Any]] = []

    def reject(where: str, field: str, problem: str) -> None:
        rejected.append({"id": where, "field": field, "problems": [problem]})
        counts["conversations_rejected"] += 1
        if on_reject is not None:
            on_reject(f"{source / data_file}: {where}: {field}: {problem} (conversation rejected)")

    with open(fam_dir / "cases.jsonl", "w", encoding="utf-8") as fh:
        for line in json_lines(source / data_file):
            if limit is not None and counts["conversations"] + counts["conversations_rejected"] >= limit:
                break
            n, entry, not_json = line
            if not_json is not None:
                reject(f"line {n}", "entry", not_json)
                continue
            eid: str = entry["id"] if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"line {n}"
            if eid not in answers:
                reject(eid, "ground_truth", f"no entry with this id in {source / answer_file}")
                continue
            try:
                cases = conversation_cases(entry, answers[eid], category, docs, world)
            except EntryError as exc:
                reject(eid, exc.field, exc.problem)
                continue
            counts["conversations"] += 1
            for case in cases:
                problems = validate_case(Case.model_validate(case), family)
                if problems and all(f.startswith("conversation") for f, _ in problems):
                    # a ground truth that calls a function not offered: the decision stays, the
                    # conversation (which no policy could meet) is listed and left out
                    rejected.append({"id": case["id"], "field": "conversation",
                                     "problems": [f"{f}: {m}" for f, m in problems]})
                    case.pop("conversation")
                    counts["conversations_left_out"] += 1
                    problems = validate_case(Case.model_validate(case), family)
                if problems:
                    rejected.append({"id": case["id"], "problems": [f"{f}: {m}" for f, m in problems]})
                    continue
                fh.write(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")
                counts["cases"] += 1
                counts["no_tool"] += case["label"]["valid_actions"][0]["tool"] is None
    counts["rejected"] = len(rejected) - counts["conversations_left_out"] - counts["conversations_rejected"]
    (fam_dir / "rejected.json").write_text(json.dumps(rejected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return counts
