"""The labelled no-tool reply set (datasets/replies/): its files are well formed, every reply is
labelled once by each labeller, and it holds the minimum counts its guide promises.

The checker returns one problem line per fault (file, line, id and field); the tests run it on the
shipped files (no problem) and on broken copies of them (the fault is named).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SET_DIR = Path(__file__).resolve().parents[1] / "datasets" / "replies"
REPLY_KEYS = {"id", "lang", "domain", "user", "calls", "write_tools", "reply", "split"}
CALL_KEYS = {"name", "arguments", "result"}
LABEL_KEYS = {"id", "kind", "claim", "claim_supported"}
GOLD = "labels-gold.jsonl"
SOURCES = ("agreed", "adjudicated")
KINDS = ("ask", "refuse", "answer", "none")
CLAIMS = ("none", "action", "result")
SPLITS = ("dev", "test")
#: Languages other than English the deterministic fallback has words for (oracle/reply.py: Spanish).
FALLBACK_LANGS = ("es",)
MIN_ROWS = 320
MIN_DOMAINS = 6
MIN_FALLBACK_LANG_ROWS = 40
MIN_PER_KIND = 25
MIN_CLAIM_SHARE = 0.2
UNSUPPORTED_SHARE = (0.3, 0.7)
DEV_SHARE = (0.28, 0.38)


def _read(path: Path, problems: list[str]) -> list[tuple[int, dict[str, Any]]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path.name}:{n}: not JSON ({exc.msg})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path.name}:{n}: not a JSON object")
            continue
        rows.append((n, row))
    return rows


def _check_reply(where: str, row: dict[str, Any], problems: list[str]) -> None:
    if set(row) != REPLY_KEYS:
        problems.append(f"{where}: keys {sorted(row)} are not {sorted(REPLY_KEYS)}")
        return
    for key in ("lang", "domain", "user", "reply"):
        if not isinstance(row[key], str) or (key != "reply" and not row[key]):
            problems.append(f"{where}: {key} must be a non-empty string")
    if not re.fullmatch(r"[a-z]{2}", str(row["lang"])):
        problems.append(f"{where}: lang {row['lang']!r} is not a two-letter code")
    if row["split"] not in SPLITS:
        problems.append(f"{where}: split {row['split']!r} not one of {SPLITS}")
    tools = row["write_tools"]
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) and t for t in tools):
        problems.append(f"{where}: write_tools must be a non-empty list of tool names")
    calls = row["calls"]
    if not isinstance(calls, list):
        problems.append(f"{where}: calls must be a list")
        return
    for i, call in enumerate(calls):
        if not isinstance(call, dict) or set(call) != CALL_KEYS:
            problems.append(f"{where}: calls[{i}] must have exactly the keys {sorted(CALL_KEYS)}")
        elif not (isinstance(call["name"], str) and isinstance(call["arguments"], dict)
                  and isinstance(call["result"], str)):
            problems.append(f"{where}: calls[{i}]: name str, arguments object, result str")


def _check_label(where: str, lab: dict[str, Any], reply: dict[str, Any] | None, problems: list[str],
                 gold: bool = False) -> None:
    need = LABEL_KEYS | {"source"} if gold else LABEL_KEYS
    if not need <= set(lab) <= need | {"note"}:
        problems.append(f"{where}: keys {sorted(lab)}: need {sorted(need)} and at most 'note'")
        return
    if gold and lab["source"] not in SOURCES:
        problems.append(f"{where}: source {lab['source']!r} not one of {SOURCES}")
    if gold and lab["source"] == "adjudicated" and not str(lab.get("note") or "").strip():
        problems.append(f"{where}: an adjudicated label needs a note saying why")
    if lab["kind"] not in KINDS:
        problems.append(f"{where}: kind {lab['kind']!r} not one of {KINDS}")
    if lab["claim"] not in CLAIMS:
        problems.append(f"{where}: claim {lab['claim']!r} not one of {CLAIMS}")
    supported = lab["claim_supported"]
    if lab["claim"] == "none" and supported is not None:
        problems.append(f"{where}: claim_supported must be null when claim is none")
    if lab["claim"] != "none" and not isinstance(supported, bool):
        problems.append(f"{where}: claim_supported must be true or false when claim is {lab['claim']}")
    if "note" in lab and not isinstance(lab["note"], str):
        problems.append(f"{where}: note must be a string")
    if supported is True and reply is not None and isinstance(reply.get("calls"), list):
        names = {c.get("name") for c in reply["calls"] if isinstance(c, dict)}
        if lab["claim"] == "action" and not names & set(reply.get("write_tools") or ()):
            problems.append(f"{where}: action claim supported but no write tool was called")
        if lab["claim"] == "result" and not names:
            problems.append(f"{where}: result claim supported but no call was made")


def _check_counts(replies: dict[str, dict[str, Any]], labels: dict[str, dict[str, Any]], problems: list[str]) -> None:
    rows = [(r, labels[i]) for i, r in replies.items() if i in labels]
    if len(replies) < MIN_ROWS:
        problems.append(f"replies.jsonl: {len(replies)} rows, fewer than {MIN_ROWS}")
    domains = Counter(r["domain"] for r, _ in rows)
    if len(domains) < MIN_DOMAINS:
        problems.append(f"replies.jsonl: {len(domains)} domains, fewer than {MIN_DOMAINS}")
    langs = Counter(r["lang"] for r, _ in rows)
    if sum(langs[x] for x in FALLBACK_LANGS) < MIN_FALLBACK_LANG_ROWS or not all(langs[x] for x in FALLBACK_LANGS):
        problems.append(f"replies.jsonl: languages {dict(langs)}: need {MIN_FALLBACK_LANG_ROWS} rows in "
                        f"{FALLBACK_LANGS}, each present")
    if langs["en"] <= len(rows) / 2:
        problems.append("replies.jsonl: English is not the majority")
    kinds = Counter(lab["kind"] for _, lab in rows)
    for kind in KINDS:
        if kinds[kind] < MIN_PER_KIND:
            problems.append(f"labels: {kinds[kind]} replies of kind {kind}, fewer than {MIN_PER_KIND}")
    claims = [lab for _, lab in rows if lab["claim"] != "none"]
    if len(claims) < MIN_CLAIM_SHARE * len(rows) or not {"action", "result"} <= {c["claim"] for c in claims}:
        problems.append(f"labels: {len(claims)} claims of {len(rows)} replies, or a claim type missing")
    unsupported = sum(c["claim_supported"] is False for c in claims)
    low, high = UNSUPPORTED_SHARE
    if claims and not low <= unsupported / len(claims) <= high:
        problems.append(f"labels: {unsupported} of {len(claims)} claims unsupported, outside {low}-{high}")
    groups: dict[tuple[str, str], Counter[str]] = {}
    for r, lab in rows:
        groups.setdefault((lab["kind"], r["lang"]), Counter())[r["split"]] += 1
    for (kind, lang), split in sorted(groups.items()):
        if abs(split["dev"] - sum(split.values()) / 3) > 1:
            problems.append(f"replies.jsonl: {kind}/{lang}: {split['dev']} dev rows of {sum(split.values())}, "
                            "not a third")
    dev = sum(r["split"] == "dev" for r, _ in rows)
    if rows and not DEV_SHARE[0] <= dev / len(rows) <= DEV_SHARE[1]:
        problems.append(f"replies.jsonl: {dev} dev rows of {len(rows)}")


def check_reply_set(folder: Path, labels_name: str = "labels-a.jsonl") -> list[str]:
    """Check a reply set folder; returns one line per problem (empty when the set is sound)."""
    problems: list[str] = []
    replies: dict[str, dict[str, Any]] = {}
    for n, row in _read(folder / "replies.jsonl", problems):
        rid = row.get("id")
        where = f"replies.jsonl:{n} {rid}"
        if not isinstance(rid, str) or not re.fullmatch(r"r\d{4}", rid):
            problems.append(f"{where}: id must look like r0001")
            continue
        if rid in replies:
            problems.append(f"{where}: id repeated")
            continue
        _check_reply(where, row, problems)
        replies[rid] = row
    labels: dict[str, dict[str, Any]] = {}
    for n, lab in _read(folder / labels_name, problems):
        rid = lab.get("id")
        where = f"{labels_name}:{n} {rid}"
        if rid in labels:
            problems.append(f"{where}: labelled twice")
            continue
        if rid not in replies:
            problems.append(f"{where}: no such reply")
            continue
        _check_label(where, lab, replies[rid], problems, gold=labels_name == GOLD)
        labels[str(rid)] = lab
    for rid in sorted(set(replies) - set(labels)):
        problems.append(f"{labels_name}: {rid} not labelled")
    if not any(" not labelled" in p or "keys" in p for p in problems):
        _check_counts(replies, labels, problems)
        if labels_name == GOLD:
            _check_gold_sources(folder, labels, problems)
    return problems


def _check_gold_sources(folder: Path, gold: dict[str, dict[str, Any]], problems: list[str]) -> None:
    """Gold is the two labellers' label where they agree (``agreed``) and a third reading where they
    do not (``adjudicated``)."""
    if not all((folder / name).exists() for name in ("labels-a.jsonl", "labels-b.jsonl")):
        problems.append(f"{GOLD}: gold labels need labels-a.jsonl and labels-b.jsonl beside them")
        return
    a, b = ({lab["id"]: lab for _, lab in _read(folder / name, [])} for name in ("labels-a.jsonl", "labels-b.jsonl"))
    fields = ("kind", "claim", "claim_supported")
    for rid, lab in gold.items():
        agreed = rid in a and rid in b and all(a[rid][f] == b[rid][f] for f in fields)
        if agreed and lab["source"] != "agreed":
            problems.append(f"{GOLD}: {rid}: labellers A and B agree, so source must be 'agreed'")
        if agreed and any(lab[f] != a[rid][f] for f in fields):
            problems.append(f"{GOLD}: {rid}: differs from the label A and B agree on")
        if not agreed and lab["source"] != "adjudicated":
            problems.append(f"{GOLD}: {rid}: labellers A and B disagree, so source must be 'adjudicated'")


def test_shipped_set_is_sound() -> None:
    assert check_reply_set(SET_DIR) == []


def test_second_labeller_when_present() -> None:
    if not (SET_DIR / "labels-b.jsonl").exists():
        pytest.skip("labels-b.jsonl not written yet")
    assert check_reply_set(SET_DIR, "labels-b.jsonl") == []


def test_gold_labels_are_sound() -> None:
    assert check_reply_set(SET_DIR, GOLD) == []


def test_guide_defines_what_labellers_need() -> None:
    guide = (SET_DIR / "GUIDE.md").read_text(encoding="utf-8")
    for needed in (*KINDS, *CLAIMS, "claim_supported", "dev", "test", "Apache-2.0", "which wins", GOLD,
                   "Adjudication rules", "Agreement"):
        assert needed in guide, needed


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _edit_label(n: int, **changes: Any) -> Callable[[list[str], list[str]], None]:
    def edit(_replies: list[str], labels: list[str]) -> None:
        row = json.loads(labels[n])
        row.update(changes)
        labels[n] = json.dumps(row)
    return edit


def _edit_reply(n: int, **changes: Any) -> Callable[[list[str], list[str]], None]:
    def edit(replies: list[str], _labels: list[str]) -> None:
        row = json.loads(replies[n])
        row.update(changes)
        replies[n] = json.dumps(row)
    return edit


def _first(kind: str, claim: str) -> int:
    for n, line in enumerate(_lines(SET_DIR / "labels-a.jsonl")):
        lab = json.loads(line)
        if lab["kind"] == kind and lab["claim"] == claim:
            return n
    raise AssertionError(f"no {kind}/{claim} row")


def _truncate(replies: list[str], labels: list[str]) -> None:
    del replies[300:], labels[300:]


def _all_english(replies: list[str], _labels: list[str]) -> None:
    replies[:] = [line.replace('"lang": "es"', '"lang": "en"') for line in replies]


BROKEN: dict[str, tuple[Callable[[list[str], list[str]], object], str]] = {
    "label dropped": (lambda r, lab: lab.pop(5), "r0006 not labelled"),
    "label repeated": (lambda r, lab: lab.append(lab[0]), "labelled twice"),
    "unknown id": (lambda r, lab: lab.append(json.dumps({**json.loads(lab[0]), "id": "r9999"})), "no such reply"),
    "bad kind": (_edit_label(2, kind="question"), "kind 'question'"),
    "bad claim": (_edit_label(2, claim="maybe", claim_supported=True), "claim 'maybe'"),
    "support without claim": (_edit_label(_first("ask", "none"), claim_supported=False), "must be null"),
    "claim without support": (_edit_label(_first("answer", "action"), claim_supported=None), "true or false"),
    "action backed by nothing": (_edit_label(_first("ask", "none"), claim="action", claim_supported=True),
                                 "no write tool was called"),
    "extra reply key": (_edit_reply(3, speaker="agent"), "keys"),
    "bad split": (_edit_reply(3, split="train"), "split 'train'"),
    "bad call": (_edit_reply(_first("answer", "action"), calls=[{"name": "x"}]), "calls[0]"),
    "not JSON": (lambda r, lab: r.__setitem__(7, r[7][:-3]), "not JSON"),
    "repeated reply id": (lambda r, lab: r.append(r[0]), "id repeated"),
    "too few rows": (_truncate, f"fewer than {MIN_ROWS}"),
    "too few Spanish": (_all_english, "need 40 rows"),
}


def _gold_edit(n: int, **changes: Any) -> Callable[[list[str]], None]:
    def edit(gold: list[str]) -> None:
        row = json.loads(gold[n])
        row.update(changes)
        gold[n] = json.dumps({k: v for k, v in row.items() if v is not None or k == "claim_supported"})
    return edit


def _gold_row(source: str) -> int:
    for n, line in enumerate(_lines(SET_DIR / GOLD)):
        if json.loads(line)["source"] == source:
            return n
    raise AssertionError(f"no {source} row")


BROKEN_GOLD: dict[str, tuple[Callable[[list[str]], object], str]] = {
    "gold row dropped": (lambda g: g.pop(5), "r0006 not labelled"),
    "gold row repeated": (lambda g: g.append(g[0]), "labelled twice"),
    "source missing": (_gold_edit(0, source=None), "keys"),
    "source unknown": (_gold_edit(0, source="guessed"), "source 'guessed'"),
    "adjudicated without note": (_gold_edit(_gold_row("adjudicated"), note=None), "needs a note"),
    "agreed row changed": (_gold_edit(0, kind="none", claim="none", claim_supported=None),
                           "differs from the label A and B agree on"),
    "agreed row called adjudicated": (_gold_edit(0, source="adjudicated", note="x"), "source must be 'agreed'"),
    "disagreement called agreed": (_gold_edit(_gold_row("adjudicated"), source="agreed"),
                                   "source must be 'adjudicated'"),
}


@pytest.mark.parametrize("name", sorted(BROKEN_GOLD))
def test_broken_gold_copy_is_caught(name: str, tmp_path: Path) -> None:
    edit, expected = BROKEN_GOLD[name]
    gold = _lines(SET_DIR / GOLD)
    edit(gold)
    for other in ("replies.jsonl", "labels-a.jsonl", "labels-b.jsonl"):
        (tmp_path / other).write_text((SET_DIR / other).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / GOLD).write_text("\n".join(gold) + "\n", encoding="utf-8")
    problems = check_reply_set(tmp_path, GOLD)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_copy_is_caught(name: str, tmp_path: Path) -> None:
    edit, expected = BROKEN[name]
    replies, labels = _lines(SET_DIR / "replies.jsonl"), _lines(SET_DIR / "labels-a.jsonl")
    edit(replies, labels)
    (tmp_path / "replies.jsonl").write_text("\n".join(replies) + "\n", encoding="utf-8")
    (tmp_path / "labels-a.jsonl").write_text("\n".join(labels) + "\n", encoding="utf-8")
    problems = check_reply_set(tmp_path)
    assert any(expected in p for p in problems), problems


def test_label_agreement_given_a_record_log_as_labels_names_it(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main
    from tests.test_records import shipped_record

    (tmp_path / "replies.jsonl").write_bytes((SET_DIR / "replies.jsonl").read_bytes())
    for name in ("labels-a.jsonl", "labels-b.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(shipped_record(i)) + "\n" for i in range(2)))
    assert main(["label", "agreement", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"tooleffect label agreement: {tmp_path / 'labels-a.jsonl'}: is a tooleffect record log, not a "
                   "reply set's labels (JSON lines of {id, kind, ...}, as the set's GUIDE.md describes them)"), err
