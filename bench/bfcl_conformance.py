"""Hold the oracle against BFCL's own AST checker on the same entries: agreement and speed.

Runs in a separate environment that has bfcl-eval installed **without its dependencies**
(``make bfcl-conformance`` builds ``.venv-bfcl``). BFCL's ``ast_checker`` imports
``bfcl_eval.constants.model_config``, which imports every provider SDK; this script puts a small
stand-in for that one module into ``sys.modules`` before importing the checker. The stand-in
answers ``MODEL_CONFIG_MAPPING[name].underscore_to_dot`` with ``False`` (function names keep
their dots), the only thing the checker reads from it.

For every AST-scored entry (simple, multiple, parallel, parallel_multiple and their live
variants) it generates model outputs systematically: the first acceptable value of every
parameter, then perturbations (another function, a required parameter missing, an extra
parameter, a wrong type, an int where a float is declared, string case and spacing variants, an
optional parameter omitted or set to its default, parallel calls reordered, a call missing, a
call added, arguments as a JSON string instead of an object). Each output is scored by BFCL's
checker and by the oracle; the agreement matrix is printed per perturbation, and every
disagreement is either matched to a documented deliberate difference (docs/importers/bfcl.md, "How we differ
from BFCL") or printed as unexplained. Then both are timed on the same outputs, and the ratio of
decisions per second is printed (oracle / BFCL; target >= 1.0): BFCL's checker on the decoded
calls against the oracle's scoring of the parsed turn, each entry a case decided many times
(its label compiled before its first decision, as the plugin does when a run decides a case
more than once).  The lines below it count in what the headline leaves out, each on its own:
parsing the provider message (BFCL's decoding step, which is not timed on its side); both
starting from the message as OpenAI sends it (BFCL decoding it as its OpenAI function-calling
handler does); compiling the labels; and a case decided once (not compiled: the comparator
judges).  CPU time of this process, the checkers taking turns on chunks of outputs, the median
of the rounds.

Run: ``make bfcl-conformance`` (or ``.venv-bfcl/bin/python bench/bfcl_conformance.py``).
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import statistics
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from results import emit  # bench/results.py: this folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(REPO))


def _stub_model_config() -> None:
    """Stand-in for bfcl_eval.constants.model_config (which imports every provider SDK)."""

    class _Config:
        underscore_to_dot = False

    class _Mapping(dict):  # type: ignore[type-arg]
        def __missing__(self, key: str) -> _Config:
            return _Config()

    module = types.ModuleType("bfcl_eval.constants.model_config")
    module.MODEL_CONFIG_MAPPING = _Mapping()  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = module


_stub_model_config()
from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402

from pytest_tooleffect.collect.cases import LoadedFamily, validate_case  # noqa: E402
from pytest_tooleffect.data.importers.bfcl import CATEGORIES, bfcl_tool, label_from_ground_truth, omit_required_empty  # noqa: E402
from pytest_tooleffect.formats import Case, Family, Label, ToolSpec  # noqa: E402
from pytest_tooleffect.oracle import RuleSet, compile_label, parse_emission, score  # noqa: E402

AST_CATEGORIES = [c for c, (_, answer) in CATEGORIES.items() if answer is not None]
RULES_DOC = {"defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}}}
RULES = RuleSet.from_mapping(RULES_DOC)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def first_value(alternatives: list[Any]) -> tuple[bool, Any]:
    """(present, value): the first acceptable value; ``""`` first means the parameter may be omitted."""
    if not isinstance(alternatives, list):
        return True, alternatives
    for a in alternatives:
        if a == "":
            continue
        return True, _first_nested(a)
    return False, None


def _first_nested(a: Any) -> Any:
    if isinstance(a, dict):
        return {k: v for k, (present, v) in ((k, first_value(vs)) for k, vs in a.items()) if present}
    if isinstance(a, list):
        return [_first_nested(x) if isinstance(x, dict) else x for x in a]
    return a


def first_output(ground_truth: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for call in ground_truth:
        ((name, params),) = call.items()
        args = {}
        for p, alts in params.items():
            present, value = first_value(alts)
            if present:
                args[p] = value
        out.append({name: args})
    return out


def _spec(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next((f for f in functions if f["name"] == name), {})


def perturbations(entry: dict[str, Any], gt: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Named model outputs for one entry (each a list of {function: {param: value}})."""
    functions = entry["function"]
    base = first_output(gt)
    outs: dict[str, list[dict[str, Any]]] = {"first": base, "args_json_string": base}
    name0, args0 = next(iter(base[0].items()))
    spec0 = _spec(functions, name0).get("parameters", {})
    props0 = spec0.get("properties", {})
    required0 = spec0.get("required", [])
    others = [f["name"] for f in functions if f["name"] != name0]
    outs["other_function"] = [{others[0] if others else "not_offered_fn": args0}, *base[1:]]
    if required0 and required0[0] in args0:
        outs["required_missing"] = [{name0: {k: v for k, v in args0.items() if k != required0[0]}}, *base[1:]]
    outs["extra_param"] = [{name0: {**args0, "zz_extra": 1}}, *base[1:]]
    for p, v in args0.items():
        wrong = 12345 if isinstance(v, str) else "not-a-number" if isinstance(v, (int, float)) and not isinstance(
            v, bool) else None
        if wrong is not None:
            outs["wrong_type"] = [{name0: {**args0, p: wrong}}, *base[1:]]
            break
    for p, v in args0.items():
        if props0.get(p, {}).get("type") == "float" and isinstance(v, float) and v.is_integer():
            outs["int_for_float"] = [{name0: {**args0, p: int(v)}}, *base[1:]]
            break
    for p, v in args0.items():
        if isinstance(v, str) and v.strip() and v.upper() != v:
            outs["string_case"] = [{name0: {**args0, p: v.upper()}}, *base[1:]]
            outs["string_spacing"] = [{name0: {**args0, p: f"  {v} "}}, *base[1:]]
            break
    call0 = next(iter(gt[0].values()))
    for p, alts in call0.items():
        if "" in alts and p in args0 and p not in required0:
            outs["optional_omitted"] = [{name0: {k: v for k, v in args0.items() if k != p}}, *base[1:]]
            break
    for p, spec in props0.items():
        if p not in required0 and "default" in spec and spec["default"] is not None and p in call0:
            outs["optional_at_default"] = [{name0: {**args0, p: spec["default"]}}, *base[1:]]
            break
    if len(base) > 1:
        outs["calls_reordered"] = list(reversed(base))
        outs["call_missing"] = base[:-1]
    outs["call_added"] = [*base, copy.deepcopy(base[0])]
    return outs


