"""The ``tooleffect`` command: schemas, importers, labeller agreement, reports from records."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _quota(text: str) -> dict[str, int]:
    try:
        pairs = [p.split("=", 1) for p in text.split(",") if p]
        return {k.strip(): int(v) for k, v in pairs}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"quota is BUCKET=N,BUCKET=N (got {text!r})") from exc


def _cmd_schema(args: argparse.Namespace) -> int:
    from .models import Case, Family

    schema = Case.model_json_schema() if args.what == "case" else Family.model_json_schema()
    print(json.dumps(schema, indent=2))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    if args.source != "tau-airline":
        print(f"tooleffect import: unknown source {args.source!r}", file=sys.stderr)
        return 2
    from .importers.tau_airline import build_family

    shared = Path(args.shared)
    if not args.trajectories and not (shared / "datasets").is_dir():
        print(f"tooleffect import: {shared.resolve()}/datasets not found; run from the repository root "
              "(../shared beside it) or pass --shared DIR", file=sys.stderr)
        return 2
    counts = build_family(
        Path(args.trajectories or shared / "datasets/tau-bench/historical_trajectories/gpt-4o-airline.json"),
        Path(args.tools or shared / "datasets/tau-bench/airline_tools.json"),
        Path(args.out), args.quota, args.seed,
    )
    print(json.dumps(counts))
    return 0


def _read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}: line {n}: not valid JSON: {exc.msg}") from exc
        if "id" not in d:
            raise SystemExit(f"{path}: line {n}: field 'id' is missing")
        out[d["id"]] = d.get("label", d)
    return out


def _cmd_agree(args: argparse.Namespace) -> int:
    from .labelling import agreement

    res = agreement(_read_jsonl(Path(args.a)), _read_jsonl(Path(args.b)))
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
    from .records import read_records
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
    try:
        records = read_records(Path(args.records))
    except (OSError, ValueError) as exc:
        print(f"tooleffect report: {args.records}: {exc}", file=sys.stderr)
        return 2
    report = summarise(records, meta)
    print(dumps(report) if args.json else render_terminal(report))
    return 0


def _turn_key(messages: Sequence[Any]) -> str:
    """What identifies a state on the wire: roles, texts and called tool names (no system prompt)."""
    rows = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") == "system":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        names = [str((tc.get("function") or {}).get("name")) for tc in m.get("tool_calls") or []]
        rows.append([m.get("role"), content or "", names])
    return json.dumps(rows, sort_keys=True)


def replay_index(cases_dir: Path) -> dict[str, Any]:
    """Map the wire form of every recorded state under ``cases_dir`` to its recorded turn."""
    from .cases import CASE_SUFFIXES, FAMILY_FILE, FamilyError, load_case_file, load_family
    from .model_turn import build_request
    from .models import Policy
    from .scripted import Reply

    index: dict[str, Any] = {}
    for fam_file in sorted(cases_dir.rglob(FAMILY_FILE)):
        try:
            fam = load_family(fam_file.parent)
        except FamilyError as exc:
            print(f"tooleffect serve: skipping {exc}", file=sys.stderr)
            continue
        for path in sorted(fam_file.parent.iterdir()):
            if path.suffix not in CASE_SUFFIXES or path.name == FAMILY_FILE or path.resolve() in fam.referenced_files:
                continue
            cases, _ = load_case_file(path, fam)
            for case in cases:
                if case.recorded is None:
                    continue
                tools = list(case.tools) if case.tools is not None else list(fam.tools)
                request, names = build_request(case, tools, fam.system_prompt, Policy(name="serve", model="x"))
                calls = []
                for c in case.recorded.tool_calls:
                    args = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
                    calls.append((names.out(c.name) if isinstance(c.name, str) else "", args))
                index[_turn_key(request["messages"])] = Reply(tool_calls=calls, text=case.recorded.text)
    return index


def _cmd_serve(args: argparse.Namespace) -> int:
    import time

    from .scripted import Reply, ScriptedServer

    index: dict[str, Reply] = replay_index(Path(args.cases))
    missing = Reply(status=404)

    def script(body: dict[str, Any]) -> Reply:
        return index.get(_turn_key(body.get("messages") or []), missing)

    with ScriptedServer(script, port=args.port) as srv:
        print(f"tooleffect serve: {len(index)} recorded states at {srv.base_url} (OpenAI chat format); "
              "Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tooleffect`` command line."""
    parser = argparse.ArgumentParser(prog="tooleffect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("schema", help="print the JSON Schema of a case or family file")
    p.add_argument("what", nargs="?", choices=["case", "family"], default="case")
    p.set_defaults(func=_cmd_schema)
    p = sub.add_parser("import", help="build a case family from a public dataset")
    p.add_argument("source", choices=["tau-airline"])
    p.add_argument("--shared", default="../shared", help="folder holding datasets/ (default ../shared)")
    p.add_argument("--trajectories", help="tau-bench trajectories JSON (default: from --shared)")
    p.add_argument("--tools", help="airline tool schemas JSON (default: from --shared)")
    p.add_argument("--out", default="cases/tau-airline")
    p.add_argument("--quota", type=_quota, default=None, help="BUCKET=N,... (default first=60,middle=90,last=60)")
    p.add_argument("--seed", type=int, default=20241122)
    p.set_defaults(func=_cmd_import)
    p = sub.add_parser("agree", help="agreement of two labellers' JSONL label files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", action="store_true")
    p.add_argument("--show", type=int, default=20, help="disagreements to list")
    p.set_defaults(func=_cmd_agree)
    p = sub.add_parser("report", help="render the report from a record log")
    p.add_argument("records")
    p.add_argument("--cases", default="cases", help="folder of the families (for quota and population)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_report)
    p = sub.add_parser("serve", help="serve the recorded decisions of the cases as a local OpenAI-compatible model")
    p.add_argument("--cases", default="cases")
    p.add_argument("--port", type=int, default=8011)
    p.set_defaults(func=_cmd_serve)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
