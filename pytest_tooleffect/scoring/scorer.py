"""Scoring: a decision against its label (and its sandbox's end state against the effects),
and the one place every record is made.

The fourth stage of the path of one case (``docs/design.md``, "Architecture").  Every item ends
with exactly one record (scored, or an error that is not the agent's decision: provider,
agent, sandbox, oracle), made by :meth:`Scorer.record`, passed through
``pytest_tooleffect_modify_record`` and carried on the item's test report to the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.collect.items import CaseItem, InvalidCaseItem, invalid_entry, scorer_key
from pytest_tooleffect.collect.variants import scored_emission, scored_tools
from pytest_tooleffect.decide.decision import Decision
from pytest_tooleffect.decide.sandbox_run import judge_effect
from pytest_tooleffect.formats import Label, policy_params
from pytest_tooleffect.oracle import CompareContext, Verdict, compile_label, score
from pytest_tooleffect.oracle.verdict import phantom_check
from pytest_tooleffect.outcomes import DecisionFailed, Failure, NotScored
from pytest_tooleffect.scoring.build import build_record
from pytest_tooleffect.scoring.hints import policy_label, severity
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.scoring.sections import record_sections_key
from pytest_tooleffect.settings import settings_key
from pytest_tooleffect.util.bounds import bounded, one_line
from pytest_tooleffect.util.display import LIMIT, shown
from pytest_tooleffect.util.exceptions import described, exception_text
from pytest_tooleffect.util.redaction import known, redact, redact_obj, register_environment

__all__ = ["FAILURE_LIMIT", "FAILURE_REPLY_LIMIT", "RECORD_ERROR", "Scorer", "failure_reasons", "record_key",
           "tooleffect_score"]

#: The longest failure text of a case item pytest shows (terminal, JUnit, pytest-json-report), in
#: characters: a failing decision's line joins several pieces (names, fields, effects), each of
#: which may be model text.
FAILURE_LIMIT = 5 * LIMIT

record_key = pytest.StashKey[Record]()
#: the item's record as JSON text (made once, when the record is: :meth:`Scorer.record`)
record_text_key = pytest.StashKey[str]()
#: The error type of an item whose record could not be made or written (:meth:`Scorer.record`).
RECORD_ERROR = "RecordError"
#: Characters of the reply a failure line quotes (its whitespace made single spaces): enough for a
#: question or a refusal of a sentence or two, and the line stays one line of a terminal's short
#: summary; the whole reply (up to :data:`~pytest_tooleffect.scoring.record.REPLY_TEXT_LIMIT`) is
#: in the record and on the HTML page.
FAILURE_REPLY_LIMIT = 200


class Scorer:
    """The plugin object that scores decisions and makes records (built at configure time).

    It is the scorer of :data:`~pytest_tooleffect.collect.items.scorer_key`: ``scorer(item, decision)``
    scores the item's decision in its call phase.  It also attaches records to test reports
    (where xdist carries them to the controller) and to pytest-json-report's per-test metadata.

    Args:
        config: pytest's config.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[settings_key]
        self._predicates: Mapping[str, Callable[..., Any]] | None = None
        self.judge: Any = None
        if self.settings.judge_model:
            from pytest_tooleffect.scoring.judge import Judge

            self.judge = Judge(self.settings.judge_model, self.settings.judge_api_base, self.settings.judge_cache,
                               self.settings.timeout_s)
        self._families_sent: set[str] = set()
        self._policies_sent: set[str] = set()
        config.stash[scorer_key] = self.__call__
        register_environment()  # the credentials litellm would read: redacted from every record and report

    def predicates(self) -> Mapping[str, Callable[..., Any]]:
        """The predicates every ``pytest_tooleffect_predicates`` implementation contributes, merged."""
        if self._predicates is None:
            merged: dict[str, Callable[..., Any]] = {}
            for contributed in self.config.hook.pytest_tooleffect_predicates():
                merged.update(contributed or {})
            self._predicates = merged
        return self._predicates

    def record(self, item: CaseItem, verdict: Verdict | None = None, cost: Mapping[str, Any] | None = None,
               error: Failure | None = None, extra: Mapping[str, Any] | None = None) -> Record:
        """Make the item's one record, pass it through the plugin's record sections
        (:mod:`~pytest_tooleffect.scoring.sections`), then the users' ``pytest_tooleffect_modify_record``,
        and keep it on the item (``item.stash[record_key]``) until its teardown report: its setup or call
        report carries the record's JSON object on, and a run of 50,000 items holds none of them.

        A record that cannot be made or written (a field out of bounds, text no JSON writer takes, a
        hook's value) is replaced by the item's error record of type ``RecordError`` naming why: the
        run goes on, and the call phase fails the item as a scoring error.

        Args:
            item: the case item.
            verdict: the verdict, or ``None`` for an error record.
            cost: tokens, latency (ms), money of the decision (unknown values ``None``).
            error: what failed, for an error record.
            extra: further record fields (the turn's, the judge's, the sandbox's).

        Returns:
            The record (a ``RecordError`` record when the one asked for could not be made).

        Raises:
            ValueError: not even the error record can be made (the item's case can no longer be read).
        """
        try:
            record = self._made(item, verdict, cost, _error(error), extra, hooks=True)
            text = record.to_json_text()
        except Exception as exc:  # a record that cannot be made or written: the item's error, never the run's
            failure = Failure(RECORD_ERROR, f"the item's record cannot be made or written: {described(exc, 400)}")
            record = self._made(item, None, None, _error(failure), None, hooks=False)
            text = record.to_json_text()
        item.stash[record_key] = record
        item.stash[record_text_key] = text
        return record

    def _made(self, item: CaseItem, verdict: Verdict | None, cost: Mapping[str, Any] | None,
              error: Mapping[str, Any] | None, extra: Mapping[str, Any] | None, hooks: bool) -> Record:
        """The record :meth:`record` keeps: built, through the plugin's sections, then (``hooks``) the
        users' ``pytest_tooleffect_modify_record``, known secrets redacted from a live item's.
        """
        fields = {"model": item.policy.model, "trial": item.trial, **(extra or {})}
        record = build_record(
            family=item.family.name, case=item.case, policy=item.policy.name, verdict=verdict,
            tools={t.name: t for t in scored_tools(item)}, cost=cost, error=error,
            extra=fields, repeats=self.settings.repeats, label_digest=item.ref.label_hash)
        for section in item.config.stash.get(record_sections_key, []):
            section.modify_record(record, item)
        hook = item.config.hook.pytest_tooleffect_modify_record
        if hooks and hook.get_hookimpls():  # the users' hooks, last, on the record's JSON object
            data = record.to_json()
            hook(record=data, item=item)
            record = Record.model_validate(data)
        if not item.replay:  # what a model, an agent or a provider wrote may hold a key the run knows
            record = Record.model_validate(redact_obj(record.to_json()))
        return record

    def __call__(self, item: CaseItem, decision: Decision) -> None:
        """Score the decision; attach the record; fail the test (one-line reason) on a failing kind.

        Raises:
            DecisionFailed: the decision (or its effect) is not acceptable.
            pytest.fail.Exception: the oracle could not judge (an error record, not a decision).
        """
        case, fam = item.case, item.family
        assert case.label is not None
        tools = scored_tools(item)  # a perturbed catalog's under its original names, its calls mapped back
        label = policy_label(case, tools, fam)  # the family's hint policy may forbid destructive tools here
        judge = self.judge
        before = judge.usage.to_dict() if judge is not None else None
        ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages,
                             predicates=self.predicates(), judge=judge)
        effect = None
        try:
            if item.decisions > 1:  # compiled once, every decision on the case is then looked up
                compile_label(label, tools, fam.rules)
            emission = scored_emission(item, decision.emission)  # parsed once, at the decision
            verdict = score(emission, label, tools, fam.rules, ctx)
            if decision.sandbox_run is not None:
                effect, effect_fields = judge_effect(item, decision.sandbox_run)
                if decision.emission.calls and not effect.diff:  # a write claimed that the world does not show
                    verdict = phantom_check(verdict, {t.name: t for t in tools}, case.messages, sandbox_changed=False)
        except Exception as exc:  # a rule, predicate or input the oracle cannot judge: not the agent's failure
            failure = Failure("OracleError", described(exc))
            self.record(item, None, decision.cost, failure, decision.extra)
            pytest.fail(f"{item.record_id}: scoring error (not counted as a decision): {failure.message}",
                        pytrace=False)
        extra: dict[str, Any] = dict(decision.extra)
        if judge is not None and before is not None:
            after = judge.usage.to_dict()
            spent = {k: (None if after[k] is None or before[k] is None else after[k] - before[k]) for k in after}
            if spent["calls"] or spent["cached"]:
                extra["judge"] = {"model": judge.model, **spent}
        if effect is not None:
            extra.update(effect_fields)
        graded = severity(label, verdict, {t.name: t for t in tools}, fam, effect is not None and not effect.passed)
        if graded is not None:
            extra["no_tool_severity"] = graded.model_dump(mode="json")
        unwritten = _unwritten(self.record(item, verdict, decision.cost, extra=extra))  # no Record held in this
        if unwritten is not None:  # frame: a failure's traceback keeps its frames, and 50,000 of them would add up
            pytest.fail(f"{item.record_id}: record error (not counted as a decision): {unwritten}", pytrace=False)
        reasons = [] if verdict.passed else [failure_reasons(verdict, label)]
        if effect is not None and not effect.passed:
            reasons.append(f"effect {effect.kind}: " + "; ".join(effect.failures))
        conversation = extra.get("conversation")
        if conversation is not None and not conversation["passed"]:
            reasons.append(f"conversation {conversation['kind']}: {conversation['message']}")
        if reasons:
            raise DecisionFailed(f"{item.record_id}: " + " | ".join(reasons), pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Make the error record of a setup that failed outside the agent; carry the record on the report.

        An invalid case's entry (``tooleffect_invalid``) and a skipped item's (``tooleffect_skipped``:
        its record id, family, policy and reason) ride on the report too, so the controller's report
        lists every item collected (scoring rule 7).
        """
        report = yield
        if call.when == "setup" and isinstance(item, InvalidCaseItem):
            setattr(report, wire.REPORT_INVALID, item.entry())
        if (call.when == "setup" and report.skipped and isinstance(item, CaseItem) and record_key not in item.stash
                and not hasattr(report, "wasxfail")):
            reason = call.excinfo.value.msg if call.excinfo is not None and hasattr(call.excinfo.value, "msg") else ""
            setattr(report, wire.REPORT_SKIPPED, {"id": item.record_id, "family": item.family.name,
                                                  "policy": item.policy.name, "reason": str(reason or "skipped")})
            if isinstance(report.longrepr, tuple):  # ``-rs`` names the case's line, not the plugin's (as a skip mark)
                path, line, _ = item.reportinfo()
                report.longrepr = (str(path), None if line is None else line + 1, report.longrepr[2])
        if (call.when == "setup" and call.excinfo is not None and isinstance(call.excinfo.value, NotScored)
                and isinstance(item, CaseItem)):
            self.record(item, error=call.excinfo.value.error)
        elif (call.when == "setup" and call.excinfo is not None and report.failed and isinstance(item, CaseItem)
              and record_key not in item.stash):
            _setup_failed(self, item, report, call.excinfo.value)
        if call.excinfo is not None and isinstance(item, CaseItem):
            _short_longrepr(report, call.excinfo.value, item.record_id)
        _redact_report(report)
        if isinstance(item, (CaseItem, InvalidCaseItem)):  # what a model, a provider or a case file wrote
            _shown_report(report, lines=isinstance(item, InvalidCaseItem))
        if call.when in ("setup", "call") and record_key in item.stash and not hasattr(report, wire.REPORT_RECORD):
            setattr(report, wire.REPORT_RECORD, item.stash[record_text_key])
            assert isinstance(item, CaseItem)
            if item.family.name not in self._families_sent:  # the controller reports without reading family files
                self._families_sent.add(item.family.name)
                setattr(report, wire.REPORT_FAMILY, {"name": item.family.name, "meta": item.family.meta,
                                                     "directory": str(item.family.directory)})
            if item.policy.name not in self._policies_sent:  # its parameters, for the report's run section
                self._policies_sent.add(item.policy.name)
                setattr(report, wire.REPORT_POLICY, {"name": item.policy.name, "params": policy_params(item.policy)})
        if call.when == "teardown" and record_key in item.stash:  # its reports carry it: the item lets it go
            del item.stash[record_key]
            del item.stash[record_text_key]
        return report

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any] | None:
        if call.when in ("setup", "call") and record_key in item.stash:
            return {"tooleffect": item.stash[record_key].to_json()}
        return None


def failure_reasons(verdict: Verdict, label: Label) -> str:
    """The failure line of a failing decision: :meth:`Verdict.one_line`, and, when the turn made no
    call that could be parsed (``wrong_reply``, ``none_when_tool_needed``, a ``malformed_call``),
    the reply it gave instead: ``; reply: "…"``, known secrets redacted, cut after
    :data:`FAILURE_REPLY_LIMIT` characters with the cut said, its whitespace made single spaces.

    Args:
        verdict: the oracle's verdict on the decision (failing).
        label: the case's label.

    Returns:
        One line.
    """
    line = verdict.one_line(label)
    text = verdict.emission.text
    if text and text.strip() and not verdict.emission.calls:
        line += f'; reply: "{one_line(bounded(redact(text), FAILURE_REPLY_LIMIT))}"'
    return line


def _setup_failed(scorer: Scorer, item: CaseItem, report: pytest.TestReport, exc: BaseException) -> None:
    """Any other failure of a case item's setup (a user's fixture, a case that can no longer be
    read) is an error record too, so the item stays in the report (scoring rule 7); when its case
    cannot be read to make one, the report lists it as an invalid case naming the file and the id.
    """
    failure = Failure(type(exc).__name__, " ".join(exception_text(exc).split())[:500])
    try:
        scorer.record(item, error=failure)
    except Exception:  # the case itself is unreadable: no record can be made of it
        problem = f"{item.path}: case {item.ref.id}: {failure.kind}: {failure.message}"
        setattr(report, wire.REPORT_INVALID, invalid_entry(item.family.name, item.path, item.ref.id, [problem]))


def _short_longrepr(report: pytest.TestReport, exc: BaseException, record_id: str) -> None:
    """A failure of the item raised with ``pytrace=False`` is its one-line reason: the report's
    ``longrepr`` is that text (the record id, already the failure's headline, left out), so the
    short summary shows the reason rather than the exception's qualified name, and printing one
    failure costs one line.
    """
    if isinstance(exc, pytest.fail.Exception) and not exc.pytrace and exc.msg and report.longrepr is not None:
        report.longrepr = exc.msg.removeprefix(f"{record_id}: ")


def _redact_report(report: pytest.TestReport) -> None:
    """Cut every known secret and every URL's credentials out of a test report's failure text and
    captured output (what the terminal, JUnit and pytest-json-report print); a report with none is
    left as it is.
    """
    if not known() and not _may_hold_url_credentials(report):
        return
    if isinstance(report.longrepr, tuple):  # a skip's (path, line, reason): kept a tuple
        report.longrepr = tuple(redact(x) if isinstance(x, str) else x for x in report.longrepr)  # type: ignore[assignment]
    elif report.longrepr is not None:
        text = report.longrepr if isinstance(report.longrepr, str) else str(report.longrepr)
        clean = redact(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(title, redact(content)) for title, content in report.sections]


def _may_hold_url_credentials(report: pytest.TestReport) -> bool:
    texts = [content for _, content in report.sections]
    if report.longrepr is not None:
        texts += [str(x) for x in report.longrepr] if isinstance(report.longrepr, tuple) else [str(report.longrepr)]
    return any("://" in t and "@" in t for t in texts)


def _shown_report(report: pytest.TestReport, lines: bool) -> None:
    """A case item's failure text as an output may show it (:func:`~pytest_tooleffect.util.display.shown`):
    no control character, escape or bidirectional override of a model's, a provider's or a case
    file's text reaches the terminal, JUnit or pytest-json-report, and at most
    :data:`FAILURE_LIMIT` characters.  A one-line failure stays one line; an invalid case's
    problems (``lines``), and a traceback, keep their lines.
    """
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip's (path, line, reason)
        report.longrepr = tuple(shown(x, limit=FAILURE_LIMIT) if isinstance(x, str) else x  # type: ignore[assignment]
                                for x in longrepr)
    elif isinstance(longrepr, str):
        report.longrepr = shown(longrepr, limit=FAILURE_LIMIT, lines=lines)
    elif longrepr is not None:
        text = str(longrepr)
        clean = shown(text, limit=None, lines=True)
        if clean != text:
            report.longrepr = clean


def _unwritten(record: Record) -> str | None:
    """Why a scored decision's record could not be written (its ``RecordError`` message), or ``None``."""
    return record.error.message if record.verdict is None and record.error is not None else None


def _error(failure: Failure | None) -> dict[str, Any] | None:
    """An error record's ``error``: ``type``, ``message`` and, for an agent's exception, ``traceback``."""
    if failure is None:
        return None
    out = {"type": failure.kind, "message": failure.message}
    if failure.traceback:
        out["traceback"] = failure.traceback
    if failure.stderr:
        out["stderr"] = failure.stderr
    return out


@pytest.fixture
def tooleffect_score(request: pytest.FixtureRequest) -> Callable[..., Verdict]:
    """Score one decision inside an ordinary test: ``verdict = tooleffect_score(emitted, label, tools)``.

    The same as :func:`pytest_tooleffect.scoring`, with the predicates registered through
    ``pytest_tooleffect_predicates`` available to rules.  Extra keyword arguments: ``rules``
    (a :class:`~pytest_tooleffect.oracle.RuleSet`), ``timezone``, ``state``, ``messages``.
    """
    scorer = request.config.pluginmanager.get_plugin("tooleffect-scorer")
    predicates = scorer.predicates() if isinstance(scorer, Scorer) else {}

    def _score(emitted: Any, label: Any, tools: Any, *, rules: Any = None, timezone: str | None = None,
               state: Mapping[str, Any] | None = None, messages: Any = ()) -> Verdict:
        ctx = CompareContext(timezone=timezone, state=state or {}, messages=messages, predicates=predicates)
        return score(emitted, label, tools, rules, ctx)

    return _score
