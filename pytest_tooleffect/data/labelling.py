"""Labeller agreement over set-valued labels.

Two labellers' labels of the same states are compared as sets of actions, at two levels:
*name* (the set of tool names, ``null`` for no tool) and *action* (names with arguments).

* exact-set agreement: the share of states whose two sets are equal;
* Krippendorff's alpha with the MASI distance (Passonneau, "Measuring agreement on
  set-valued items (MASI)", LREC 2006), computed by NLTK's ``AnnotationTask``;
* per-class agreement: for each class of labeller A, the share of its states where B's set is
  equal;
* disagreements, each marked ``both_defensible`` when the two sets share an action (each side
  accepts something the other accepts) and ``conflict`` when they are disjoint.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.jsonl import read_objects
from pytest_tooleffect.util.own_outputs import LABELS, output_kind

__all__ = ["ROW_KEYS", "action_set", "agreement", "label_class", "label_key_problems", "merge", "merge_agreeing",
           "name_set", "read_labels", "render", "revise"]


def _canon(args: Any) -> str:
    return json.dumps(args or {}, sort_keys=True, ensure_ascii=False).casefold()


def _members(label: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for a in label.get("valid_actions") or []:
        if "parallel" in a:
            out.append({"tool": "+".join(sorted(str(m["tool"]) for m in a["parallel"])),
                        "args": [m.get("args") for m in a["parallel"]]})
        else:
            out.append(a)
    return out


def name_set(label: Mapping[str, Any]) -> frozenset[str]:
    """The label's valid tool names (``"null"`` for no tool)."""
    return frozenset("null" if a.get("tool") is None else str(a["tool"]) for a in _members(label))


def action_set(label: Mapping[str, Any]) -> frozenset[str]:
    """The label's valid actions with canonical arguments."""
    return frozenset("null" if a.get("tool") is None else f"{a['tool']} {_canon(a.get('args'))}"
                     for a in _members(label))


def label_class(label: Mapping[str, Any]) -> str:
    """``no_tool``, ``several`` or ``single`` (docs/design.md, "Words")."""
    acts = label.get("valid_actions") or []
    if any("parallel" not in a and a.get("tool") is None for a in acts):
        return "no_tool"
    return "several" if len(acts) >= 2 else "single"


def _alpha(pairs: Sequence[tuple[frozenset[str], frozenset[str]]]) -> float | None:
    require("nltk", "labellers' agreement (Krippendorff's alpha, MASI distance)")
    from nltk.metrics.agreement import AnnotationTask
    from nltk.metrics.distance import masi_distance

    data = []
    for i, (a, b) in enumerate(pairs):
        data.append(("A", str(i), a))
        data.append(("B", str(i), b))
    if not data:
        return None
    try:
        return float(AnnotationTask(data=data, distance=masi_distance).alpha())
    except ZeroDivisionError:  # every set identical: no expected disagreement
        return 1.0


