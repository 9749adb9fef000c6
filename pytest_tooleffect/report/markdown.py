"""The report as a short Markdown summary, for a CI job summary (``--tooleffect-summary-md``).

Read by a person on a CI run's page (GitHub's ``$GITHUB_STEP_SUMMARY``): the gates and their
results first (then the sequential gates' verdicts and adaptive repeats' steps, one line per block), then per
family × policy the class table (name and name + args rates with their
Wilson 95 % intervals and n, as the report computes them: ``docs/design.md``, "Report
arithmetic"), the failures by kind, the decisions compared with a baseline (regressions by
record id) and the errors.  Everything comes from the report's JSON form and the records;
nothing is recomputed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pytest_tooleffect.report.arithmetic import percent
from pytest_tooleffect.report.ci_model import BaselineComparison, GatesNotApplied
from pytest_tooleffect.report.effects_model import EffectRate
from pytest_tooleffect.report.model import CLASSES, Block, Rate, Report
from pytest_tooleffect.report.replay_hint import replay_hint
from pytest_tooleffect.report.robustness_text import robustness_markdown
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.util.display import shown

__all__ = ["render_markdown"]

_MAX_IDS = 10  # record ids listed per block and list; the rest are counted
_STATUS = {"passed": "PASSED", "failed": "FAILED", "not_judged": "NOT JUDGED", "not_applicable": "NOT APPLICABLE"}


def render_markdown(report: Report, records: Sequence[Record] = (),
                    errors: int | None = None) -> str:
    """Render the summary.

    Args:
        report: the report (its ``gates`` when gates are configured: judged, or why not).
        records: the run's records (their ``baseline.status`` gives the regressions).
        errors: everything that errored in the run (error records, collection errors, failing
            tests that are not decisions); ``None``: the error records of the report's blocks.

    Returns:
        Markdown text ending in a newline.
    """
    blocks = report.blocks
    gates = report.gates
    n_errors = sum(b.n_errors for b in blocks) if errors is None else errors
    out: list[str] = []
    if isinstance(gates, GatesNotApplied):
        out += ["## tooleffect", "", f"Gates not applied: {_cell(gates.note)}.", ""]
    elif gates:
        verdict = "passed" if gates.passed else "FAILED"
        out += [f"## tooleffect: gates {verdict} (exit {gates.exit_status})", "",
                f"{_cell(gates.exit_reason)}.", ""]
        c = gates.counts
        na = f", {c.not_applicable} not applicable (not selected by this run)" if c.not_applicable else ""
        out += [f"{c.passed} passed, {c.failed} failed, {c.not_judged} not judged{na}; {n_errors} errors.", ""]
        if gates.filtered:  # the filter that left items out, as given: the gates judged the rest
            out += [f"Judged on a filtered run: {_cell(gates.filtered)}.", ""]
        if gates.results:
            out += ["| result | gate | value |", "| --- | --- | --- |"]
            for r in gates.results:
                head, _, _ = r.line.partition(": " + _STATUS[r.status])
                let = r.status == "not_judged" and not r.fails_run
                shown = _STATUS[r.status] + (" (let through)" if let else "")
                out.append(f"| {shown} | {_cell(head.removeprefix('gate '))} | {_cell(r.detail)} |")
            out.append("")
    else:
        out += ["## tooleffect", "", "No gates configured: pytest's exit status stands (a failing decision fails "
                "the run).", ""]
    if report.sequential is not None and report.sequential.blocks:  # each verdict and what its stop saved
        out += ["### Sequential gates", "", *(f"- {_cell(line)}" for line in report.sequential.lines()), ""]
    adaptive = [f"{b.family}/{b.policy}: {line}" for b in blocks
                if b.repeats is not None and (line := b.repeats.adaptive_line()) is not None]
    if adaptive:  # each block's steps and what the stop saved, as the terminal says them
        out += ["### Adaptive repeats", "", *(f"- {_cell(line)}" for line in adaptive), ""]
    baseline = report.baseline
    if isinstance(baseline, BaselineComparison):
        for m in baseline.policy_mismatches:  # why a block's decisions are all new against the baseline
            out += [f"Policy names differ from the baseline: {_cell(m.line)}.", ""]
        for rm in baseline.repeats_mismatches:  # why a block's decisions are all new against the baseline
            out += [f"Repeats differ from the baseline: {_cell(rm.line)}.", ""]
    if not blocks:
        out += ["No decisions were scored.", ""]
    hint = replay_hint(report)
    if hint is not None:  # cases with nothing recorded, replayed as the only policy: how to choose one
        text = hint.removeprefix("tooleffect: ")
        out += [_cell(text[:1].upper() + text[1:]) + ".", ""]
    by_block: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        by_block.setdefault((record.family, record.policy), []).append(record)
    for b in blocks:
        out += _block(b, by_block.get((b.family, b.policy), []))
    out += robustness_markdown(report.robustness, _cell)
    out.append(f"Errors (not counted in any rate, and failing the run): {n_errors}.")
    invalid, skipped, unrecorded = report.invalid, report.skipped, report.unrecorded
    if report.status != "complete":
        n_unrecorded = sum(u.count for u in unrecorded)
        without = f", {n_unrecorded} without a record" if n_unrecorded else ""
        out += ["", f"Report status: {report.status} ({sum(f.count for f in invalid)} invalid cases, "
                    f"{sum(s.count for s in skipped)} skipped{without}; none in any rate)."]
        for f in invalid:
            ids = ", ".join(_code("<file>" if i is None else i) for i in f.ids[:_MAX_IDS])
            more = f" and {f.count - _MAX_IDS} more" if f.count > _MAX_IDS else ""
            out.append(f"Invalid cases in {_cell(f.family)}: {f.count}: {ids}{more}.")
        for u in unrecorded:
            ids = ", ".join(_code(i) for i in u.ids[:_MAX_IDS])
            more = f" and {u.count - _MAX_IDS} more" if u.count > _MAX_IDS else ""
            reasons = "; ".join(f"{_cell(r)}: {n}" for r, n in u.reasons.items())
            out.append(f"Without a record in {_cell(u.family)}: {u.count} ({reasons}): {ids}{more}.")
    return "\n".join(out) + "\n"


def _block(b: Block, records: Sequence[Record]) -> list[str]:
    eff = b.effects
    out = [f"### {_cell(b.family)} · {_cell(b.policy)}", "",
           f"{b.n_scored} scored, {b.n_errors} errors, {b.n_xfail} xfail · label set "
           f"{_code(b.label_set_fingerprint)}", ""]
    head = "| class | n | name | 95 % CI | name + args | 95 % CI |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: |"
    if eff:
        head, rule = head + " effect | 95 % CI |", rule + " ---: | ---: |"
    out += [head, rule]
    for cls in CLASSES:
        c = getattr(b.classes, cls)
        row = [cls, str(c.n), _rate(c.name, c.n), _ci(c.name.wilson95_pct),
               _rate(c.name_args, c.n), _ci(c.name_args.wilson95_pct)]
        if eff:
            e = getattr(eff.classes, cls)
            row += [_rate(e, e.n), _ci(e.wilson95_pct)]
        out.append("| " + " | ".join(row) + " |")
    for avg in ("micro", "macro"):
        a = b.micro if avg == "micro" else b.macro
        row = [f"{avg}-average", str(b.n_scored) if avg == "micro" else "", _pc(a.name_display), "",
               _pc(a.name_args_display), ""]
        if eff:
            row += [_pc(eff.micro_display if avg == "micro" else eff.macro_display), ""]
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    kinds = ", ".join(f"{k} {v}" for k, v in b.kinds if v and k not in ("ok", "ok_no_tool"))
    out += [f"Failures by kind: {kinds or 'none'}.", ""]
    nt = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in b.no_tool_failures if v)
    out += [f"No-tool failures: {nt or 'none'}.", ""]
    nc = b.needless_calls
    if nc is not None:
        out += [f"No-tool failures by the MCP hints of what they called: read {nc.read}, write {nc.write}, "
                f"destructive {nc.destructive}, no call {nc.no_call} (of {nc.n}); severity-weighted no-tool rate "
                f"{_pc(nc.weighted_display)}.", ""]
    by_reply = b.no_tool_by_reply
    if set(by_reply) - {"unspecified"}:
        out += ["No tool, by the reply due: " + ", ".join(
            f"{due} {r.n} (no call {_pc(r.no_call_display)}, reply right {_pc(r.right_display)})"
            for due, r in by_reply.items()) + ".", ""]
    made_up = b.hallucinated_tools
    names = ", ".join(f"{_code(k)} {v}" for k, v in made_up.tools.items())
    out += ["Calls to tools not offered (hallucinated): " + ", ".join(
        f"{c} {n}" for c, n in made_up.classes) + (f" ({names})" if names else "") + ".", ""]
    ph = b.phantom_actions
    if ph is not None and ph.ids:
        out += ["Phantom actions (a claim the conversation does not hold): " + ", ".join(
            f"{c} {n}" for c, n in ph.classes) + f" ({ph.action} action, {ph.result} result): "
            + ", ".join(_code(i) for i in ph.ids[:_MAX_IDS]) + ("…" if len(ph.ids) > _MAX_IDS else "") + ".", ""]
    out += _baseline(records)
    found = eff.annotation_violations if eff else None
    if found:
        out += [f"Annotation violations (findings against the MCP server, not the agent's verdict): {found.n}.", "",
                "| tool | hints | read-only wrote | idempotent changed again | non-destructive removed | first in "
                "| diff |", "| --- | --- | ---: | ---: | ---: | --- | --- |"]
        for t in found.tools:
            hints = ", ".join(k for k, v in t.hints.items() if v) or "none true"
            diff = "<br>".join(_cell(x) for x in (t.diff + t.lost)[:4])
            out.append(f"| {_code(t.tool)} | {_cell(hints)} | {t.kinds.read_only_wrote} | "
                       f"{t.kinds.idempotent_changed_again} | {t.kinds.non_destructive_removed} | "
                       f"{_code(t.first_case)} | {diff} |")
        out.append("")
    errors = b.errors
    if errors:
        listed = ", ".join(_code(e.id) for e in errors[:_MAX_IDS])
        more = f" and {len(errors) - _MAX_IDS} more" if len(errors) > _MAX_IDS else ""
        types = ", ".join(f"{_cell(t)} {n}" for t, n in b.error_types.items())
        out += [f"Errors: {len(errors)} ({types}): {listed}{more}." if types else
                f"Errors: {len(errors)}: {listed}{more}.", ""]
    return out


def _baseline(records: Sequence[Record]) -> list[str]:
    statuses = [r.baseline.status for r in records if r.baseline is not None]
    if not statuses:
        return ["Baseline: none (no regressions can be told apart from known failures).", ""]
    counts = Counter(statuses)
    regressed = sorted(r.id for r in records if r.baseline is not None and r.baseline.status == "regression")
    parts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(counts.items())
                      if s not in ("regression", "changed"))
    line = f"Regressions against the baseline: {len(regressed)}"
    if regressed:
        line += ": " + ", ".join(_code(i) for i in regressed[:_MAX_IDS])
        line += f" and {len(regressed) - _MAX_IDS} more" if len(regressed) > _MAX_IDS else ""
    out = [line + (f" ({parts})." if parts else "."), ""]
    changed = sorted((r.id, r.baseline.before, r.baseline.after) for r in records
                     if r.baseline is not None and r.baseline.status == "changed")
    if changed:  # a known failure of another kind now: never counted among the known ones
        line = f"Known failures of another kind now (changed): {len(changed)}: " + ", ".join(
            f"{_code(i)} ({_cell(b)} → {_cell(a)})" for i, b, a in changed[:_MAX_IDS])
        out += [line + (f" and {len(changed) - _MAX_IDS} more." if len(changed) > _MAX_IDS else "."), ""]
    return out


def _rate(level: Rate | EffectRate, n: int) -> str:
    return "–" if not n else f"{level.rate_display} % ({level.correct}/{n})"


def _pc(display: str) -> str:
    return display if display == "–" else f"{display} %"


def _ci(ci: Sequence[float] | None) -> str:
    if ci is None:
        return "–"
    return "–".join(percent(Fraction(repr(x)) / 100) for x in ci)


#: what starts one of Markdown's inline constructs, escaped with a backslash: code spans, emphasis and
#: strikethrough (``*``, ``~``; ``_`` but between letters or digits, as in ``no_tool``), links and images
#: (``[``, ``]``), raw HTML and autolinks (``<`` before a letter, ``/``, ``!`` or ``?``), entities (``&``
#: before a letter or ``#``), table cells (``|``), a heading's closing hashes, and the backslash where it
#: would escape; ordinary text (``<= 0``, ``Price & Bonett``, ``no_tool``) keeps its bytes
_MD_SPECIAL = re.compile(r"[`*~\[\]|]|(?<![^\W_])_|_(?![^\W_])|<(?=[A-Za-z/!?])|&(?=[A-Za-z#])|#(?=[#\s]*$)"
                         r"|\\(?=[!-/:-@\[-`{-~]|$)")
_BACKTICKS = re.compile(r"`+")


def _cell(text: Any) -> str:
    """Text as the summary shows it in a table cell, a heading or a line: on one line, no control
    character, escape or bidirectional override, cut past :data:`~pytest_tooleffect.util.display.LIMIT`
    characters (:func:`~pytest_tooleffect.util.display.shown`), and every Markdown special
    character escaped, so a model's text is text: no heading, link, image, HTML or table cell of
    its own.
    """
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(), shown(text))


def _code(text: Any) -> str:
    """Text as a code span (a tool name, a record id): :func:`~pytest_tooleffect.util.display.shown`,
    between backtick fences longer than any run of backticks in it, so it cannot close the span.
    """
    text = shown(text)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"
