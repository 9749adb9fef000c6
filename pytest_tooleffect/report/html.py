"""The report as one self-contained HTML page: the per-class tables and a decision browser.

The page (``--tooleffect-html PATH``, ``tooleffect html RECORDS|REPORT --out PATH``) is one file
that opens from disk and makes no request: its styles, script and data are inline.  The report's
figures (one section per family × policy, never pooled) are rendered by Jinja2 from the
:class:`~.model.Report` JSON; the decision browser is drawn by the page's own script from the
records and the states the agent saw, which travel gzip-compressed and base64-encoded in the page
(the browser inflates them with ``DecompressionStream``) and are listed 100 rows a page, so a run
of 50,000 decisions is a page of a few megabytes, not 50,000 table rows.

Records carry the verdict, not the state (the conversation, the tools offered, the label): those
are read back from the case files (:func:`load_states`), once per case, and a case whose label
changed since the run is flagged on the page by its label hash.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_tooleffect.collect.cases import case_label_hash, load_case_file
from pytest_tooleffect.collect.family import FamilyError, is_case_file, load_family
from pytest_tooleffect.collect.family import family_dirs as find_family_dirs
from pytest_tooleffect.formats import Policy
from pytest_tooleffect.report.model import CLASSES, Block, CostSummary, Report
from pytest_tooleffect.report.robustness_svg import curve_geometry
from pytest_tooleffect.report.terminal import cost_tokens
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.util.display import PAGE_LIMIT, json_shown_as_is, shown, shown_obj
from pytest_tooleffect.util.redaction import json_may_hold_secret, redact, redact_obj

__all__ = ["SMALL_CLASS_N", "States", "decision_order", "load_states", "page_data", "render_html", "write_html"]

#: a record id's trial under ``--tooleffect-repeats``: ``family/case[policy:trial]``
_TRIAL = re.compile(r":(\d+)\]$")


def decision_order(record_id: str) -> tuple[str, int, str]:
    """The key the page orders decisions by: the record id with its trial read as a number
    (``[p:2]`` before ``[p:10]``); ids without a trial keep their text order.

    Returns:
        ``(id without its trial, trial or 0, id)``.
    """
    m = _TRIAL.search(record_id)
    return (record_id[:m.start()] + "]", int(m[1]), record_id) if m else (record_id, 0, record_id)

#: A class with fewer scored rows than this is flagged as too small to rate on the page (its
#: Wilson 95 % interval is then wider than about ±20 points at any rate).
SMALL_CLASS_N = 20
#: At most this many rows in the page's server-drawn lists (disagreements, regressions); the
#: decision browser holds every decision.
LIST_CAP = 200


@dataclass
class States:
    """What the agent saw at each state, by family: read from the case files, one entry per case.

    Attributes:
        families: by family name, ``{system_prompt, tools, policies}``: the family's prompt, its
            tools (name, description, parameters, annotations) and, by policy name, a policy's
            ``system_prompt`` and ``tool_descriptions`` overrides.
        cases: by family name and case id, ``{messages, tools, label, label_hash, world, faults,
            expected_effects, forbidden_effects, recorded}`` (``tools`` ``null``: the family's).
        problems: one line per family or case file that could not be read (shown on the page).
    """

    families: dict[str, dict[str, Any]] = field(default_factory=dict)
    cases: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _policy_overrides(policy: Policy) -> dict[str, Any]:
    return {"system_prompt": policy.system_prompt, "tool_descriptions": dict(policy.tool_descriptions)}


def load_states(family_dirs: Iterable[Path], policies: Mapping[str, Policy] | None = None,
                wanted: Iterable[tuple[str, str]] | None = None) -> States:
    """Read the states (conversations, tools, labels) of the cases in ``family_dirs``.

    Args:
        family_dirs: folders holding a ``family.yaml`` (or folders above them, searched:
            :func:`~pytest_tooleffect.collect.family.family_dirs`).
        policies: policies defined outside the family files (``[tool.tooleffect.policies]``), by
            name: their prompt and tool-description overrides are what an agent under them saw.
        wanted: ``(family, case id)`` pairs to keep (the run's); ``None`` keeps every case.

    Returns:
        The states; a family or case file that cannot be read is a line in ``problems`` (the
        page says the conversation is missing), never an exception.
    """
    keep = None if wanted is None else set(wanted)
    states = States()
    for directory in find_family_dirs(family_dirs):
        try:
            fam = load_family(directory)
        except FamilyError as exc:
            states.problems.append(str(exc))
            continue
        if keep is not None and not any(f == fam.name for f, _ in keep):
            continue
        overrides = {name: _policy_overrides(p) for name, p in (policies or {}).items()}
        overrides.update({p.name: _policy_overrides(p) for p in fam.family.policies})
        states.families[fam.name] = {
            "system_prompt": fam.system_prompt,
            "tools": [t.model_dump(mode="json", exclude_none=True) for t in fam.tools],
            "policies": overrides,
        }
        cases = states.cases.setdefault(fam.name, {})
        seen: set[str] = set()
        for path in sorted(directory.iterdir()):
            if not path.is_file() or not is_case_file(path, fam.referenced_files):
                continue
            loaded, problems = load_case_file(path, fam, seen)
            states.problems += [str(p) for p in problems]
            for case in loaded:
                if keep is not None and (fam.name, case.id) not in keep:
                    continue
                cases[case.id] = _state(case, fam)
    return states


def _state(case: Any, family: Any) -> dict[str, Any]:
    label = case.label.model_dump(mode="json", exclude_none=True) if case.label is not None else None
    return {
        "messages": case.messages,
        "tools": None if case.tools is None else [t.model_dump(mode="json", exclude_none=True) for t in case.tools],
        "label": label,
        "label_hash": case_label_hash(case, family),
        "timezone": case.timezone,
        "world": case.world,
        "faults": {k: v.model_dump(mode="json") for k, v in case.faults.items()} or None,
        "expected_effects": [e.describe() for e in case.expected_effects] or None,
        "forbidden_effects": [e.describe() for e in case.forbidden_effects] or None,
    }


def _passed(record: Mapping[str, Any]) -> bool:
    verdict = record.get("verdict") or {}
    effect = record.get("effect")
    return bool(verdict.get("name_ok") and verdict.get("name_args_ok")) and (effect is None or effect["passed"])


def _disagreements(records: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per family run under several policies: the cases (and trials) whose policies disagree
    (some passed, some failed), each as ``{case, trial, by_policy: {policy: {id, kind, passed}}}``.
    """
    by: dict[str, dict[tuple[str, int], dict[str, Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    policies: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.get("outcome") != "scored":
            continue
        policies[r["family"]].add(r["policy"])
        by[r["family"]][(r["case_id"], r.get("trial") or 1)][r["policy"]] = r
    out: dict[str, list[dict[str, Any]]] = {}
    for family, cases in sorted(by.items()):
        if len(policies[family]) < 2:
            continue
        rows = []
        for (case_id, trial), per in sorted(cases.items()):
            if len(per) < 2 or len({_passed(r) for r in per.values()}) < 2:
                continue
            by_policy = {p: {"id": r["id"], "kind": r["verdict"]["kind"], "passed": _passed(r)}
                         for p, r in sorted(per.items())}
            rows.append({"case": case_id, "trial": trial, "by_policy": by_policy})
        out[family] = rows
    return out


def _json(value: Any) -> str:
    """Compact JSON text, non-ASCII kept: the page's data as it is packed."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)


def _page_text(value: Any, depth: int = 0) -> tuple[Any, str]:
    """A JSON value as the page shows it, and its JSON text: the run's secrets and URLs'
    credentials cut out (the same redaction as every other output), then every string and key as
    :func:`~pytest_tooleffect.util.display.shown` shows text over lines, at most
    :data:`~pytest_tooleffect.util.display.PAGE_LIMIT` characters each.

    The value is tested as JSON text first (C speed), and returned as it is when nothing in it would
    change, so 50,000 ordinary records cost no walk and are encoded once; else ``depth`` levels of
    containers (a list of records, cases by family and id) are opened and each item is tested, and
    walked when it fails.
    """
    text = _json(value)
    if json_shown_as_is(text, limit=PAGE_LIMIT, lines=True) and not json_may_hold_secret(text):
        return value, text
    if not depth:
        value = shown_obj(redact_obj(value), limit=PAGE_LIMIT, lines=True)
        return value, _json(value)
    if isinstance(value, Mapping):
        items = [(shown(redact(k), limit=PAGE_LIMIT, lines=True) if isinstance(k, str) else k, _page_text(v, depth - 1))
                 for k, v in value.items()]
        return ({k: v for k, (v, _) in items},
                "{" + ",".join(f"{_json(str(k))}:{t}" for k, (_, t) in items) + "}")
    parts = [_page_text(v, depth - 1) for v in value]
    return [v for v, _ in parts], "[" + ",".join(t for _, t in parts) + "]"


def _page(records: Sequence[Mapping[str, Any]], states: States | None) -> tuple[dict[str, Any], str]:
    """:func:`page_data`, and its compact JSON text (each part encoded once)."""
    ordered = sorted(records, key=lambda r: decision_order(str(r.get("id", ""))))  # the browser keeps this order
    parts = {
        "records": _page_text(ordered, depth=1),
        "families": _page_text(states.families, depth=1) if states else ({}, "{}"),
        "cases": _page_text(states.cases, depth=2) if states else ({}, "{}"),
        "problems": _page_text(states.problems, depth=1) if states else _page_text(
            ["the case files were not read: no conversation is shown"]),
    }
    disagree = sorted(p["id"] for rows in _disagreements(parts["records"][0]).values() for row in rows
                      for p in row["by_policy"].values())
    parts["disagree"] = (disagree, _json(disagree))
    return {k: v for k, (v, _) in parts.items()}, "{" + ",".join(f'"{k}":{t}' for k, (_, t) in parts.items()) + "}"


def page_data(records: Sequence[Mapping[str, Any]], states: States | None) -> dict[str, Any]:
    """The data the page's decision browser reads: the records, and the states.

    Records and states are text written by models, providers and case files: every string passes
    through the run's redaction and :func:`~pytest_tooleffect.util.display.shown` (no known secret,
    no URL credentials, no control or bidirectional character raw, each string bounded).

    Args:
        records: the run's records (JSON objects).
        states: the states read from the case files, or ``None`` (the page says so).

    Returns:
        ``{records, families, cases, problems, disagree}``: ``records`` in :func:`decision_order` (the
        order the browser lists them in, after a baseline's regressions and fixes); ``disagree`` lists the record ids of
        decisions on cases where policies disagree.
    """
    return _page(records, states)[0]


def _pack(text: str) -> str:
    """JSON text, gzip-compressed, base64-encoded: the page inflates it with ``DecompressionStream``."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _cost_tokens(cost: Mapping[str, Any] | CostSummary, n: int) -> str:
    """A block's tokens as the terminal's cost line says them (:func:`~.terminal.cost_tokens`)."""
    return cost_tokens(cost if isinstance(cost, CostSummary) else CostSummary.model_validate(cost), n)


def _bar(ci: Sequence[float] | None, pct: float | None) -> dict[str, float] | None:
    """An interval bar's geometry on a 0–100 axis."""
    if ci is None or pct is None:
        return None
    return {"lo": ci[0], "hi": ci[1], "pct": pct}


def render_html(report: Report, records: Sequence[Mapping[str, Any] | Record] = (),
                states: States | None = None, title: str = "tooleffect report") -> str:
    """Render the page.

    Args:
        report: the report (with its ``baseline`` and ``gates`` sections when the run had them).
        records: the run's records; none: the page has the report's tables and no browser.
        states: the cases' states (:func:`load_states`), for the conversation of each decision.
        title: the page's title.

    Returns:
        The HTML text: one file, no external reference.
    """
    import jinja2

    # the template reads the report's JSON form, as the page's script does; what a model, a provider or
    # a case file wrote is shown as text over lines (autoescaped, and no control or bidirectional character)
    clean = report.shown(limit=PAGE_LIMIT, lines=True)
    data = clean.to_json()
    title = shown(title)
    page, page_json = _page([r.to_json() if isinstance(r, Record) else r for r in records], states)
    rows = page["records"]
    env = jinja2.Environment(loader=jinja2.PackageLoader(__package__, "templates"),
                             autoescape=jinja2.select_autoescape(default=True), trim_blocks=True, lstrip_blocks=True)
    env.globals.update(bar=_bar, cost_tokens=_cost_tokens, classes=CLASSES, small_n=SMALL_CLASS_N, cap=LIST_CAP,
                       curve=curve_geometry)
    disagreements = _disagreements(rows)
    env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
    drawn = set(Report.model_fields)
    return env.get_template("report.html.j2").render(
        more={k: v for k, v in data.items() if k not in drawn},
        block_more=[{k: v for k, v in b.items() if k not in Block.model_fields} for b in data.get("blocks", [])],
        title=title, report=data, blocks=data.get("blocks", []), n_records=len(rows),
        disagreements=disagreements, baseline=data.get("baseline"), gates=data.get("gates"),
        sequential=clean.sequential.lines() if clean.sequential is not None else [],
        style=_asset("report.css"), script=_asset("report.js"),
        packed=_pack(page_json) if rows else "",
    )


def write_html(path: Path, report: Report, records: Sequence[Mapping[str, Any] | Record] = (),
               states: States | None = None) -> None:
    """Write the page to ``path`` (its folder created).

    Raises:
        OSError: the file cannot be written.
    """
    text = render_html(report, records, states)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
