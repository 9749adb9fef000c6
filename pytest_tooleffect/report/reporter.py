"""The controller's side of a run: records in as they arrive, the record log, the report out.

The stage after scoring on the path of one case (``docs/design.md``, "Architecture").  Records ride on
test reports (from this process or, under xdist, from the workers), so only the controller
writes files.  The report is assembled by :func:`pytest_tooleffect.report.assembly.assemble` from the
records and the families' metadata that came with them (no family file is read again for it), its
sections written by the plugin's own parts (the judge's by :class:`JudgeContributor`), then passed
through the users' ``pytest_tooleffect_modifyreport``, written as JSON, HTML and Markdown, and
printed.  The HTML page (``--tooleffect-html``) also shows each decision's state (conversation,
tools, label), which records do not carry: it reads the cases back from the run's family folders, once, at the end.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.collect.family import CASE_SUFFIXES, family_dirs, is_family_dir
from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT, OPT_ROLLOUT, OPT_SUMMARY_MD
from pytest_tooleffect.report.record_log import RecordLog
from pytest_tooleffect.report.runinfo import git_state, now_utc, versions
from pytest_tooleffect.report.store import RecordStore
from pytest_tooleffect.settings import Settings, settings_key
from pytest_tooleffect.util.input_files import read_input_text
from pytest_tooleffect.util.jsonl import loads
from pytest_tooleffect.util.output_files import OutputProblems, output_problems_key, shown_path, write_text
from pytest_tooleffect.util.redaction import redact_obj

if TYPE_CHECKING:
    from pytest_tooleffect.report.assembly import ReportSection
    from pytest_tooleffect.report.model import Report
    from pytest_tooleffect.scoring.record import Record

__all__ = ["CaseNodes", "JudgeContributor", "Reporter", "RunTally", "judge_line", "rate_line"]


class Reporter:
    """Controller-only: collects records from reports, writes the record log as they arrive,
    and every output at the end: the JSON report, the HTML page and the Markdown summary.

    The report is made by :func:`~pytest_tooleffect.report.assembly.assemble` with the plugin's
    own sections, then passed to the users' ``pytest_tooleffect_modifyreport`` (as its JSON
    object) and read back.

    Args:
        config: pytest's config.
        sections: the plugin's parts that write the report's further sections (judge, shard,
            baseline, gates), in any order: they are written in
            :data:`~pytest_tooleffect.report.assembly.SECTION_ORDER`.
        tally: the run's failures by what they are, counted here (the gates read it too).
    """

    def __init__(self, config: pytest.Config, sections: Sequence[ReportSection] = (),
                 tally: RunTally | None = None) -> None:
        self.config = config
        self.settings = config.stash[settings_key]
        self.sections = list(sections)
        self.tally = tally if tally is not None else RunTally()
        #: the run's records: their JSON objects as they came, a :class:`Record` made of one when read
        self.records = RecordStore()
        self.invalid: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []
        args = (Path(config.invocation_params.dir) / a.split("::")[0] for a in config.args)
        self.items = CaseNodes([Path(config.rootpath), Path(config.invocation_params.dir),
                                *(a if a.is_dir() else a.parent for a in args)])
        self.families: dict[str, dict[str, Any]] = {}
        self.family_dirs: dict[str, str] = {}
        self.policies: dict[str, dict[str, Any]] = {}
        self.started_at = now_utc()
        self.log: RecordLog | None = None
        self.report: Report | None = None
        self.report_written = False
        self.html_written = False
        self.summary_written = False
        self.kept_previous_log = False
        self.problems = config.stash[output_problems_key] = OutputProblems()

    def pytest_report_header(self) -> str:
        settings = self.settings
        live = [*([settings.model] if settings.model else []), *(p.name for p in settings.agents), *settings.policies]
        policies = ", ".join(live) if settings.live else "replay (offline)"
        if settings.policies_by_default:
            policies += " (default_policies in pyproject.toml)"
        return f"tooleffect: policies {policies}; records {settings.records or 'off'}"

    def _open_log(self) -> RecordLog | None:
        assert self.settings.records is not None
        try:
            return RecordLog(self.settings.records)
        except OSError as exc:
            self.problems.add(f"tooleffect: {OPT_RECORDS} {self.settings.records}: cannot be written "
                              f"({exc.strerror or exc}); no record was kept")
            self.settings = _without_records(self.settings)
            return None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        option = session.config.option
        if not (option.collectonly or option.setuponly or option.setupplan):  # no item is run, none is missing
            self.items.collected(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.items.collected(ids)  # every worker collects the same items; a replaced worker again

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.tally.collection_errors += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        sent = getattr(report, wire.REPORT_RECORD, None)
        # the record's JSON text parsed once, when the log or the tally of a failure needs it
        record = json.loads(sent) if isinstance(sent, str) and (report.failed or self.settings.records is not None) \
            else None
        self.tally.add(report, record.get("outcome") if isinstance(record, dict) else None)
        self.items.reported(report)
        family = getattr(report, wire.REPORT_FAMILY, None)
        if family is not None:
            self.families.setdefault(family["name"], family["meta"])
            if family.get("directory"):
                self.family_dirs.setdefault(family["name"], family["directory"])
        policy = getattr(report, wire.REPORT_POLICY, None)
        if policy is not None:
            self.policies.setdefault(policy["name"], policy["params"])
        for attr, seen in ((wire.REPORT_INVALID, self.invalid), (wire.REPORT_SKIPPED, self.skipped)):
            entry = getattr(report, attr, None)
            if entry is not None:
                seen.append(entry)
        if sent is None:
            return
        self.records.append(sent)  # the record's JSON text (typed when read: :class:`RecordStore`)
        # the log is replaced when the run makes its first record, not at start: a run that stops
        # before any item (an unknown policy, a collection error) leaves the previous run's log
        if self.log is None and self.settings.records is not None:
            self.log = self._open_log()
        if self.log is not None and record is not None:
            self.log.write(record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self._finish_log(session, exitstatus)
        unrecorded = self.items.unrecorded(self.family_dirs)
        if not (self.records or self.invalid or self.skipped or unrecorded) and self.settings.report is None:
            if self.settings.summary_md is not None:  # the summary says what there is: no decision, the gates' note
                from pytest_tooleffect.report.assembly import assemble

                self._write_summary(assemble([], {}, self.sections))
            return
        from pytest_tooleffect.report import Report, dumps
        from pytest_tooleffect.report.assembly import assemble

        status = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "complete"
        report = assemble(self.records, self.families, self.sections, status=status, invalid=self.invalid,
                          skipped=self.skipped, min_class_n=self.settings.min_class_n, unrecorded=unrecorded)
        report.run = self._run_info()
        if self.config.hook.pytest_tooleffect_modifyreport.get_hookimpls():  # the users' hooks, last, on JSON
            data = report.to_json()
            self.config.hook.pytest_tooleffect_modifyreport(report=data, records=self.records.to_json(),
                                                            config=self.config)
            report = Report.model_validate(data)  # the report's sections in model order, then the hooks' keys
        # invalid cases' messages, provider messages and hooks' additions redacted too
        report = self.report = Report.model_validate(redact_obj(report.to_json()))
        if self.settings.report is not None:
            path = self.settings.report
            try:
                write_text(path, dumps(report) + "\n")
                self.report_written = True
            except OSError as exc:
                self.problems.add(f"tooleffect: {OPT_REPORT} {path}: cannot be written ({exc.strerror or exc}); "
                                  "the previous file, if any, is left as it was")
            except ValueError as exc:  # NaN or an infinity (a hook's): a report is JSON or is not written
                self.problems.add(f"tooleffect: {OPT_REPORT} {path}: not written: the report holds a number JSON "
                                  f"has no form for ({exc}); the previous file, if any, is left as it was")
        if self.settings.html is not None:
            self._write_html(session, self.settings.html, report)
        if self.settings.summary_md is not None:
            self._write_summary(report)

    def _write_summary(self, report: Report) -> None:
        """The Markdown summary (``--tooleffect-summary-md``): the gates, then each block."""
        from pytest_tooleffect.report.markdown import render_markdown

        path = self.settings.summary_md
        assert path is not None
        text = render_markdown(report, self.records, errors=self.tally.errors)
        try:
            write_text(path, text)
            self.summary_written = True
        except OSError as exc:
            self.problems.add(f"tooleffect: {OPT_SUMMARY_MD} {path}: cannot be written ({exc.strerror or exc})")

    def _run_info(self) -> Any:
        """The report's ``run`` section (a :class:`~pytest_tooleffect.report.run_model.RunInfo`): times,
        command, versions, the cases' commits, policy parameters.
        """
        import platform

        from pytest_tooleffect.report.run_model import GitState, RunInfo, Versions

        by_dir = git_state(Path(d) for d in sorted(set(self.family_dirs.values())))
        params = self.config.invocation_params
        return RunInfo(
            started_at=self.started_at, ended_at=now_utc(), command=[str(a) for a in params.args],
            directory=str(params.dir), versions=Versions(**versions(), python=platform.python_version()),
            cases_git={name: GitState(**by_dir[d]) for name, d in sorted(self.family_dirs.items()) if d in by_dir},
            policies=dict(sorted(self.policies.items())))

    @functools.cached_property
    def searched_family_dirs(self) -> list[Path]:
        """The family folders under the run's arguments (searched once, when first asked)."""
        return _family_dirs(self.config)

    def _write_html(self, session: pytest.Session, path: Path, report: Report) -> None:
        """The HTML page: the report, and every record with the state its case file holds."""
        from pytest_tooleffect.report.html import load_states, write_html

        states = load_states(self.searched_family_dirs, self.settings.pyproject_policies,
                             wanted={(r.family, r.case_id) for r in self.records})
        try:
            write_html(path, report, self.records, states)
            self.html_written = True
        except OSError as exc:
            self.problems.add(f"tooleffect: {OPT_HTML} {path}: cannot be written ({exc.strerror or exc})")
        except ValueError as exc:  # NaN or an infinity (a hook's): the page's data is JSON or is not written
            self.problems.add(f"tooleffect: {OPT_HTML} {path}: not written: the report holds a number JSON has no "
                              f"form for ({exc})")

    def _finish_log(self, session: pytest.Session, exitstatus: int) -> None:
        """Close the log; with no record made, replace the previous run's log by an empty one only
        when the run went through cleanly (it collected the cases and nothing errored).
        """
        if self.log is None and self.settings.records is not None and self.searched_family_dirs:
            if session.testsfailed == 0 and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                self.log = self._open_log()
            elif self.settings.records.exists():
                self.kept_previous_log = True
        if self.log is None:
            return
        self.log.close()
        if self.log.error is not None:
            err = self.log.error
            self.problems.add(f"tooleffect: {OPT_RECORDS} {self.log.path}: write failed ({err.strerror or err}): "
                              f"{self.log.written} records kept in it, {self.log.lost} lost (in the report only)")

    def _summary(self, terminalreporter: Any) -> None:
        if self.report is None or not self.settings.summary or not (
                self.records or self.invalid or self.skipped or self.report.unrecorded):
            return
        from pytest_tooleffect.report import render_terminal
        from pytest_tooleffect.report.terminal import report_layout

        terminalreporter.write_sep("=", "tooleffect report")
        tty = bool(terminalreporter.isatty)  # of pytest's own stream: a bool in pytest 8.0, a callable bool in 9.2
        layout = report_layout(SimpleNamespace(isatty=lambda: tty), self.config.get_terminal_writer().fullwidth)
        terminalreporter.write(render_terminal(self.report, **layout))
        line = judge_line(self.report)
        if line is not None:
            terminalreporter.write_line(line)
        if self.settings.rpm is not None or self.settings.tpm is not None:
            terminalreporter.write_line(rate_line(self.settings, self.records))
        here = self.config.invocation_params.dir
        if self.report_written and self.settings.report is not None:
            terminalreporter.write_line(f"tooleffect report written to {shown_path(self.settings.report, here)}")
        if self.log is not None and self.log.error is None:
            terminalreporter.write_line(f"tooleffect records written to {shown_path(self.log.path, here)}")
        if self.html_written and self.settings.html is not None:
            terminalreporter.write_line(f"tooleffect HTML report written to {shown_path(self.settings.html, here)}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary(terminalreporter)
        if self.kept_previous_log:
            assert self.settings.records is not None
            kept = shown_path(self.settings.records, self.config.invocation_params.dir)
            terminalreporter.write_line(f"tooleffect records: no record was made; the previous log {kept} is kept",
                                        yellow=True)
        for line in rollout_notes(self.records, self.settings.sandbox.rollout if self.settings.sandbox else 1):
            terminalreporter.write_line(line, yellow=True)
        for line in self.problems.lines:
            terminalreporter.write_line(line, red=True)

    def close(self) -> None:
        """Close the record log."""
        if self.log is not None:
            self.log.close()


@dataclass
class RunTally:
    """What the controller saw of the run, for the exit status under gates.

    Attributes:
        decision_failures: failed items whose record is a scored decision (the gates judge these).
        error_records: failed items whose record is an error (provider, agent, sandbox, oracle).
        other_failures: every other failed report (a setup or teardown error without a record, a
            test that is not a case item).
        collection_errors: failed collection reports.
    """

    decision_failures: int = 0
    error_records: int = 0
    other_failures: int = 0
    collection_errors: int = 0

    @property
    def errors(self) -> int:
        """Everything that fails the run whatever the gates say."""
        return self.error_records + self.other_failures + self.collection_errors

    def add(self, report: pytest.TestReport, outcome: str | None) -> None:
        """Count a failed test report; ``outcome`` is its record's (``None`` when it carries none)."""
        if not report.failed:
            return
        if outcome == "scored" and report.when == "call":
            self.decision_failures += 1
        elif outcome == "error":
            self.error_records += 1
        else:
            self.other_failures += 1


#: why an item collected has no record, by what pytest reported of it
NOT_RUN = "not run: the run stopped before it (-x, --maxfail, xdist's --max-worker-restart, Ctrl-C)"
FAILED_OUTSIDE = "failed with no record (its xdist worker crashed, or pytest failed it outside the plugin)"
XFAIL_NOT_RUN = "marked xfail(run=False): not run"


class CaseNodes:
    """The case items a run collected (by pytest node id) and what their reports carried: the items
    that ended with no record, invalid-case entry or skip are what is left.

    Under xdist the controller collects nothing: it learns the node ids each worker collected
    (``pytest_xdist_node_collection_finished``) and keeps those in a case file, the files the
    plugin collects (a ``.jsonl``, ``.yaml`` or ``.yml`` file beside a family file).

    Args:
        bases: the folders a node id's path may be relative to, in order: the rootdir, the
            directory pytest was started in, and the run's arguments (pytest names a file outside
            the rootdir relative to the argument it was found under).
    """

    _ACCOUNTED = "accounted"

    def __init__(self, bases: Iterable[Path]) -> None:
        self.bases = list(dict.fromkeys(bases))
        #: node id → ``None`` (no report yet), ``"accounted"``, or the outcome of a report without a record
        self.ids: dict[str, str | None] = {}
        self._dirs: dict[str, Path | None] = {}  # a node id's file part → its family folder (None: not a case file)

    def _family_dir(self, nodeid: str) -> Path | None:
        file = nodeid.split("::", 1)[0]
        if file not in self._dirs:
            found = None
            if "::" in nodeid and Path(file).suffix in CASE_SUFFIXES:
                found = next((p.parent for p in (base / file for base in self.bases)
                              if is_family_dir(p.parent)), None)
            self._dirs[file] = found
        return self._dirs[file]

    def collected(self, nodeids: Iterable[str]) -> None:
        """Note the case items among ``nodeids`` (a process's collection, after deselection)."""
        for nodeid in nodeids:
            if nodeid not in self.ids and self._family_dir(nodeid) is not None:
                self.ids[nodeid] = None

    def reported(self, report: pytest.TestReport) -> None:
        """Note a test report: an item is accounted for by the record, invalid entry or skip it carries."""
        state = self.ids.get(report.nodeid, self._ACCOUNTED)
        if state == self._ACCOUNTED:  # accounted already, or not a case item
            return
        if any(hasattr(report, a) for a in (wire.REPORT_RECORD, wire.REPORT_INVALID, wire.REPORT_SKIPPED)):
            self.ids[report.nodeid] = self._ACCOUNTED
        elif report.failed or state is None:
            self.ids[report.nodeid] = "xfail" if hasattr(report, "wasxfail") and report.skipped else report.outcome

    def unrecorded(self, family_dirs: Mapping[str, str]) -> list[dict[str, str]]:
        """The case items collected and never accounted for, ``{id, family, reason}`` each.

        Args:
            family_dirs: family name → its folder, for the families whose records came in (the rest
                are named by their folder).
        """
        names = {Path(d).resolve(): name for name, d in family_dirs.items()}
        out = []
        for nodeid, state in self.ids.items():
            if state == self._ACCOUNTED:
                continue
            folder = self._family_dir(nodeid)
            assert folder is not None
            reason = (NOT_RUN if state is None else FAILED_OUTSIDE if state == "failed" else XFAIL_NOT_RUN
                      if state == "xfail" else f"{state} with no record")
            out.append({"id": nodeid, "family": names.get(folder.resolve(), folder.name), "reason": reason})
        return out


class JudgeContributor:
    """The report's ``judge`` section (a :class:`~pytest_tooleffect.report.assembly.ReportSection`):
    the judge model, its last measured calibration, and what it spent over the run's records.

    Args:
        model: the judge's litellm model (``--tooleffect-judge``), or ``None``: no judge.
        calibration: the judge's last calibration file (``tooleffect calibrate-judge``), if any.
    """

    section: Literal["judge"] = "judge"

    def __init__(self, model: str | None, calibration: Path | None = None) -> None:
        self.model, self.calibration = model, calibration

    @classmethod
    def of_records(cls, records: Sequence[Record], calibration: Path | None = None) -> JudgeContributor:
        """The judge the records name (the model of the first record the judge spent on), for a
        report made from record logs; no judge when none names one.
        """
        return cls(next((r.judge.model for r in records if r.judge), None), calibration)

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.judge``."""
        from pytest_tooleffect.report.run_model import JudgeCalibration, JudgeSection, JudgeUsage

        if not self.model:
            report.judge = JudgeSection(
                model=None, note="no judge: free-text fields use the deterministic comparator (approximate)")
            return
        calibration: JudgeCalibration | str = "not measured"
        path = self.calibration
        if path is not None and path.is_file():
            try:
                cal = loads(read_input_text(path))
                if cal.get("model") == self.model:
                    calibration = JudgeCalibration.model_validate(
                        {k: cal.get(k) for k in ("n", "agreement", "kappa", "kappa_ci95", "measured_at")})
            except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
                calibration = "not measured (unreadable calibration file)"
        spent = [r.judge for r in records if r.judge]
        costs = [j.cost_usd for j in spent]
        report.judge = JudgeSection(model=self.model, calibration=calibration, usage=JudgeUsage(
            calls=sum(j.calls or 0 for j in spent), cached=sum(j.cached or 0 for j in spent),
            input_tokens=sum(j.input_tokens or 0 for j in spent),
            output_tokens=sum(j.output_tokens or 0 for j in spent),
            cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
            tokens_unknown=sum(j.tokens_unknown or 0 for j in spent),
            # a record written before the counts were kept per direction: its calls with no usage
            input_tokens_unknown=sum(_or(j.input_tokens_unknown, j.tokens_unknown) for j in spent),
            output_tokens_unknown=sum(_or(j.output_tokens_unknown, j.tokens_unknown) for j in spent)))


def _or(count: int | None, fallback: int | None) -> int:
    """``count``, else ``fallback``, else 0."""
    return count if count is not None else fallback or 0


def judge_line(report: Report) -> str | None:
    """The summary line of the report's judge: its model, last measured agreement and spend
    (``None`` without a judge).
    """
    from pytest_tooleffect.report.run_model import JudgeCalibration

    judge = report.judge
    if judge is None or not judge.model or judge.usage is None:
        return None
    cal = judge.calibration
    measured = _calibration_text(cal.model_dump() if isinstance(cal, JudgeCalibration) else cal)
    u = judge.usage
    money = "money unknown" if u.cost_usd is None else f"${u.cost_usd:.6f}"
    tokens = f"{u.input_tokens} in / {u.output_tokens} out tokens"
    tin, tout = max(u.input_tokens_unknown, u.tokens_unknown), max(u.output_tokens_unknown, u.tokens_unknown)
    if u.tokens_unknown and u.tokens_unknown == u.calls:  # calls whose provider reported no usage: not added as 0
        tokens = f"tokens unknown for all {u.tokens_unknown} calls (no usage reported)"
    elif tin == tout and tin:
        tokens = f"{tokens} (tokens unknown for {tin} of {u.calls} calls: not added)"
    elif tin or tout:  # a count the provider left out: not added as 0, per direction
        parts = [f"{what} tokens unknown for {k} of {u.calls}" for what, k in (("input", tin), ("output", tout)) if k]
        tokens = f"{tokens} ({parts[0]} calls{''.join(', ' + p for p in parts[1:])}: not added)"
    return (f"judge {judge.model}: last measured agreement {measured}; {u.calls} calls, "
            f"{u.cached} cached, {tokens}, {money} (apart from the agent's cost)")


def _calibration_text(cal: Any) -> str:
    """The judge's last calibration in words; a file with fields missing reads as not measured."""
    if not isinstance(cal, dict):
        return str(cal)
    kappa, ci, n = cal.get("kappa"), cal.get("kappa_ci95"), cal.get("n")
    if not isinstance(kappa, (int, float)) or not isinstance(n, int):
        return "not measured (calibration file without kappa and n)"
    interval = (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2
                and all(isinstance(x, (int, float)) for x in ci) else "")
    return f"Cohen's kappa {kappa:.2f}{interval} on {n} hand-labelled pairs"


def rate_line(settings: Settings, records: Sequence[Record]) -> str:
    """One summary line: the limits and the time model turns waited for them."""
    waits = [r.rate_wait_ms or 0.0 for r in records if "rate_wait_ms" in r.model_fields_set]
    limits = " and ".join(f"{n} {what}" for n, what in ((settings.rpm, "requests"), (settings.tpm, "tokens"))
                          if n is not None)
    return (f"tooleffect rate limit: {limits} per {settings.rate_window_s:g} s over all workers; "
            f"{sum(1 for w in waits if w > 0)} of {len(waits)} model turns waited for it, "
            f"{sum(waits) / 1000:.1f} s in all (not counted in latency)")


def rollout_notes(records: Sequence[Record], rollout: int) -> list[str]:
    """One line per family that ``--tooleffect-rollout N`` (``rollout``) did not reach.

    A family is reached when one of its records has a rollout whose step limit is above 1.

    Args:
        records: the run's records (``family``, ``rollout`` as in
            :class:`~pytest_tooleffect.scoring.record.Record`).
        rollout: the step limit asked for (1: nothing was asked, no note).

    Returns:
        The notes, in family name order.
    """
    if rollout <= 1:
        return []
    sandboxed: dict[str, bool] = {}
    reached: set[str] = set()
    for r in records:
        ro = r.rollout
        fam = r.family
        sandboxed[fam] = sandboxed.get(fam, False) or ro is not None
        if ro is not None and ro.limit > 1:
            reached.add(fam)
    notes = []
    for fam in sorted(set(sandboxed) - reached):
        why = ("none of its decisions ran in a sandbox (its cases have no world: family.yaml sandbox:)"
               if not sandboxed[fam] else
               "it plays through only the cases that open a conversation (sandbox.rollout: conversation), "
               "and none of those was run by a live policy")
        notes.append(f"tooleffect: {OPT_ROLLOUT} {rollout} did not apply to family {fam}: {why}; its decisions "
                     "are single-step, teacher-forced")
    return notes


def _without_records(settings: Settings) -> Settings:
    import dataclasses

    return dataclasses.replace(settings, records=None)


def _family_dirs(config: pytest.Config) -> list[Path]:
    """The family directories the run's arguments address."""
    return family_dirs(Path(config.invocation_params.dir) / arg.split("::")[0] for arg in config.args)
