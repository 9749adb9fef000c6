"""Agreement of the reply set's labellers (pytest_tooleffect.data.reply_set, ``tooleffect label agreement``):
figures checked against hand-computed ones on fixed tiny inputs, the readers' errors, and the command
run on the shipped set (datasets/replies/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.data.reply_set import (
    Label,
    ReplySetError,
    agreement,
    field_agreement,
    krippendorff_alpha,
    read_labels,
    read_replies,
)

SET_DIR = Path(__file__).resolve().parents[1] / "datasets" / "replies"


def test_binary_example_of_krippendorff_2011() -> None:
    # Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), section A (binary data, two
    # observers, no missing data): Ben 0100000010, Gerry 1110010000; the paper gives alpha = 0.095.
    # Coincidences: o00 = 10, o01 = o10 = 4, o11 = 2; n0 = 14, n1 = 6, n = 20;
    # alpha = 1 - (n - 1) o01 / (n0 n1) = 1 - 19 * 4 / 84 = 8 / 84.
    ben, gerry = "0100000010", "1110010000"
    res = field_agreement("x", list(zip(ben, gerry, strict=True)), ("0", "1"))
    assert res.alpha is not None and round(res.alpha, 3) == 0.095
    assert res.alpha == pytest.approx(8 / 84)
    # Cohen's kappa by hand: table [[5, 3], [1, 1]] (rows Ben); p_o = 6/10; Ben's marginals .8/.2,
    # Gerry's .6/.4, p_e = .8 * .6 + .2 * .4 = .56; kappa = (.6 - .56) / (1 - .56) = 1/11
    assert res.table == [[5, 3], [1, 1]]
    assert res.agreement == pytest.approx(0.6)
    assert res.kappa == pytest.approx(1 / 11)
    assert res.kappa_ci95 is not None and res.kappa_ci95[0] < 1 / 11 < res.kappa_ci95[1]


def test_three_categories_by_hand() -> None:
    # units (a,a) (a,b) (b,b) (b,b) (c,c) (c,a), a fourth category never used
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("b", "b"), ("c", "c"), ("c", "a")]
    res = field_agreement("x", pairs, ("a", "b", "c", "d"))
    assert res.table == [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]]
    # kappa: p_o = 4/6; marginals A 1/3 each of a, b, c; B 2/6, 3/6, 1/6; p_e = 1/3; kappa = (2/3 - 1/3) / (2/3)
    assert res.kappa == pytest.approx(0.5)
    # alpha (Krippendorff 2011, nominal): n_a = 4, n_b = 5, n_c = 3, n = 12, off-diagonal coincidences 4;
    # alpha = 1 - (n - 1) * 4 / (n^2 - sum n_c^2) = 1 - 11 * 4 / (144 - 50) = 50/94
    assert res.alpha == pytest.approx(50 / 94)


def test_perfect_and_single_value_agreement() -> None:
    res = field_agreement("x", [("a", "a"), ("b", "b"), ("a", "a")], ("a", "b"))
    assert res.agreement == 1.0 and res.kappa == pytest.approx(1.0) and res.alpha == pytest.approx(1.0)
    assert res.kappa_ci95 is None  # the asymptotic variance of a perfect table is zero: no interval
    same = field_agreement("x", [("a", "a")] * 3, ("a", "b"))
    assert same.kappa is None and same.kappa_ci95 is None and same.alpha is None
    assert krippendorff_alpha([("a", "a")], ("a", "b")) is None
    with pytest.raises(ValueError, match="'z' is not one of"):
        field_agreement("x", [("a", "z")], ("a", "b"))


def _lab(rid: str, kind: str, claim: str = "none", supported: bool | None = None) -> Label:
    return Label(id=rid, kind=kind, claim=claim, claim_supported=supported)  # type: ignore[arg-type]


def test_claim_supported_is_compared_where_both_see_a_claim() -> None:
    a = {"r1": _lab("r1", "ask", "result", True), "r2": _lab("r2", "answer", "action", False),
         "r3": _lab("r3", "none"), "r4": _lab("r4", "refuse", "result", True)}
    b = {"r1": _lab("r1", "ask", "action", True), "r2": _lab("r2", "answer", "action", True),
         "r3": _lab("r3", "none", "result", False), "r4": _lab("r4", "ask")}
    rep = agreement(a, b)
    fields = {f.field: f for f in rep.fields}
    assert rep.rows == 4 and fields["kind"].agreement == 0.75 and fields["claim"].agreement == 0.25
    supported = fields["claim_supported"]
    assert supported.n == 2 and supported.table == [[1, 0], [1, 0]]  # r1 agree true; r2 A false, B true
    with pytest.raises(ValueError, match="share no reply id"):
        agreement(a, {"r9": _lab("r9", "none")})


def _copy_set(tmp_path: Path, labels: list[str]) -> tuple[Path, Path]:
    (tmp_path / "replies.jsonl").write_text((SET_DIR / "replies.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    path = tmp_path / "labels-x.jsonl"
    path.write_text("\n".join(labels) + "\n", encoding="utf-8")
    return tmp_path / "replies.jsonl", path


def _edited(n: int, **changes: object) -> list[str]:
    lines = (SET_DIR / "labels-a.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[n])
    row.update(changes)
    lines[n] = json.dumps(row)
    return lines


@pytest.mark.parametrize(("lines", "gold", "expected"), [
    (_edited(2, kind="question"), False, r"labels-x.jsonl:3 r0003: kind: "),
    (_edited(0, claim="none", claim_supported=True), False, r":1 r0001: row: Value error, claim_supported must be null"),
    (_edited(0, id="r9999"), False, r":1 r9999: id: no such reply"),
    (_edited(0, nots="x"), False, r":1 r0001: nots: unknown key \(did you mean 'note'\?\)"),  # a misspelt key
    (_edited(1, id="r0001"), False, r":2 r0001: id: labelled twice"),
    (_edited(0, source="agreed"), False, r":1 r0001: source: only the gold labels"),
    ((SET_DIR / "labels-a.jsonl").read_text(encoding="utf-8").splitlines()[1:], False, r"1 replies not labelled: r0001"),
    ((SET_DIR / "labels-a.jsonl").read_text(encoding="utf-8").splitlines(), True, r":1 r0001: source: required"),
    (_edited(0, source="adjudicated"), True, r":1 r0001: note: an adjudicated row says why"),
])
def test_bad_label_files_are_named(tmp_path: Path, lines: list[str], gold: bool, expected: str) -> None:
    replies_path, labels_path = _copy_set(tmp_path, lines)
    with pytest.raises(ReplySetError, match=expected):
        read_labels(labels_path, read_replies(replies_path), gold=gold)


def _files(name: str) -> dict[str, dict[str, object]]:
    rows = (json.loads(line) for line in (SET_DIR / name).read_text(encoding="utf-8").splitlines())
    return {str(r["id"]): r for r in rows}


def test_command_on_the_shipped_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["label", "agreement", str(SET_DIR), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    a, b = _files("labels-a.jsonl"), _files("labels-b.jsonl")
    fields = {f["field"]: f for f in report["fields"]}
    assert report["rows"] == len(a) == len(_files("replies.jsonl"))
    for field in ("kind", "claim"):
        same = sum(a[i][field] == b[i][field] for i in a)
        assert fields[field]["agreement"] == pytest.approx(same / len(a))
        assert sum(map(sum, fields[field]["table"])) == len(a)
    claimed = [i for i in a if a[i]["claim"] != "none" and b[i]["claim"] != "none"]
    assert fields["claim_supported"]["n"] == len(claimed)
    for f in report["fields"]:
        assert f["kappa"] is not None and -1 <= f["alpha"] <= 1
        assert f["kappa_ci95"] is None or f["kappa_ci95"][0] <= f["kappa"] <= f["kappa_ci95"][1] <= 1
    # the text form, and the gold labels as one side
    assert main(["label", "agreement", str(SET_DIR), "--b", "labels-gold.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "labels-a.jsonl vs labels-gold.jsonl: " in out and "| kind | " in out and "Krippendorff" in out


def test_command_refuses_a_bad_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["label", "agreement", str(tmp_path / "nowhere")]) == 2
    assert "give one reply set folder" in capsys.readouterr().err
    _copy_set(tmp_path, _edited(2, kind="question"))
    (tmp_path / "labels-x.jsonl").rename(tmp_path / "labels-a.jsonl")
    (tmp_path / "labels-b.jsonl").write_text((SET_DIR / "labels-b.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["label", "agreement", str(tmp_path)]) == 2
    assert "labels-a.jsonl:3 r0003: kind:" in capsys.readouterr().err


def test_a_control_character_in_an_id_reaches_the_terminal_escaped(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # an id from a label file is text from a data file: shown as the run shows it (util/display.py)
    forged = "r0001\x1b]0;PWN\x07"
    with pytest.raises(ReplySetError) as raised:
        read_labels(_copy_set(tmp_path, _edited(0, id=forged))[1], read_replies(tmp_path / "replies.jsonl"))
    assert "\x1b" not in str(raised.value) and "\x07" not in str(raised.value)
    assert r"r0001\x1b]0;PWN\x07: id: no such reply" in str(raised.value)
    (tmp_path / "labels-x.jsonl").rename(tmp_path / "labels-b.jsonl")
    (tmp_path / "labels-a.jsonl").write_text((SET_DIR / "labels-a.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["label", "agreement", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and r"labels-b.jsonl:1 r0001\x1b]0;PWN\x07: id:" in err


def test_the_same_label_file_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a file against itself agrees perfectly and measures nothing, by its name or by another path to it
    for name in ("replies.jsonl", "labels-a.jsonl"):
        (tmp_path / name).write_text((SET_DIR / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "labels-link.jsonl").symlink_to(tmp_path / "labels-a.jsonl")
    for other in ("labels-a.jsonl", "./labels-a.jsonl", "sub/../labels-a.jsonl", "labels-link.jsonl",
                  str(tmp_path / "labels-a.jsonl")):
        assert main(["label", "agreement", str(tmp_path), "--b", other]) == 2
        err = capsys.readouterr().err
        assert "are the same file" in err, other
    assert main(["label", "agreement", str(SET_DIR), "--a", "labels-a.jsonl", "--b", "labels-b.jsonl"]) == 0
