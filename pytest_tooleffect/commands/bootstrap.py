"""``tooleffect baseline init``: the first baseline of a repository, from a run made for it.

Before any baseline exists a run under gates cannot judge ``max_regressions`` (nor
``max_changed``) and exits 1, so CI cannot be made green by running it.  ``baseline init`` runs
the cases once (``python -m pytest`` with the arguments given after ``--``, the record log
written where ``--records`` says and no baseline read, whatever the ini's ``tooleffect_baseline``
names), saves the baseline from that run's record log as ``tooleffect baseline save`` does, and
prints what to commit and the command line CI then runs.  ``--from LOG`` takes the record log of
a run already made instead.

It refuses to replace a baseline (``--force`` says to), a run that did not complete (interrupted,
a usage or internal error, nothing collected, nothing scored, no test session made as with
``--help``, a session cut short by ``-x``/``--maxfail``) and a log of no record.  The log read is
always the one the run wrote: an earlier log is moved aside for the run and put back when the run
wrote none; a run that
scored decisions but left some out (skipped, invalid, errors) gives a baseline all the same and
names what it lacks, since those decisions count as ``new`` (or ``not_compared``) against it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_tooleffect.util.display import shown

__all__ = ["cmd_baseline_init"]

#: pytest's exit statuses after which the run's record log is the run's: all passed, some failed
_RUN_DONE = (0, 1)


def _say(line: str) -> None:
    print(f"tooleffect baseline init: {line}", file=sys.stderr)


def cmd_baseline_init(args: argparse.Namespace) -> int:
    """``tooleffect baseline init``: run the cases (or take ``--from LOG``) and write the first baseline.

    Args:
        args: the parsed command line: ``out``, ``records``, ``from_log``, ``force`` and
            ``pytest_args`` (what follows ``--``, given to ``python -m pytest``).

    Returns:
        The exit status: 0 when the baseline is written; 1 when the run did not give one (it did
        not complete, or scored nothing); 2 for a usage error (``--out`` exists without ``--force``,
        a ``--tooleffect-baseline`` among the pytest arguments, a log that cannot be read).

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: ``--out`` or ``--records`` is not a
            file that may be written (the command line prints it, exit 2).
    """
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.options import INI_BASELINE, OPT_BASELINE, OPT_RECORDS
    from pytest_tooleffect.util.own_outputs import BASELINE_WORDS, RECORD_LOG

    out = Path(args.out)
    pytest_args = [a for a in args.pytest_args if a != "--"] if args.pytest_args[:1] == ["--"] else args.pytest_args
    if any(a == OPT_BASELINE or a.startswith(f"{OPT_BASELINE}=") for a in pytest_args):
        _say(f"{OPT_BASELINE} among the pytest arguments: the first baseline is made from a run without one "
             "(leave it out here; CI gives it)")
        return 2
    if args.from_log:
        log = Path(args.from_log)
        if pytest_args:
            _say(f"--from {log} takes a run already made: no pytest arguments with it")
            return 2
        check_command_outputs([("--out", out)], [("the record log", log)], force=args.force,
                              kinds={"--out": BASELINE_WORDS})
    else:
        log = Path(args.records)
        check_command_outputs([("--out", out), ("--records", log)], force=args.force,
                              kinds={"--out": BASELINE_WORDS, "--records": RECORD_LOG})
    if out.exists() and not args.force:
        _say(f"--out {out} exists: a baseline was accepted already. Make a new one on purpose with tooleffect "
             f"baseline save LOG --out {out}, or give --force to replace it")
        return 2
    if not args.from_log:
        command = [sys.executable, "-m", "pytest", *pytest_args, f"{OPT_RECORDS}={log}", "-o", f"{INI_BASELINE}=",
                   "-p", "pytest_tooleffect.commands.run_watch"]
        print(f"tooleffect baseline init: running {shlex.join(['pytest', *pytest_args])} (no baseline; record log "
              f"{log})", flush=True)
        refused = _run(command, log)
        if refused is not None:
            _say(refused)
            return 1
    return _write(log, out, pytest_args, given=bool(args.from_log))


def _run(command: list[str], log: Path) -> str | None:
    """Run ``command`` with ``log`` moved aside, so that the log read afterwards is the one this run
    wrote; put the earlier log back when the run wrote none.

    Returns:
        ``None`` when the run completed and wrote ``log``; else the one line saying why no baseline
        is written (pytest's status, no session made, the session cut short, no record written).
    """
    from pytest_tooleffect.commands.run_watch import WATCH_ENV

    aside = log.with_name(f".{log.name}.before-init-{os.getpid()}")
    earlier = log.is_file()
    if earlier:
        os.replace(log, aside)
    wrote = False
    try:
        with tempfile.TemporaryDirectory(prefix="tooleffect-init-") as tmp:
            watch = Path(tmp) / "session.json"
            status = subprocess.run(command, check=False, env={**os.environ, WATCH_ENV: str(watch)}).returncode
            wrote = log.is_file() and log.stat().st_size > 0
            finished = json.loads(watch.read_text(encoding="utf-8")) if watch.is_file() else None
    finally:
        if earlier and not wrote:
            os.replace(aside, log)
        elif earlier:
            aside.unlink(missing_ok=True)
    if status not in _RUN_DONE:
        what = ("nothing was scored or collected" if status == 5 else "interrupted" if status == 2
                else "a usage error" if status == 4 else "an internal error" if status == 3 else "it failed")
        return f"the run ended with pytest's status {status} ({what}): no baseline written"
    if finished is None:
        return ("the run made no test session (pytest printed its help or version?) and recorded nothing: no "
                "baseline written" + (f" (the earlier {log} is left as it was)" if earlier else ""))
    if finished.get("stopped"):
        # a run cut short leaves the items after the stop out of the baseline; they would count as
        # new in CI and never gate as regressions, so a first baseline from it is refused
        return (f"the run was cut short ({finished['stopped']}): the items after the stop have no record, so the "
                "baseline would not hold them; run the cases without -x/--maxfail/--stepwise, or save a partial "
                "baseline on purpose with tooleffect baseline save LOG --allow-incomplete")
    if not wrote:
        return (f"the run wrote no record to {log}: no baseline written"
                + (" (the earlier log is left as it was)" if earlier else ""))
    return None


def _write(log: Path, out: Path, pytest_args: list[str], given: bool) -> int:
    """Save the baseline of ``log`` to ``out`` and say what it holds, lacks, and what to do next
    (``given``: the log was named with ``--from``, so a log that cannot be used is bad input, 2).
    """
    from pytest_tooleffect.ci.baseline import Baseline, BaselineError
    from pytest_tooleffect.options import OPT_BASELINE
    from pytest_tooleffect.report.merging import MergeError, merge_logs
    from pytest_tooleffect.report.record_log import not_a_record_log
    from pytest_tooleffect.util.output_files import write_text

    try:
        merged = merge_logs([log])
    except MergeError as exc:
        what = not_a_record_log(log) if log.is_file() else None
        _say(f"{log}: {what}" if what else f"{exc}: no baseline written")
        return 2 if given else 1
    try:
        baseline = Baseline.from_records([r.to_json() for r in merged.records], source=str(log))
    except BaselineError as exc:
        _say(f"{log}: {exc}")
        return 2
    decisions = list(baseline.decisions.values())
    errors = sum(1 for d in decisions if d.outcome == "error")
    passed = sum(1 for d in decisions if d.passed)
    if errors == len(decisions):
        _say(f"{log}: every record is an error: nothing to accept, no baseline written")
        return 1
    write_text(out, baseline.dumps())
    print(f"tooleffect baseline init: {len(decisions)} decisions ({passed} passed, {len(decisions) - passed - errors} "
          f"failed, {errors} errors) of {len(baseline.groups)} family x policy written to {out}")
    for g in baseline.groups:
        print(shown(f"  {g.family}/{g.policy}: {g.decisions} decisions, label set {g.label_set_fingerprint}"))
    for line in merged.problems():
        print(shown(f"  not in the baseline: {line}; such decisions count as new against it"))
    if errors:
        print(f"  {errors} decisions are errors: kept as errors and never compared until a baseline is saved from a "
              "run where they are decided")
    ci = shlex.join(["pytest", *pytest_args, OPT_BASELINE, str(out)])
    print(f"commit it: git add {shlex.quote(str(out))} && git commit -m 'tooleffect: the accepted baseline'")
    print(f"then CI runs against it, under the same policy: {ci}")
    return 0