def bfcl_valid(entry: dict[str, Any], output: list[dict[str, Any]], gt: list[dict[str, Any]], category: str) -> bool:
    result = ast_checker(entry["function"], output, gt, Language.PYTHON, category, "stub_model")
    return bool(result["valid"])


def emitted(output: list[dict[str, Any]], as_string: bool) -> dict[str, Any]:
    calls = []
    for call in output:
        ((name, args),) = call.items()
        calls.append({"name": name, "arguments": json.dumps(args) if as_string else args})
    return {"tool_calls": calls}


def wire_message(output: list[dict[str, Any]]) -> dict[str, Any]:
    """``output`` as OpenAI's chat completion returns it: an assistant message, arguments as JSON text."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, call in enumerate(output) for name, args in call.items()]}


def bfcl_decode(message: dict[str, Any]) -> list[dict[str, Any]]:
    """BFCL's decoding of an OpenAI function-calling reply, restated from bfcl-eval (its
    ``OpenAICompletionsHandler._parse_query_response_FC`` then ``decode_ast``; the module imports
    the OpenAI SDK, which this environment leaves out): ``[{name: arguments text}]``, then each
    argument text through ``json.loads``.
    """
    responses = [{call["function"]["name"]: call["function"]["arguments"]} for call in message["tool_calls"]]
    decoded = []
    for invoked in responses:
        name = list(invoked.keys())[0]
        decoded.append({name: json.loads(invoked[name])})
    return decoded


def explain(category: str, pert: str, bfcl_ok: bool, ours_ok: bool, entry: dict[str, Any], gt: Any,
            output: Any, rejected: bool) -> str | None:
    """Match a disagreement to a deliberate difference (docs/importers/bfcl.md, "How we differ from BFCL")."""
    if rejected:
        return "ground truth breaks the function's own schema (rejected on import)"
    if pert == "calls_reordered" and ours_ok and not bfcl_ok:
        return "parallel calls matched by optimal assignment, not first fit"
    if pert == "optional_at_default" and ours_ok and not bfcl_ok:
        return "explicit default equals omitted"
    if pert == "int_for_float" and ours_ok and not bfcl_ok:
        return "numbers compare by value at every level"
    if pert in ("string_case", "string_spacing") and bfcl_ok and not ours_ok:
        (name, args), = output[0].items()
        spec = _spec(entry["function"], name).get("parameters", {}).get("properties", {})
        changed = [p for p, v in args.items() if isinstance(v, str) and (v != v.strip() or v.isupper())]
        if any("enum" in spec.get(p, {}) for p in changed):
            return "enum values compare exactly"
        return "strings keep punctuation and inner spaces"
    if pert == "call_added" and not ours_ok and bfcl_ok:
        return "a duplicated call is not the parallel group"
    return None


@contextmanager
def _no_collector() -> Iterator[None]:
    """No garbage-collector passes while the checkers are timed (``timeit``'s default).

    A pass is paid by whichever checker happens to allocate when the threshold is crossed, and
    its length depends on everything the process holds, so it would add noise to both sides.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


CHUNK = 500  # outputs per turn of each checker: both see the same machine load


def load_cases(work: list[tuple[Any, ...]]) -> tuple[list[tuple[Any, ...]], float, int]:
    """Each entry as a case the run decides many times: fresh label and tool specs, compiled.

    The plugin compiles a case's label (:func:`compile_label`) before the first decision on a
    case the run decides more than once (several policies, or repeats); an entry's outputs
    stand for those decisions.  Returns the prepared decisions ``(message, label, specs,
    offered names)`` in ``work``'s order, the CPU seconds spent compiling (timed apart, once
    per case), and the number of cases.
    """
    rules = RULES
    cases: dict[int, tuple[Label, list[ToolSpec]]] = {}
    compile_s = 0.0
    prepared = []
    gc.disable()  # as the plugin loads cases (no collector passes while the models are made)
    for _, _, _, pert, output, label, specs in work:
        key = id(label)
        if key not in cases:
            lab, sp = label.model_copy(deep=True), [t.model_copy(deep=True) for t in specs]
            t0 = time.process_time()
            compile_label(lab, sp, rules)
            compile_s += time.process_time() - t0
            cases[key] = (lab, sp)
        lab, sp = cases[key]
        prepared.append((emitted(output, pert == "args_json_string"), lab, sp, [t.name for t in sp],
                         wire_message(output)))
    gc.enable()
    return prepared, compile_s, len(cases)


def time_all(work: list[tuple[Any, ...]], prepared: list[tuple[Any, ...]]) -> tuple[float, ...]:
    """CPU seconds, on every output, of: BFCL's checker; the oracle's parsing; its scoring; its
    scoring of a case decided once; BFCL decoding OpenAI's message and checking it; the oracle
    parsing that message and scoring it.

    BFCL's checker receives the calls decoded already (``[{name: {param: value}}]``); the
    oracle's counterpart is :func:`score` on the parsed turn (kind, matched action, per-field
    results), with the labels of ``prepared`` (compiled).  Parsing the provider message into
    that turn is timed apart: it is the decoding step of BFCL's pipeline.  Scoring once: every
    output with its own fresh label and tool specs, as a case the run decides once (not
    compiled: the comparator judges, and the tool's schema is read for the fresh specs).  From
    the message: both start from the reply as OpenAI sends it (arguments as JSON text), BFCL
    decoding it as its OpenAI function-calling handler does (:func:`bfcl_decode`).  All take
    turns on chunks of :data:`CHUNK` outputs, so a change in the machine's load during the run
    falls on all alike; CPU time of this process (``time.process_time``) leaves out time the
    process waits for the CPU.
    """
    rules = RULES
    totals = [0.0] * 6
    clock = time.process_time
    for start in range(0, len(work), CHUNK):
        chunk = prepared[start:start + CHUNK]
        entries = work[start:start + CHUNK]
        once = [(lab.model_copy(deep=True), [t.model_copy(deep=True) for t in sp]) for _, lab, sp, _, _ in chunk]
        with _no_collector():
            t0 = clock()
            for category, entry, gt, _pert, output, _, _ in entries:
                try:
                    bfcl_valid(entry, output, gt, category)
                except Exception:  # noqa: S110
                    pass
            t1 = clock()
            parsed = [(parse_emission(message, offered=names), lab, sp) for message, lab, sp, names, _ in chunk]
            t2 = clock()
            for turn, lab, sp in parsed:
                score(turn, lab, sp, rules)
            t3 = clock()
            for (turn, _, _), (lab, sp) in zip(parsed, once):
                score(turn, lab, sp, rules)
            t4 = clock()
            for (category, entry, gt, _, _, _, _), (_, _, _, _, wire) in zip(entries, chunk):
                try:
                    bfcl_valid(entry, bfcl_decode(wire), gt, category)
                except Exception:  # noqa: S110
                    pass
            t5 = clock()
            for _, lab, sp, names, wire in chunk:
                score(parse_emission(wire, offered=names), lab, sp, rules)
            t6 = clock()
        for k, (a, b) in enumerate(zip((t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6))):
            totals[k] += b - a
    return tuple(totals)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--categories", nargs="*", default=AST_CATEGORIES)
    ap.add_argument("--show", type=int, default=15, help="unexplained disagreements to print")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds per checker (the median is reported)")
    args = ap.parse_args()
    src = SHARED / "datasets" / "bfcl"
    work = []  # (category, entry, gt, perturbation, output, label, tools)
    rejected_ids: set[str] = set()
    family = LoadedFamily("bfcl", REPO, Family(name="bfcl"), (), None, RULES)
    for category in args.categories:
        data_file, answer_file = CATEGORIES[category]
        answers = {a["id"]: a["ground_truth"] for a in _jsonl(src / answer_file)}  # type: ignore[operator]
        for entry in _jsonl(src / data_file):
            gt = answers[entry["id"]]
            tools = [bfcl_tool(f) for f in entry["function"]]
            label_doc = label_from_ground_truth(gt)
            omit_required_empty(label_doc, tools)
            label = Label.model_validate(label_doc)
            specs = [ToolSpec.model_validate(t) for t in tools]
            case = Case.model_validate({"id": "x", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                                        "messages": entry["question"][0], "tools": tools, "label": label_doc,
                                        "source": "import"})
            if validate_case(case, family):
                rejected_ids.add(entry["id"])
            for pert, output in perturbations(entry, gt).items():
                work.append((category, entry, gt, pert, output, label, specs))
    matrix: dict[str, Counter[str]] = defaultdict(Counter)
    explained: Counter[str] = Counter()
    unexplained = []
    bfcl_results, our_results = [], []
    for category, entry, gt, pert, output, label, specs in work:
        try:
            b = bfcl_valid(entry, output, gt, category)
        except Exception:  # BFCL's checker raises on some outputs: count as invalid
            b = False
        o = score(emitted(output, pert == "args_json_string"), label, specs, RULES).passed
        bfcl_results.append(b)
        our_results.append(o)
        cell = ("both pass" if b and o else "both fail" if not b and not o
                else "BFCL pass, oracle fail" if b else "BFCL fail, oracle pass")
        matrix[pert][cell] += 1
        if b != o:
            why = explain(category, pert, b, o, entry, gt, output, entry["id"] in rejected_ids)
            if why:
                explained[why] += 1
            else:
                unexplained.append((category, entry["id"], pert, b, o, output))
    cells = ["both pass", "both fail", "BFCL pass, oracle fail", "BFCL fail, oracle pass"]
    print(f"{len(work)} outputs over {len({(w[0], w[1]['id']) for w in work})} BFCL entries "
          f"({', '.join(args.categories)})")
    print(f"{'perturbation':<22}" + "".join(f"{c:>24}" for c in cells))
    for pert in sorted(matrix):
        print(f"{pert:<22}" + "".join(f"{matrix[pert][c]:>24}" for c in cells))
    total = Counter()
    for row in matrix.values():
        total.update(row)
    print(f"{'all':<22}" + "".join(f"{total[c]:>24}" for c in cells))
    agree = total["both pass"] + total["both fail"]
    print(f"agreement: {agree}/{len(work)} = {100 * agree / len(work):.2f} %")
    print("explained disagreements (deliberate differences):")
    for why, n in explained.most_common():
        print(f"  {n:6d}  {why}")
    print(f"unexplained disagreements: {len(unexplained)}")
    for _category, eid, pert, b, o, output in unexplained[: args.show]:
        print(f"  {eid} [{pert}] BFCL {'pass' if b else 'fail'}, oracle {'pass' if o else 'fail'}: "
              f"{json.dumps(output)[:300]}")
    # speed: the same outputs, the checkers taking turns; the median of the rounds is reported
    n = len(work)
    # warm-up on other copies, compiled and not: imports (SciPy on the first optimal pairing)
    # and process-wide caches only
    warm, _, _ = load_cases(work)
    for message, lab, sp, names, _ in warm:
        turn = parse_emission(message, offered=names)
        score(turn, lab, sp, RULES)
        score(turn, lab.model_copy(deep=True), [t.model_copy(deep=True) for t in sp], RULES)
    del warm
    rounds, compiles = [], []
    for _ in range(args.rounds):  # each round on freshly loaded cases
        prepared, compile_s, n_cases = load_cases(work)
        rounds.append(time_all(work, prepared))
        compiles.append(compile_s)
        del prepared
    b, p, o, once, b_wire, o_wire = (statistics.median(r[k] for r in rounds) for k in range(6))
    ratios = [r[0] / r[2] for r in rounds]
    compile_s = statistics.median(compiles)
    per_case = compile_s / n_cases
    print(f"speed (CPU time, median of {args.rounds} rounds): BFCL checker {n / b:,.0f} decisions/s "
          f"({1e6 * b / n:.1f} µs each), oracle {n / o:,.0f} decisions/s ({1e6 * o / n:.1f} µs each), "
          f"ratio oracle/BFCL {statistics.median(ratios):.2f} (rounds {min(ratios):.2f}–{max(ratios):.2f}; "
          "target >= 1.0)")
    print(f"  parsing the provider message first (BFCL's decoding step, not timed on its side): "
          f"{1e6 * p / n:.1f} µs each; counted in: ratio {statistics.median(r[0] / (r[1] + r[2]) for r in rounds):.2f}")
    print(f"  from the provider's message (as OpenAI sends it, arguments as JSON text), BFCL decoding it as "
          f"its OpenAI handler does: BFCL {1e6 * b_wire / n:.1f} µs, oracle {1e6 * o_wire / n:.1f} µs each, "
          f"ratio {statistics.median(r[4] / r[5] for r in rounds):.2f}")
    print(f"  compiling each label before its case's first decision: {1e6 * per_case:.0f} µs per case "
          f"({n_cases} cases); with parsing, counted in over each case's {n / n_cases:.1f} outputs: "
          f"ratio {b / (p + o + compile_s):.2f}")
    print(f"  a case decided once (its label not compiled: the comparator judges): {1e6 * once / n:.1f} µs "
          f"each, ratio {statistics.median(r[0] / r[3] for r in rounds):.2f}; with parsing: "
          f"{statistics.median(r[0] / (r[1] + r[3]) for r in rounds):.2f}")
    emit("BFCL AST conformance: unexplained disagreements", f"bfcl-eval's checker, {len(work)} outputs",
         len(unexplained), "== 0", f"agreement {agree}/{len(work)}")
    emit("oracle decisions/s, compiled labels", "bfcl-eval's AST checker (CPU time)", statistics.median(ratios),
         ">= 1.0", f"BFCL {1e6 * b / n:.1f} µs, oracle {1e6 * o / n:.1f} µs per decision")
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