def agreement(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Compare two labellers' labels, keyed by case id (only shared ids are compared).

    Returns:
        ``{"n", "exact_name", "exact_action", "alpha_masi_name", "alpha_masi_action",
        "class_agreement", "per_class", "disagreements": [...]}``; shares are fractions in [0, 1].

    """
    ids = sorted(set(a) & set(b))
    n = len(ids)
    name_pairs = [(name_set(a[i]), name_set(b[i])) for i in ids]
    act_pairs = [(action_set(a[i]), action_set(b[i])) for i in ids]
    per_class: dict[str, dict[str, Any]] = {}
    for i, (x, y) in zip(ids, name_pairs):
        c = label_class(a[i])
        row = per_class.setdefault(c, {"n": 0, "exact_name": 0})
        row["n"] += 1
        row["exact_name"] += int(x == y)
    for row in per_class.values():
        row["exact_name"] = row["exact_name"] / row["n"]
    disagreements = []
    for i, (x, y), (xa, ya) in zip(ids, name_pairs, act_pairs):
        if xa != ya:
            disagreements.append({
                "id": i,
                "a": sorted(xa), "b": sorted(ya),
                "names_equal": x == y,
                "kind": "both_defensible" if xa & ya else "conflict",
            })
    return {
        "n": n,
        "exact_name": sum(x == y for x, y in name_pairs) / n if n else None,
        "exact_action": sum(x == y for x, y in act_pairs) / n if n else None,
        "alpha_masi_name": _alpha(name_pairs),
        "alpha_masi_action": _alpha(act_pairs),
        "class_agreement": sum(label_class(a[i]) == label_class(b[i]) for i in ids) / n if n else None,
        "per_class": per_class,
        "disagreements": disagreements,
    }


def render(case_id: str, placement: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
           header: Sequence[str] = (), width: int = 2500) -> str:
    """Render a state readably for a labeller: the conversation so far, never ``recorded``.

    Tool results longer than ``width`` characters are cut.  The trace's text is hostile input: each
    piece is shown as outputs show text (:func:`~pytest_tooleffect.util.display.shown`: control,
    bidirectional and separator characters as visible escapes), line breaks kept, and every line
    after a message's first is indented, so a message's text cannot start a line of its own that
    reads as another turn (``[assistant] I refunded …``) or as the state's heading.
    """
    p = placement

    def text(value: object) -> str:
        return shown(value, limit=None, lines=True).replace("\r\n", "\n").replace("\n", "\n" + _CONTINUED)

    lines = [f"## STATE {text(case_id)}  (decision {p['step'] + 1} of {p['run_length']}, bucket {text(p['bucket'])})",
             *header]
    lines.append("--- conversation so far (system prompt omitted) ---")
    for m in messages:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            if m.get("content"):
                lines.append(f"[assistant] {text(m['content'])}")
            for tc in m["tool_calls"]:
                fn = tc.get("function", tc)
                lines.append(f"[assistant → CALL] {text(fn.get('name'))} {text(fn.get('arguments'))}")
        elif role == "tool":
            body = str(m.get("content"))
            if len(body) > width:
                body = body[:width] + " …(truncated)"
            lines.append(f"[tool result: {text(m.get('name') or m.get('tool_call_id'))}] {text(body)}")
        elif role != "system":
            lines.append(f"[{text(role)}] {text(m.get('content'))}")
    lines.append("--- what should the agent do next? ---")
    return "\n".join(lines)


#: how a message's lines after its first begin in a rendered state: never where a turn's ``[role]`` begins
_CONTINUED = "    "


#: the keys of a label file's row besides its label's (what ``label export`` writes: the state's id and text)
ROW_KEYS = ("id", "state")


def label_key_problems(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, message)`` for each key of a label file's row that neither a label row
    (:data:`ROW_KEYS` and the fields of :class:`~pytest_tooleffect.formats.Label`) nor, in a case
    line's ``label``, a case knows, at any depth (an action's ``tol``), with the known key it likely
    misspells (:func:`~pytest_tooleffect.util.known_keys.unknown_key_message`): a key dropped unsaid
    would lose what the labeller wrote in it (``forbiden_actions``: the forbidden actions).

    Args:
        row: the row (a JSON object).

    Returns:
        ``("forbiden_actions", "unknown key (did you mean 'forbidden_actions'?)")`` … in the row's order.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.collect.family import error_location
    from pytest_tooleffect.formats import Case, Label
    from pytest_tooleffect.util.known_keys import UNKNOWN_KEY, extra_key_message, unknown_keys

    if isinstance(row.get("label"), Mapping):  # a case line: the case's keys, its label's below
        problems = unknown_keys(row, Case.model_fields)
        part, prefix = row["label"], "label."
    else:
        problems = unknown_keys(row, (*ROW_KEYS, *Label.model_fields))
        part, prefix = {k: v for k, v in row.items() if k in Label.model_fields}, ""
    try:
        Label.model_validate(part)
    except ValidationError as exc:  # only its unknown keys: the label's values are checked where it is used
        problems += [(prefix + error_location(e["loc"]), extra_key_message(Label, e)) for e in exc.errors()
                     if e["type"] == UNKNOWN_KEY]
    return problems


def read_labels(path: Path, invalid: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
    """Read a JSONL label file (``{"id", "valid_actions", "forbidden_actions", "labelled_by"}`` per
    line; a case line with a ``label`` works too) keyed by id; a missing file reads as empty.

    Args:
        path: the label file.
        invalid: when given, filled with the rows holding a key a label does not know
            (:func:`label_key_problems`), by id: one line per key, ``FILE: line N: case ID: FIELD:
            unknown key (did you mean 'forbidden_actions'?)``.  Those rows are returned too: the caller
            counts them invalid.

    Raises:
        ValueError: the file is another file of the plugin's (a record log, a report, a baseline:
            named, with what reads it), is not UTF-8, or a line is not JSON, has no ``id`` or repeats
            the id of an earlier line (names the file and the lines).
    """
    if not path.exists():  # a folder or a device is refused by the reader, a pipe read
        return {}
    kind = output_kind(path) if path.is_file() else None
    if kind is not None and kind != LABELS:
        raise ValueError(f"{path}: is {kind}, not a label file (JSON lines of {{id, valid_actions, forbidden_actions}}"
                         f", as `tooleffect label export` writes them){_HINTS.get(kind, '')}")
    out: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for n, d in read_objects(path, "a label"):
        if "id" not in d:
            raise ValueError(f"{path}: line {n}: field 'id' is missing")
        key = str(d["id"])
        if key in lines:
            raise ValueError(f"{path}: line {n}: id {key!r} is labelled again (first on line {lines[key]}): "
                             "one label per state")
        lines[key] = n
        if invalid is not None:
            for field, message in label_key_problems(d):
                invalid.setdefault(key, []).append(f"{path}: line {n}: case {key}: {field}: {message}")
        label = d.get("label", d)
        out[key] = {"id": d["id"], **(label if isinstance(label, dict) else {})}
    return out


#: what reads the plugin's other files, for a record log or a report given where labels are read
_HINTS = {
    "a tooleffect record log": "; record logs (shards of one run) merge into one report with `tooleffect report "
                               "LOG...`",
    "a tooleffect JSON report": "; a report is read by `tooleffect html` and `tooleffect compare`",
    "a tooleffect baseline": "; a baseline is read by `tooleffect compare` and --tooleffect-baseline",
}


def _as_list(v: Any) -> list[str]:
    return [] if v is None else [v] if isinstance(v, str) else list(v)


def merge_agreeing(*labels: Mapping[str, Any]) -> dict[str, Any]:
    """Merge labels whose valid action sets agree: the last label's actions (with its reasons),
    the forbidden lists united (dropping any tool that is valid), every labeller named.
    """
    valid = list(labels[-1]["valid_actions"])
    valid_tools = {v.get("tool") for v in valid}
    forbidden: list[dict[str, Any]] = []
    for lab in reversed(labels):
        for f in lab.get("forbidden_actions") or []:
            f = {"tool": f} if isinstance(f, str) else dict(f)
            if f.get("tool") in valid_tools and not f.get("args"):
                continue
            if not any(g.get("tool") == f.get("tool") and g.get("args") == f.get("args") for g in forbidden):
                forbidden.append(f)
    by = list(dict.fromkeys(b for lab in labels for b in _as_list(lab.get("labelled_by"))))
    return {"valid_actions": valid, "forbidden_actions": forbidden, "labelled_by": by}


def revise(label: Mapping[str, Any], revision: Mapping[str, Any], where: str = "revision") -> dict[str, Any]:
    """Apply a relabelling pass's revision to one final label.

    A revision (one line of ``labels/revisions.jsonl``) may hold ``drop_valid`` (tool names whose
    valid actions are removed), ``forbid`` (``{tool, reason}`` entries replacing any forbidden
    entry for the same tool without arguments), ``reply`` / ``must`` / ``must_not`` (set on the
    label's first ``tool: null`` action), ``add_valid`` (actions appended to the valid ones, such
    as a second ``{tool: null, reply: refuse, reason}`` beside an ``ask``: a reply meeting either
    passes) and ``by`` (the pass's name, added to ``labelled_by``); ``why`` and ``policy`` are
    notes for the reader.

    Args:
        label: the label (``valid_actions``, ``forbidden_actions``, ``labelled_by``); not changed.
        revision: the revision.
        where: names the revision in errors (file and id).

    Returns:
        The revised label (a new dict).

    Raises:
        ValueError: an unknown key, a reply criterion on a label without a ``tool: null`` action,
            a revision that leaves no valid action, a tool both valid and forbidden, or an
            ``add_valid`` entry that is not an object with a ``tool`` key.

    """
    known = {"id", "by", "why", "policy", "drop_valid", "forbid", "reply", "must", "must_not", "add_valid"}
    unknown = sorted(set(revision) - known)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
    drop = set(_as_list(revision.get("drop_valid")))
    valid = [dict(a) for a in label.get("valid_actions") or [] if a.get("tool") not in drop]
    if not valid:
        raise ValueError(f"{where}: drop_valid leaves no valid action")
    added = revision.get("add_valid") or []
    if not isinstance(added, list) or not all(isinstance(a, dict) and "tool" in a for a in added):
        raise ValueError(f"{where}: add_valid must be a list of actions, each with a 'tool' key")
    forbid = [dict(f) for f in revision.get("forbid") or []]
    forbid_tools = {f.get("tool") for f in forbid}
    both = sorted(str(t) for t in forbid_tools if any(a.get("tool") == t for a in valid))
    if both:
        raise ValueError(f"{where}: forbid names valid tools {both} (drop them with drop_valid)")
    forbidden = [{"tool": f} if isinstance(f, str) else dict(f) for f in label.get("forbidden_actions") or []]
    forbidden = [f for f in forbidden if f.get("tool") not in forbid_tools or f.get("args")] + forbid
    criteria = {k: revision[k] for k in ("reply", "must", "must_not") if revision.get(k)}
    if criteria:
        nulls = [a for a in valid if a.get("tool") is None and "parallel" not in a]
        if not nulls:
            raise ValueError(f"{where}: reply, must and must_not need a tool: null valid action")
        nulls[0].update(criteria)
    valid += [dict(a) for a in added]
    added_tools = {a["tool"] for a in added}
    clash = sorted(str(f.get("tool")) for f in forbidden if f.get("tool") in added_tools and not f.get("args"))
    if clash:
        raise ValueError(f"{where}: add_valid names forbidden tools {clash}")
    by = list(dict.fromkeys([*_as_list(label.get("labelled_by")), *_as_list(revision.get("by"))]))
    return {**label, "valid_actions": valid, "forbidden_actions": forbidden, "labelled_by": by}


def merge(labellers: Sequence[Mapping[str, Mapping[str, Any]]],
          adjudicated: Mapping[str, Mapping[str, Any]] | None = None,
          disputed: Collection[str] = ()) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Produce the final label set from several labellers' labels (keyed by case id).

    A case whose valid action sets agree across every labeller that labelled it gets the merged
    label; an adjudicated case takes its adjudication; the rest need adjudication, and so does
    every case in ``disputed`` (one of its labels is invalid, an adjudication's too: what its
    labeller meant is for a person to read).

    Returns:
        ``(final labels by id, ids that need adjudication)``.
    """
    adjudicated = adjudicated or {}
    ids = sorted({i for lab in labellers for i in lab} | set(adjudicated))
    final: dict[str, dict[str, Any]] = {}
    pending = []
    for i in ids:
        if i in disputed:
            pending.append(i)
            continue
        if i in adjudicated:
            final[i] = {k: v for k, v in adjudicated[i].items() if k != "id"}
            continue
        these = [lab[i] for lab in labellers if i in lab and lab[i].get("valid_actions")]
        if these and len({action_set(t) for t in these}) == 1:
            final[i] = merge_agreeing(*these)
        else:
            pending.append(i)
    return final, pending
