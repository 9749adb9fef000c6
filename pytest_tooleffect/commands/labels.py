"""The labelling commands: ``sample`` (decision points from traces into a case file), ``label``
(export states for labelling, import the labels), ``merge`` and ``agree`` (several labellers' label
files), ``calibrate-judge`` (an LLM judge against human verdicts) and ``generate`` (an authored
family); the case-file helpers they share are in :mod:`.case_lines`, ``label import`` in :mod:`.label_import`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_tooleffect.commands.case_lines import not_files, read_case_lines
from pytest_tooleffect.util.display import shown

__all__ = ["MAX_COUNT", "cmd_agree", "cmd_calibrate", "cmd_generate", "cmd_label", "cmd_merge", "cmd_sample"]

#: the largest count a command accepts (buckets, quota per bucket): beyond it is a typo, not a plan
MAX_COUNT = 100_000


def cmd_sample(args: argparse.Namespace) -> int:
    """``tooleffect sample``: draw decision points from traces, stratified by position bucket, into
    a family folder (its case file and ``family.yaml``).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 1 when written with cases whose conversation the run refuses
        (a tool result for no call, a call with no result: each named on stderr with the trace file, the
        run, the case and the field); 2 for a count out of range, a labelled case file or a family
        ``sample`` did not write (hand-authored, another command's) without ``--force``, or traces
        that cannot be read (the reason on stderr).
    """
    import yaml

    from pytest_tooleffect.collect.family import is_family_dir
    from pytest_tooleffect.collect.traces import TraceError
    from pytest_tooleffect.commands import check_command_outputs, check_output_folder
    from pytest_tooleffect.data.sampling import SAMPLE, sample_cases
    from pytest_tooleffect.util.input_files import read_input_text
    from pytest_tooleffect.util.own_outputs import CASE_FILE, FAMILY_FILES

    out = Path(args.out)
    counts = {"--buckets": args.buckets, "--per-bucket": args.per_bucket, **{f"--quota {k}": v
                                                                             for k, v in (args.quota or {}).items()}}
    bad = [f"{k} {v}" for k, v in counts.items() if v is not None and not 1 <= v <= MAX_COUNT]
    if bad:
        print(f"tooleffect sample: {', '.join(bad)}: counts are whole numbers from 1 to {MAX_COUNT}", file=sys.stderr)
        return 2
    check_output_folder("--out", out, "sample writes the family's case file and family.yaml into it")
    # sample adds its case file to the family in --out and updates its family file (keys kept): those
    # two are its own when sample wrote the family (a family it did not write, hand-authored or
    # another command's, is rewritten under --force only); a case file that holds labels is replaced
    # under --force only (below)
    check_command_outputs([("--out", out / "family.yaml"), ("--out/--name", out / args.name)],
                          [*(("a trace file", Path(t)) for t in args.traces),
                           ("the tools file (--tools)", Path(args.tools) if args.tools else None)], families=False,
                          force=args.force, own=[out / "family.yaml", out / args.name],
                          kinds={"--out": FAMILY_FILES, "--out/--name": CASE_FILE},
                          family=("--out", out, SAMPLE) if is_family_dir(out) else None)
    labelled = _labelled_cases(out / args.name)
    if labelled and not args.force:
        print(f"tooleffect sample: {out / args.name} holds {labelled} labelled cases; sampling again would replace "
              "them. Choose another --out or --name, or pass --force (the old file is kept as a .bak copy)",
              file=sys.stderr)
        return 2
    quota = args.quota or ({f"q{i + 1}": args.per_bucket for i in range(args.buckets)} if args.buckets
                           else {"first": 20, "middle": 20, "last": 20})
    try:
        cases, sample, hints = sample_cases(args.traces, quota, args.format, args.buckets, args.seed)
    except (TraceError, OSError) as exc:
        print(f"tooleffect sample: {exc}", file=sys.stderr)
        return 2
    if not cases:
        found = sum(sample.population.values())
        why = (f"the traces hold {found} decision points, none in the quota's buckets ({', '.join(quota)})" if found
               else "the traces hold no decision point (an assistant turn after a user or tool message)")
        print(f"tooleffect sample: {', '.join(args.traces)}: 0 cases drawn: {why}; nothing written. Traces are OpenAI "
              "chat runs (JSONL, or a JSON array of runs), tau-bench trajectories or OpenTelemetry spans "
              "(see --format)", file=sys.stderr)
        return 2
    flagged = _flag_unusable(cases)
    out.mkdir(parents=True, exist_ok=True)
    fam_path = out / "family.yaml"
    family: dict[str, Any] = {}
    if fam_path.is_file():
        family = yaml.safe_load(read_input_text(fam_path)) or {}
    family.setdefault("name", out.name)
    if hints["system_prompt"] and "system_prompt" not in family and "system_prompt_file" not in family:
        family["system_prompt"] = hints["system_prompt"]
    if args.tools:
        family["tools_file"] = str(Path(args.tools).resolve())
    elif hints["tools"] and "tools" not in family and "tools_file" not in family:
        family["tools"] = hints["tools"]
    if hints["per_case_tools"]:
        print("tooleffect sample: the runs offered different tools: each case carries its run's tools",
              file=sys.stderr)
    family["seed"] = args.seed
    family["quota"] = dict(sample.quota)
    # a bucket with states but no case drawn has no rate: its states cannot be in the population the
    # report's post-stratified estimate covers (collection refuses such a family), so it is left out
    drawn = {b: n for b, n in sample.population.items() if sample.items.get(b)}
    undrawn = {b: n for b, n in sample.population.items() if b not in drawn}
    if undrawn:
        print(f"tooleffect sample: no case drawn from {', '.join(f'{b} ({n} states)' for b, n in undrawn.items())} "
              f"(not in the quota): left out of population, so the report's production estimate covers the "
              f"{sum(drawn.values())} states of the other buckets only", file=sys.stderr)
    family["population"] = drawn
    backup = None
    if labelled:
        import datetime
        import shutil

        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        backup = out / f"{args.name}.{stamp}.bak"
        shutil.copy2(out / args.name, backup)
        print(f"tooleffect sample: {labelled} labelled cases of {out / args.name} kept in {backup}", file=sys.stderr)
    fam_path.write_text(f"# Written by `{SAMPLE}` from traces; running it again rewrites this file.\n"
                        + yaml.safe_dump(family, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with open(out / args.name, "w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
    drawn = {b: len(v) for b, v in sample.items.items()}
    print(json.dumps({"cases": len(cases), "drawn": drawn, "quota": sample.quota, "population": sample.population,
                      "out": str(out / args.name)}))
    return 1 if flagged else 0


def _flag_unusable(cases: Sequence[Mapping[str, Any]]) -> int:
    """Say on stderr, one line each, what makes a drawn case's conversation one the run refuses (a
    tool result for no call, a call with no result: :func:`~pytest_tooleffect.collect.validation.history_problems`),
    naming the trace file, the run, the case and the field.

    Returns:
        How many cases were named.
    """
    from pytest_tooleffect.collect.validation import history_problems

    flagged = 0
    for c in cases:
        problems = history_problems(c["messages"])
        source = c.get("source") or {}
        for field, message in problems:
            print(shown(f"tooleffect sample: {source.get('dataset')}: run {source.get('trace_id')}: case {c['id']}: "
                        f"{field}: {message}; written, but the run will find this case invalid until its trace is "
                        "fixed", limit=None), file=sys.stderr)
        flagged += bool(problems)
    return flagged


def _same_labeller(paths: Sequence[str]) -> str | None:
    """``"A and B are one labeller's labels: …"`` when two of ``paths`` are one file (by another path or
    a link too): merged or compared with itself, a labeller agrees with itself on every state, which says
    nothing of agreement.  ``None`` otherwise (two labellers' files may hold the same labels: a copy
    cannot be told from full agreement).
    """
    for i, first in enumerate(paths):
        for second in paths[i + 1:]:
            a, b = Path(first), Path(second)
            if not (a.is_file() and b.is_file()):  # a pipe is read once, by the command itself
                continue
            if os.path.samefile(a, b):
                return (f"{first} and {second} are one labeller's labels (the same file): a labeller "
                        "agrees with itself on every state; give each labeller's own file")
    return None


def _named_labellers(label: Mapping[str, Any]) -> frozenset[str]:
    by = label.get("labelled_by")
    return frozenset([by] if isinstance(by, str) else [str(b) for b in by] if isinstance(by, list) else [])


def _one_labeller_named(paths: Sequence[str], files: Sequence[Mapping[str, Mapping[str, Any]]]) -> str | None:
    """``"A and B are one labeller's labels: …"`` when two label files name the same labellers, and
    only them, on every label they hold (``labelled_by``: a labeller's file and a copy of it under
    another name): compared or merged, that labeller agrees with itself.  ``None`` otherwise (a file
    whose labels name nobody cannot be told apart).
    """
    named = []
    for labels in files:
        sets = {_named_labellers(lab) for lab in labels.values() if lab.get("valid_actions")}
        named.append(next(iter(sets)) if len(sets) == 1 and frozenset() not in sets else None)
    for i, first in enumerate(named):
        for j in range(i + 1, len(named)):
            if first is not None and first == named[j]:
                who = ", ".join(sorted(first))
                return (f"{paths[i]} and {paths[j]} are one labeller's labels (every label of both is labelled_by "
                        f"{who}): a labeller agrees with itself on every state; give each labeller's own file")
    return None


def _labelled_cases(path: Path) -> int:
    """How many cases of an existing case file carry a label (JSONL or YAML; 0 when absent).

    A file that cannot be read as cases counts as labelled (1): it is not replaced unasked.
    """
    if not path.is_file():
        return 0
    import yaml

    from pytest_tooleffect.util.input_files import read_input_text
    from pytest_tooleffect.util.jsonl import json_lines

    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(read_input_text(path, "utf-8-sig")) or []
            items = data if isinstance(data, list) else [data]
        else:
            items = []
            for _, value, why in json_lines(path):
                if why is not None:
                    return 1
                items.append(value)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return 1
    return sum(1 for c in items if isinstance(c, dict) and c.get("label"))


def cmd_label(args: argparse.Namespace) -> int:
    """``tooleffect label export|import|agreement``: write the states of case files for labelling,
    copy the filled labels into a case file, or print a reply set's agreement
    (:func:`pytest_tooleffect.commands.reply_set.cmd_reply_agreement`).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when done; 1 when some labels are invalid (each named on stderr; when every
        label given is invalid nothing is written); 2 for a missing option or labelling file, a ``.yaml``
        output (import writes JSON Lines), or an ``--out`` that is an existing file tooleffect did not
        write, without ``--force``.

    Raises:
        ValueError: a case line that is not a case (names the file and the line or case).
        OSError: a file that cannot be read or written.
    """
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.commands.reply_set import cmd_reply_agreement
    from pytest_tooleffect.data.labelling import render
    from pytest_tooleffect.util.own_outputs import LABELS

    if args.action == "agreement":
        return cmd_reply_agreement(args)
    if args.action == "export":
        if not args.out:
            print("tooleffect label export: --out is required (the labelling file to write)", file=sys.stderr)
            return 2
        check_command_outputs([("--out", Path(args.out))], [("a case file", Path(p)) for p in args.files],
                              force=args.force, kinds={"--out": LABELS})
        rows = []
        for path in args.files:
            for c in read_case_lines(Path(path), ("id", "placement", "messages")):
                try:
                    state = render(c["id"], c["placement"], c["messages"])
                except (AttributeError, KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}: case {c['id']}: placement or messages not as a case has them "
                                     f"({type(exc).__name__}: {exc})") from None
                rows.append(json.dumps({"id": c["id"], "state": state, "valid_actions": [], "forbidden_actions": [],
                                        "labelled_by": args.labeller}, ensure_ascii=False))
        from pytest_tooleffect.util.output_files import write_text  # aside, then renamed: never half an export

        write_text(Path(args.out), "".join(r + "\n" for r in rows))
        print(f"tooleffect label export: {len(rows)} states to {args.out}; fill valid_actions (tool: null allowed) "
              "and forbidden_actions, keep labelled_by")
        return 0
    from pytest_tooleffect.commands.label_import import import_labels

    return import_labels(args)


def cmd_merge(args: argparse.Namespace) -> int:
    """``tooleffect merge``: the final labels of several labellers (adjudicated labels win) and the
    list of states that need adjudication, beside ``--out``.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 1 when a label holds a key a label does not know (each named on
        stderr: file, line, case id, key and the known key it likely misspells; the state is listed for
        adjudication, never merged from the other labels); 2 for a missing or unreadable label file, or
        two files of one labeller (one file twice, or two whose every label names the same labellers).
    """
    from pytest_tooleffect.data.labelling import merge, read_labels

    unreadable = not_files([*args.labels, *([args.adjudicated] if args.adjudicated else [])])
    if unreadable:
        print(f"tooleffect merge: {'; '.join(unreadable)}", file=sys.stderr)
        return 2
    twice = _same_labeller(args.labels)
    if twice is not None:
        print(f"tooleffect merge: {twice}", file=sys.stderr)
        return 2
    invalid: dict[str, list[str]] = {}  # labels holding a key a label does not know: to adjudicate, never merged
    try:
        labellers = [read_labels(Path(p), invalid) for p in args.labels]
        adjudicated = read_labels(Path(args.adjudicated), invalid) if args.adjudicated else {}
    except ValueError as exc:
        print(f"tooleffect merge: {exc}", file=sys.stderr)
        return 2
    same = _one_labeller_named(args.labels, labellers)
    if same is not None:
        print(shown(f"tooleffect merge: {same}", limit=None), file=sys.stderr)
        return 2
    _say_invalid("merge", invalid, "the state needs adjudication")
    empty = [p for p, lab in zip(args.labels, labellers) if not lab]
    if empty:  # its labeller would count as agreeing with every other
        print(f"tooleffect merge: {', '.join(empty)}: holds no label", file=sys.stderr)
        return 2
    final, pending = merge(labellers, adjudicated, disputed=invalid)
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.util.own_outputs import LABELS

    out = Path(args.out)
    adjudicated_path = Path(args.adjudicated) if args.adjudicated else None
    check_command_outputs([("--out", out), ("the adjudication list", out.with_suffix(".adjudicate.jsonl") if pending
                                            else None)],
                          [*(("a label file", Path(p)) for p in args.labels),
                           ("the adjudicated labels (--adjudicated)", adjudicated_path)], force=args.force,
                          kinds={"--out": LABELS, "the adjudication list": LABELS})
    with open(args.out, "w", encoding="utf-8") as fh:
        for i, lab in sorted(final.items()):
            fh.write(json.dumps({"id": i, **lab}, ensure_ascii=False, sort_keys=True) + "\n")
    alone = sum(1 for i in final if i not in adjudicated and sum(1 for lab in labellers if i in lab) < 2)
    print(f"tooleffect merge: {len(final)} final labels to {args.out}; {len(pending)} need adjudication"
          + (f"; {alone} of the final labels come from one labeller only (no agreement to check)"
             if alone and len(labellers) > 1 else ""))
    if pending:
        path = Path(args.out).with_suffix(".adjudicate.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            for i in pending:
                fh.write(json.dumps({"id": i, "labels": [lab.get(i) for lab in labellers]}, ensure_ascii=False) + "\n")
        print(shown(f"  listed in {path}: " + ", ".join(pending[:20]) + (" …" if len(pending) > 20 else "")))
    return 1 if invalid else 0


def _say_invalid(command: str, invalid: Mapping[str, Sequence[str]], then: str) -> None:
    """Say on stderr each label holding a key a label does not know (``tooleffect COMMAND: FILE: line N:
    case ID: FIELD: unknown key (did you mean …?); THEN``), one line each.
    """
    for lines in invalid.values():
        for line in lines:
            print(shown(f"tooleffect {command}: {line}; {then}", limit=None), file=sys.stderr)


def cmd_agree(args: argparse.Namespace) -> int:
    """``tooleffect agree``: the agreement of two labellers' label files on their shared
    labelled states (exact sets, Krippendorff's alpha, per class, the disagreements).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when printed; 1 when printed without the states whose label holds a key a label
        does not know (each named on stderr: file, line, case id, key and the known key it likely
        misspells); 2 for a missing or malformed label file, no shared labelled state, or two files of one
        labeller (one file twice, or two whose every label names the same labellers).
    """
    from pytest_tooleffect.data.labelling import agreement, read_labels

    unreadable = not_files([args.a, args.b])
    if unreadable:
        print(f"tooleffect agree: {'; '.join(unreadable)}", file=sys.stderr)
        return 2
    twice = _same_labeller([args.a, args.b])
    if twice is not None:
        print(f"tooleffect agree: {twice}", file=sys.stderr)
        return 2
    invalid: dict[str, list[str]] = {}  # labels holding a key a label does not know: left out, named
    try:
        a, b = read_labels(Path(args.a), invalid), read_labels(Path(args.b), invalid)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"tooleffect agree: {exc}", file=sys.stderr)
        return 2
    same = _one_labeller_named([args.a, args.b], [a, b])
    if same is not None:
        print(shown(f"tooleffect agree: {same}", limit=None), file=sys.stderr)
        return 2
    _say_invalid("agree", invalid, "the state is left out")
    a = {cid: lab for cid, lab in a.items() if cid not in invalid}
    b = {cid: lab for cid, lab in b.items() if cid not in invalid}
    for path, labels in ((args.a, a), (args.b, b)):
        for cid, lab in labels.items():
            acts = lab.get("valid_actions") if isinstance(lab, dict) else None
            if not isinstance(acts, list) or not all(isinstance(x, dict) for x in acts):
                print(f"tooleffect agree: {path}: case {cid}: valid_actions must be a list of actions", file=sys.stderr)
                return 2
    if not set(a) & set(b):
        print(f"tooleffect agree: {args.a} and {args.b} share no case ids", file=sys.stderr)
        return 2
    # a state with no valid action is not labelled yet (label export writes valid_actions: []):
    # agreeing on nothing is no agreement, so such states are left out and counted
    unlabelled = {p: sorted(cid for cid in set(a) & set(b) if not labels[cid]["valid_actions"])
                  for p, labels in ((args.a, a), (args.b, b))}
    left_out = set(unlabelled[args.a]) | set(unlabelled[args.b])
    a = {cid: lab for cid, lab in a.items() if cid not in left_out}
    b = {cid: lab for cid, lab in b.items() if cid not in left_out}
    for path, ids in unlabelled.items():
        if ids:
            print(f"tooleffect agree: {path}: {len(ids)} shared states have no valid action (not labelled yet), "
                  f"left out: {', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}", file=sys.stderr)
    if not set(a) & set(b):
        print(f"tooleffect agree: {args.a} and {args.b} share no labelled state", file=sys.stderr)
        return 2
    res = agreement(a, b)
    if args.json:
        print(json.dumps(res, indent=2))
        return 1 if invalid else 0

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f} %"

    print(f"states compared: {res['n']}")
    print(f"exact-set agreement: names {pct(res['exact_name'])}, actions with arguments {pct(res['exact_action'])}")
    print(f"Krippendorff's alpha (MASI distance, NLTK): names {res['alpha_masi_name']:.3f}, "
          f"actions {res['alpha_masi_action']:.3f}")
    print(f"class agreement: {pct(res['class_agreement'])}")
    for cls, row in sorted(res["per_class"].items()):
        print(f"  class {cls} (by A): n={row['n']}, exact names {pct(row['exact_name'])}")
    kinds: dict[str, int] = {}
    for d in res["disagreements"]:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    print(f"disagreements: {len(res['disagreements'])} ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})")
    for d in res["disagreements"][: args.show]:
        print(shown(f"  {d['id']} [{d['kind']}]  A={d['a']}  B={d['b']}"))
    return 1 if invalid else 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``tooleffect calibrate-judge``: Cohen's kappa of an LLM judge against hand-labelled pairs,
    written as JSON to ``--out``.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written (``kappa`` null when every pair fell in one category for both:
        there is no kappa); 2 for a malformed or empty pairs file or a judge that fails.
    """
    import datetime

    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.data.labelling import read_labels
    from pytest_tooleffect.scoring.judge import Judge, JudgeError, calibrate
    from pytest_tooleffect.util.own_outputs import JUDGE_CALIBRATION

    check_command_outputs([("--out", Path(args.out))], [("the pairs file", Path(args.pairs))], force=args.force,
                          kinds={"--out": JUDGE_CALIBRATION})
    try:
        pairs = list(read_labels(Path(args.pairs)).values())
    except ValueError as exc:
        print(f"tooleffect calibrate-judge: {exc}", file=sys.stderr)
        return 2
    if not pairs:
        print(f"tooleffect calibrate-judge: {args.pairs}: holds no pair: nothing to calibrate the judge on",
              file=sys.stderr)
        return 2
    bad = [p["id"] for p in pairs if p.get("human") not in ("pass", "fail") or "expected" not in p or "got" not in p]
    if bad:
        print(f"tooleffect calibrate-judge: {args.pairs}: pairs {bad[:5]} need expected, got and human: pass|fail",
              file=sys.stderr)
        return 2
    judge = Judge(args.judge_model, args.api_base, Path(args.cache) if args.cache else None)
    try:
        result = calibrate(judge, pairs)
    except JudgeError as exc:
        print(f"tooleffect calibrate-judge: {exc}", file=sys.stderr)
        return 2
    import math

    if result["kappa"] is None or math.isnan(result["kappa"]):  # every pair in one row and one column: no kappa
        result["kappa"], result["kappa_ci95"] = None, None
    result["measured_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    result["pairs_file"] = args.pairs
    result["usage"] = judge.usage.to_dict()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    if result["kappa"] is None:
        kappa = "no Cohen's kappa (every pair fell in one category for both: chance alone predicts the agreement)"
    else:
        lo, hi = result["kappa_ci95"]
        kappa = f"Cohen's kappa {result['kappa']:.3f} (95 % CI {lo:.3f} to {hi:.3f})"
    print(f"judge {result['model']} on {result['n']} pairs: agreement {100 * result['agreement']:.1f} %, "
          f"{kappa}; written to {out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """``tooleffect generate``: an authored family from a spec (notes x placements).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 2 for a spec that does not validate (each error on stderr) or is
        refused, or an --out folder holding files generate did not write, without ``--force``.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.commands import check_command_outputs, check_output_folder
    from pytest_tooleffect.data.authored import GENERATE, generate
    from pytest_tooleffect.util.own_outputs import FAMILY_FILES

    out = Path(args.out)
    check_output_folder("--out", out, "generate writes the family's case file and family.yaml into it")
    check_command_outputs([("--out", out / "family.yaml"), ("--out", out / "cases.jsonl")],
                          [("the spec", Path(args.spec))], families=False, force=args.force,
                          family=("--out", out, GENERATE), kinds={"--out": FAMILY_FILES})

    try:
        counts = generate(Path(args.spec), out)
    except ValidationError as exc:
        from pytest_tooleffect.data.authored import AuthoredSpec
        from pytest_tooleffect.util.known_keys import extra_key_message

        for e in exc.errors():
            loc = ".".join(str(x) for x in e["loc"]) or "<spec>"
            print(shown(f"{args.spec}: {loc}: {extra_key_message(AuthoredSpec, e)}", limit=None), file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"tooleffect generate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(counts))
    return 0
