"""The commands that read record logs: ``report`` (the report from one or more logs, shards
merged), ``html`` (the self-contained page), ``baseline save``, ``compare`` (two runs decision by
decision), and ``schema`` (the JSON Schemas of the files they read and write).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_tooleffect.util.display import shown

__all__ = ["cmd_baseline_save", "cmd_compare", "cmd_html", "cmd_report", "cmd_schema"]


def cmd_report(args: argparse.Namespace) -> int:
    """``tooleffect report``: the report from record logs (shards merged into one), as terminal
    tables or JSON.

    The report is assembled as a run's is (:func:`~pytest_tooleffect.report.assembly.assemble`), with
    the sections its inputs allow: the judge the records name, the shards merged, the baseline
    when ``--baseline`` gives one (every record is compared with it: the marks the records were read with,
    made against another baseline or edited, are replaced, and stderr says so in one line; without it the
    records' own marks stand for the run's comparison, and stderr names their baseline), and the gates
    when ``--gates`` names the TOML file that holds them
    (a ``pyproject.toml``, any file with a ``[tool.tooleffect.gates]`` table, or the folder of a
    ``pyproject.toml``).  With both, a sequential gate is judged again on the merged records
    (:mod:`~pytest_tooleffect.ci.sequential_merged`): its verdict makes the gate's result, and the items
    it skipped as settled are no gap.  Records of adaptive repeats (:mod:`~pytest_tooleffect.ci.adaptive_merged`)
    give each block's ``repeats`` as their run did, and the trials no case needed are no gap either.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when printed (under ``--gates``: the gates' status, 1 when a gate failed
        or a record is an error: a sequential gate's regression, not settled or not yet fails); 1 when
        the logs lack part of their run (a shard missing, or fewer records than a shard or the run
        selected, beyond the items a sequential gate or adaptive repeats skipped as settled: the report is
        ``incomplete`` and the lines on stderr name what is missing); 2 for logs that do not merge (not one run),
        a record whose class its case's label under ``--cases`` contradicts (the same label hash, another
        class), a baseline that cannot be read, gates that cannot be read, a record's adaptive repeats design
        that is out of range, or, without ``--baseline``, records whose own baseline marks are not one
        comparison (:func:`~pytest_tooleffect.ci.baseline_marks.own_marks`: marks of two baselines, or one that
        contradicts its record's verdict).
    """
    from pytest_tooleffect.collect.cases import FamilyError, load_family
    from pytest_tooleffect.collect.family import family_dirs
    from pytest_tooleffect.commands.merged_logs import against_cases, merge_or_refuse, say_merged, shard_section
    from pytest_tooleffect.report import dumps, render_terminal
    from pytest_tooleffect.report.assembly import ReportSection, assemble
    from pytest_tooleffect.report.reporter import JudgeContributor, judge_line

    meta = {}
    root = Path(args.cases)
    for directory in family_dirs([root]) if root.is_dir() else []:
        try:
            fam = load_family(directory)
        except FamilyError as exc:
            print(f"tooleffect report: skipping {exc}", file=sys.stderr)
            continue
        meta[fam.name] = fam.meta
    # a line that is not JSON or not a record, a repeated record, two label sets, two runs: named
    merged = merge_or_refuse("report", [Path(p) for p in args.records], args.duplicates)
    if merged is None:
        return 2
    records = merged.records
    if against_cases("report", root, records) is not None:  # a class its label's digest contradicts
        return 2
    calibration = getattr(args, "judge_calibration", None)
    sections: list[ReportSection] = [JudgeContributor.of_records(records, Path(calibration) if calibration else None)]
    baseline_path = getattr(args, "baseline", None)
    baseline = None
    if baseline_path:
        from pytest_tooleffect.ci.baseline import Baseline, BaselineError
        from pytest_tooleffect.ci.baseline_marks import replaced_line
        from pytest_tooleffect.ci.regressions import BaselineContributor

        try:
            baseline = BaselineContributor(Baseline.load(Path(baseline_path)), Path(baseline_path),
                                           getattr(args, "baseline_changed_labels", "skip"))
        except BaselineError as exc:
            print(f"tooleffect report: --baseline {exc}", file=sys.stderr)
            return 2
        decided = [{"id": rid, "family": d.family, "case_id": d.case_id, "class": d.label_class,
                    "label_hash": d.label_hash} for rid, d in baseline.baseline.decisions.items()]
        if against_cases("report", root, decided, "--baseline's decision") is not None:
            return 2
        # one source of truth: every regression figure and gate is this comparison, whatever marks the records had
        replaced = baseline.mark(records)
        if replaced:
            print(f"tooleffect report: {replaced_line(replaced, Path(baseline_path), baseline.baseline.digest)}",
                  file=sys.stderr)
        sections.append(baseline)
    else:  # the records' own marks: used only when they are one comparison (one baseline)
        from pytest_tooleffect.ci.baseline_marks import own_marks

        said = own_marks(records)
        if said is not None:
            print(f"tooleffect report: {said[1]}", file=sys.stderr)
            if said[0]:
                return said[0]
    gates = None
    gates_path = getattr(args, "gates", None)
    if gates_path:
        import pytest

        from pytest_tooleffect.ci.gate_rules import load_gates_file
        from pytest_tooleffect.ci.log_gates import LogGates
        from pytest_tooleffect.settings import PYPROJECT
        from pytest_tooleffect.util.input_files import not_an_input

        gates_file = Path(gates_path)
        gates_file = gates_file / PYPROJECT if gates_file.is_dir() else gates_file  # a folder: its pyproject.toml
        why = not_an_input(gates_file)
        if why is not None:
            print(f"tooleffect report: --gates {gates_file}: {why} (--gates names a pyproject.toml, another TOML "
                  "file holding [tool.tooleffect.gates], or the folder of a pyproject.toml)", file=sys.stderr)
            return 2
        try:
            config = load_gates_file(gates_file)
        except pytest.UsageError as exc:
            print(f"tooleffect report: --gates {exc}", file=sys.stderr)
            return 2
        if config is None:
            print(f"tooleffect report: --gates {gates_file}: no [tool.tooleffect.gates] table", file=sys.stderr)
            return 2
        gates = LogGates(config, _pyproject_policy_names(gates_file))
        sections.append(gates)
    from pytest_tooleffect.ci.adaptive_merged import merged_adaptive

    try:  # adaptive repeats: each block's repeats as the run made them; the trials no case needed are no gap
        adaptive = merged_adaptive(records)
    except ValueError as exc:
        print(f"tooleffect report: a record's adaptive repeats design: {exc}", file=sys.stderr)
        return 2
    settled = 0
    if adaptive is not None:
        sections.append(adaptive)
        settled = adaptive.settled_skips
        adaptive.explain(merged)
    if gates is not None and baseline is not None:  # the sequential gates, judged again on the merged records
        from pytest_tooleffect.ci.sequential_merged import judge_merged

        unrecorded = (None if merged.selection is None
                      else max(merged.selection.run_count - len(records) - settled, 0))
        sequential = judge_merged(records, gates.gates, baseline.baseline, baseline.path, unrecorded=unrecorded,
                                  whole=not merged.shards_missing,
                                  skipped_elsewhere=adaptive.skipped_ids if adaptive is not None else frozenset())
        if sequential is not None:
            sections.append(sequential)
            settled += sequential.settled_skips
            if sequential.settled_skips:  # the items the settled gates skipped are no gap: the merge is whole
                merged.short = []  # a shard that skipped every item it had wrote no record: not missing
                merged.shards_missing = []
    section = shard_section(merged, settled)
    if section is not None:
        sections.append(section)
    report = assemble(records, meta, sections, status=merged.status)
    incomplete = say_merged("report", merged, args.duplicates)
    status = max(gates.exit[0] if gates is not None else 0, incomplete)  # part of a run never passes for the whole
    if args.json:
        print(dumps(report))
        return status
    import shutil

    from pytest_tooleffect.report.terminal import report_layout

    print(render_terminal(report, **report_layout(sys.stdout, shutil.get_terminal_size().columns)))
    line = judge_line(report)
    if line is not None:
        print(line)
    if baseline is not None and report.baseline is not None:
        from pytest_tooleffect.ci.comparison import summary_lines

        print("\n".join(summary_lines(report.baseline.model_dump(mode="json", by_alias=True))))
    if report.sequential is not None and report.sequential.blocks:
        print("\n".join(report.sequential.lines()))
    if adaptive is not None and adaptive.lines:
        print("\n".join(["tooleffect adaptive repeats:", *adaptive.lines]))
    if gates is not None:
        for result in gates.results:
            print(result.line)
        print(f"tooleffect gates: {gates.exit[1]}")
    return status


def cmd_html(args: argparse.Namespace) -> int:
    """``tooleffect html``: one self-contained HTML page from a record log (the report and a browser
    of every decision) or from a JSON report (its tables only).  A log of adaptive repeats gives each
    block's ``repeats`` as its run did (:mod:`~pytest_tooleffect.ci.adaptive_merged`).

    The log is checked as ``tooleffect report`` checks it
    (:func:`~pytest_tooleffect.commands.merged_logs.merge_or_refuse`): records of two runs, of two
    policies under one name or a record twice (unless ``--duplicates`` keeps one) are refused in its
    words; a log that lacks part of its run gives a page whose status is
    ``incomplete``, and what is missing is said on stderr.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 1 when written from a log that lacks part of its run (a shard
        missing, items without a record, or records that do not say what their run selected: the page
        says ``incomplete``) or from a JSON report whose status is not ``complete``; 2 for a source that
        holds a record whose class its case's label under ``--cases`` contradicts, or a source that
        cannot be read or is neither a record log nor a report (a report of another version or with an
        invalid field: the file and the field named), logs that are not one run, records whose baseline
        marks are not one comparison (:func:`~pytest_tooleffect.ci.baseline_marks.own_marks`), a record's adaptive
        repeats design out of range, or an ``--out`` that cannot be
        written.

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: ``--out`` is not a regular file, is the
            source or a file of a family under ``--cases``, or cannot be written (nothing is read or written).
    """
    from pytest_tooleffect.collect.cases import FamilyError, load_family
    from pytest_tooleffect.collect.family import family_dirs
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.commands.merged_logs import against_cases, merge_or_refuse, say_merged, shard_section
    from pytest_tooleffect.report.assembly import ReportSection, assemble
    from pytest_tooleffect.report.html import load_states, write_html
    from pytest_tooleffect.report.record_log import load_records, not_a_record_log
    from pytest_tooleffect.report.report_file import ReportFileError, report_from_json
    from pytest_tooleffect.util.input_files import empty_pipe, read_input_bytes
    from pytest_tooleffect.util.jsonl import loads
    from pytest_tooleffect.util.own_outputs import HTML_PAGE
    from pytest_tooleffect.util.redaction import register_environment

    register_environment()  # the page embeds the cases' states: the credentials a run would know are cut, as in a run
    source, out = Path(args.source), Path(args.out)
    cases = Path(args.cases)
    check_command_outputs([("--out", out)], [("the record log or report", source)], cases=cases, force=args.force,
                          kinds={"--out": HTML_PAGE})
    try:
        raw = read_input_bytes(source)
    except OSError as exc:
        print(f"tooleffect html: {source}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        report_json = loads(raw)
    except (ValueError, RecursionError):
        report_json = None  # a record log has one object per line (its reader names a bad line)
    del raw
    if isinstance(report_json, dict) and "blocks" in report_json:  # a JSON report: its tables, no decision
        try:
            report = report_from_json(report_json, source)
        except ReportFileError as exc:
            print(shown(f"tooleffect html: {exc}", limit=None), file=sys.stderr)
            return 2
        try:
            write_html(out, report)
        except OSError as exc:
            print(f"tooleffect html: cannot write {out}: {exc}", file=sys.stderr)
            return 2
        part = report.status != "complete"  # a run that was cut short or lacked items: said, and never exit 0
        print(f"tooleffect html: {out} written from the report {source} (no records: no decision browser; "
              "give the record log for it)" + (f"; status {report.status}" if part else ""))
        return 1 if part else 0
    try:
        records = load_records(source)
    except (OSError, ValueError) as exc:  # another of tooleffect's files (a baseline): said so, as report says it
        what = not_a_record_log(source)
        said = f"{what}; tooleffect html draws a record log or a JSON report" if what else str(exc)
        print(shown(f"tooleffect html: {source}: {said}", limit=None), file=sys.stderr)
        return 2
    if not records:
        why = empty_pipe(source) or " (an empty log: did the run decide anything?)"
        print(f"tooleffect html: no record in {source}: nothing to draw{why}", file=sys.stderr)
        return 2
    merged = merge_or_refuse("html", [source], args.duplicates, read=lambda _: records)
    if merged is None:  # not one run: refused as report refuses it
        return 2
    records = merged.records
    if against_cases("html", cases, records) is not None:  # a class its label's digest contradicts
        return 2
    from pytest_tooleffect.ci.baseline_marks import own_marks

    marks = own_marks(records)  # the page lists regressions by the records' marks: one comparison, or refused
    if marks is not None and marks[0]:
        print(f"tooleffect html: {source}: {marks[1]}", file=sys.stderr)
        return marks[0]
    meta = {}
    for directory in family_dirs([cases]) if cases.is_dir() else []:
        try:
            fam = load_family(directory)
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
    from pytest_tooleffect.ci.adaptive_merged import merged_adaptive

    try:  # adaptive repeats: each block's repeats as the run made them; the trials no case needed are no gap
        adaptive = merged_adaptive(records)
    except ValueError as exc:
        print(f"tooleffect html: {source}: a record's adaptive repeats design: {exc}", file=sys.stderr)
        return 2
    sections: list[ReportSection] = []
    settled = 0
    if adaptive is not None:
        sections.append(adaptive)
        settled = adaptive.settled_skips
        adaptive.explain(merged)
    section = shard_section(merged, settled)
    if section is not None:
        sections.append(section)
    report = assemble(records, meta, sections, status=merged.status)
    try:
        write_html(out, report, rows, states)
    except OSError as exc:
        print(f"tooleffect html: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    status = say_merged("html", merged, args.duplicates)
    said = "; status incomplete: the run's missing part is named above" if status else ""
    print(f"tooleffect html: {out} written ({len(rows)} decisions{said})")
    return status


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


def cmd_baseline_save(args: argparse.Namespace) -> int:
    """``tooleffect baseline save``: a baseline file from an accepted run's record log.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 1 for a run that is not complete (without ``--allow-incomplete``); 2 for
        a log that cannot be read or holds no record, or a record whose class its case's label under ``--cases``
        contradicts (:mod:`pytest_tooleffect.report.case_labels`).

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: ``--out`` is not a regular file, is the
            record log or a file of the family in its folder, or cannot be written.
    """
    from pytest_tooleffect.ci.baseline import Baseline, BaselineError
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.commands.merged_logs import against_cases, run_lacks
    from pytest_tooleffect.report.record_log import not_a_record_log, read_records
    from pytest_tooleffect.util.output_files import write_text
    from pytest_tooleffect.util.own_outputs import BASELINE_WORDS

    path, out = Path(args.records), Path(args.out)
    check_command_outputs([("--out", out)], [("the record log", path)], force=args.force,
                          kinds={"--out": BASELINE_WORDS})
    try:
        records = read_records(path)
    except OSError as exc:
        print(f"tooleffect baseline save: {path}: cannot be read ({exc.strerror or exc})", file=sys.stderr)
        return 2
    except ValueError as exc:  # another of tooleffect's files: said so, with what to give instead
        what = not_a_record_log(path)
        print(f"tooleffect baseline save: {path}: {what or exc}", file=sys.stderr)
        return 2
    if not records:
        print(f"tooleffect baseline save: {path}: no records (was anything scored?)", file=sys.stderr)
        return 2
    try:
        baseline = Baseline.from_records(records, source=str(path))
    except BaselineError as exc:
        what = not_a_record_log(path)  # a report written on one line reads as one (wrong) record
        print(f"tooleffect baseline save: {f'{path}: {what}' if what else exc}", file=sys.stderr)
        return 2
    lacks = run_lacks("baseline save", path, records)  # as report checks the log: one run, and all of it
    if isinstance(lacks, int):
        return lacks
    if against_cases("baseline save", Path(args.cases), records) is not None:  # a class its label contradicts
        return 2
    if lacks and not args.allow_incomplete:
        print(f"tooleffect baseline save: {path}: the run is not complete: {'; '.join(lacks)}; the missing decisions "
              "would count as new against the baseline and never be compared. Save it anyway with "
              "--allow-incomplete (the baseline then says it is incomplete)", file=sys.stderr)
        return 1
    if lacks:
        baseline = baseline.model_copy(update={"incomplete": lacks})
    try:
        write_text(out, baseline.dumps())
    except OSError as exc:
        print(f"tooleffect baseline save: --out {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    d = list(baseline.decisions.values())
    passed = sum(1 for x in d if x.passed)
    errors = sum(1 for x in d if x.outcome == "error")
    print(f"tooleffect baseline: {len(d)} decisions ({passed} passed, {len(d) - passed - errors} failed; {errors} "
          f"errors, kept as errors and never compared) of {len(baseline.groups)} family x policy written to {out}")
    for g in baseline.groups:
        print(shown(f"  {g.family}/{g.policy}: {g.decisions} decisions, label set {g.label_set_fingerprint}"))
    for line in lacks:
        print(shown(f"  incomplete (--allow-incomplete): {line}; such decisions count as new against it"))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``tooleffect compare``: two runs decision by decision (flips, rates before and after, exact
    McNemar), as text or JSON.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when B regressed nowhere; 1 when it did (a decision that passed in A and is an
        error in B is a regression unless ``--errors skip``) or a decision that failed in A fails in B
        with another kind (``changed``); 2 for bad input (unreadable runs, a record log whose records are
        not one run, refused as ``tooleffect report`` refuses it, label sets that differ without
        ``--shared-only``, no paired decision).
    """
    from pytest_tooleffect.ci.baseline import BaselineError, load_runs, policy_changes
    from pytest_tooleffect.ci.comparison import (
        compare,
        fingerprint_mismatch_line,
        fingerprint_mismatches,
        mismatch_line,
        render_comparison,
        repeats_line,
    )
    from pytest_tooleffect.commands.merged_logs import log_run

    for path in (Path(args.a), Path(args.b)):  # a record log: one run, checked as tooleffect report checks it
        checked = log_run("compare", path, unstamped=False)  # part of a run compares: a short run is said below
        if isinstance(checked, int):
            return checked
    try:
        a, b = load_runs(Path(args.a)), load_runs(Path(args.b))
    except BaselineError as exc:
        print(f"tooleffect compare: {exc}", file=sys.stderr)
        return 2
    mismatches = fingerprint_mismatches(a, b)
    comparison = compare(a, b, "skip", getattr(args, "errors", "regression"))
    if mismatches and not args.shared_only:
        repeats = {(r["family"], r["policy"]): r for r in comparison["repeats_mismatches"]}
        for family, policy, _fa, _fb in mismatches:  # one side's trials name their number: nothing pairs
            r = repeats.get((family, policy))
            line = (f"repeats differ: {repeats_line(r, 'A', 'B')}" if r
                    else fingerprint_mismatch_line(a, b, family, policy))
            print(f"tooleffect compare: {line}", file=sys.stderr)
        return 2
    if not comparison["totals"]["compared"] and not comparison["totals"].get("errors_after_pass"):
        print(f"tooleffect compare: {args.a} and {args.b} pair no decision (decisions pair by record id: family, "
              "case, policy and trial)", file=sys.stderr)
        for m in comparison["policy_mismatches"]:
            print(f"tooleffect compare: policy names differ: {mismatch_line(m, 'A', 'B')}", file=sys.stderr)
        for r in comparison["repeats_mismatches"]:
            print(f"tooleffect compare: repeats differ: {repeats_line(r, 'A', 'B')}", file=sys.stderr)
        return 2
    left = comparison["totals"]["left_out"]
    comparison["restricted"] = {
        "shared_only": bool(args.shared_only), "blocks": [f"{f}/{p}" for f, p, _, _ in mismatches],
        "left_out": sum(left.values()) + comparison["totals"]["new"],
        "by_reason": {**left, "only_in_b": comparison["totals"]["new"]}}
    # as diff does: 0 when B regressed nowhere, 1 when it did or a known failure changed kind (a CI
    # step fails on it, as pytest fails such a decision against a baseline), 2 for bad input
    status = 1 if comparison["totals"]["regressions"] or comparison["totals"]["changed"] else 0
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, **comparison}, indent=2))
        return status
    print(f"A = {args.a}\nB = {args.b}")
    for line in policy_changes(a, {g.policy: g.policy_identity for g in b.groups}):
        print(line)
    if mismatches:
        r = comparison["restricted"]
        reasons = ", ".join(f"{'only in B' if k == 'only_in_b' else k.replace('_', ' ')} {v}"
                            for k, v in r["by_reason"].items() if v)
        print(shown(f"restricted to the shared decisions with unchanged labels (--shared-only; label sets differ "
                    f"in {', '.join(r['blocks'])}): {r['left_out']} decisions left out ({reasons})", limit=None))
    print(render_comparison(comparison), end="")
    errored = comparison["totals"].get("errors_after_pass", 0)
    why = f" ({errored} of them errors in B where A passed; --errors skip leaves errors out)" if errored else ""
    changed = comparison["totals"]["changed"]
    also = f", {changed} known failures of another kind now (changed)" if changed else ""
    print(f"tooleffect compare: exit {status}: {comparison['totals']['regressions']} regressions{why}{also}")
    return status


def cmd_schema(args: argparse.Namespace) -> int:
    """``tooleffect schema``: print the JSON Schema of a case or family file, a record or a report.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0.
    """
    if args.what == "record":
        from pytest_tooleffect.scoring.record import record_schema

        schema = record_schema()
    elif args.what == "report":
        from pytest_tooleffect.report import report_schema

        schema = report_schema()
    else:
        from pytest_tooleffect.formats import Case, Family

        schema = Case.model_json_schema() if args.what == "case" else Family.model_json_schema()
    print(json.dumps(schema, indent=2))
    return 0


def _pyproject_policy_names(path: Path) -> list[str]:
    """The names of the ``[tool.tooleffect.policies]`` tables of the TOML file ``--gates`` names (the
    policies the run that wrote the logs could have run): a gate table on one the logs do not hold is
    NOT APPLICABLE, as in the run.  ``[]`` when it has none.
    """
    from pytest_tooleffect.settings import read_config_file

    doc = read_config_file(path)
    table: object = doc
    for part in ("tool", "tooleffect", "policies"):
        table = table.get(part) if isinstance(table, dict) else None
    return [str(name) for name in table] if isinstance(table, dict) else []
