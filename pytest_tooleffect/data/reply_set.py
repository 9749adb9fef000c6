"""The labelled no-tool reply set (``datasets/replies/``): its files read into typed rows, and the
agreement of two labellers on it.

A set folder holds ``replies.jsonl`` (the replies) and one label file per labeller
(``labels-a.jsonl``, ``labels-b.jsonl``) plus the gold labels (``labels-gold.jsonl``); the format is
the one ``datasets/replies/GUIDE.md`` describes.  Agreement is reported per field: ``kind`` (four
categories), ``claim`` (three) and ``claim_supported`` (on the rows both labellers call a claim),
each as raw agreement, Cohen's kappa with its asymptotic 95 % interval
(:func:`pytest_tooleffect.scoring.judge.cohens_kappa`), Krippendorff's alpha (nominal) and the
confusion table.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.jsonl import json_lines
from pytest_tooleffect.util.own_outputs import LABELS, output_kind

__all__ = ["CLAIMS", "KINDS", "AgreementReport", "Call", "FieldAgreement", "Label", "Reply", "ReplySetError",
           "agreement", "field_agreement", "krippendorff_alpha", "read_labels", "read_replies", "render"]

KINDS = ("ask", "refuse", "answer", "none")
CLAIMS = ("none", "action", "result")
SUPPORTED = (True, False)


class ReplySetError(ValueError):
    """A reply set file that is not as the guide has it; the message names the file, line, id and field.

    The message is shown as every output shows text from a data file
    (:func:`pytest_tooleffect.util.display.shown`): an id or a path holding control characters
    reaches the terminal as visible escapes, on one line.
    """

    def __init__(self, message: str) -> None:
        super().__init__(shown(message))


class Call(BaseModel):
    """A tool call made before the reply: ``name``, ``arguments`` and ``result`` (text or JSON text)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    arguments: dict[str, Any]
    result: str


class Reply(BaseModel):
    """One row of ``replies.jsonl``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    id: str = Field(pattern=r"^r\d{4}$")
    lang: str = Field(pattern=r"^[a-z]{2}$")
    domain: str = Field(min_length=1)
    user: str = Field(min_length=1)
    calls: list[Call]
    write_tools: list[str] = Field(min_length=1)
    reply: str
    split: Literal["dev", "test"]


class Label(BaseModel):
    """One labeller's label of one reply (a line of ``labels-*.jsonl``).

    ``source`` and a ``note`` for ``"adjudicated"`` rows are required in the gold file only
    (:func:`read_labels` with ``gold=True``).
    """

    model_config = ConfigDict(extra="forbid", strict=True)
    id: str
    kind: Literal["ask", "refuse", "answer", "none"]
    claim: Literal["none", "action", "result"]
    claim_supported: bool | None
    note: str | None = None
    source: Literal["agreed", "adjudicated"] | None = None

    @model_validator(mode="after")
    def _supported_matches_claim(self) -> Label:
        if self.claim == "none" and self.claim_supported is not None:
            raise ValueError("claim_supported must be null when claim is none")
        if self.claim != "none" and self.claim_supported is None:
            raise ValueError(f"claim_supported must be true or false when claim is {self.claim}")
        return self


def _where(path: Path, n: int, row: Any) -> str:
    rid = row.get("id") if isinstance(row, dict) else None
    return f"{path}:{n}" + (f" {rid}" if rid else "")


def _invalid(where: str, exc: ValidationError, model: type[BaseModel]) -> ReplySetError:
    from pytest_tooleffect.util.known_keys import UNKNOWN_KEY, extra_key_message

    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "row"
    return ReplySetError(f"{where}: {field}: "
                         f"{extra_key_message(model, first) if first['type'] == UNKNOWN_KEY else first['msg']}")


_Row = TypeVar("_Row", bound=BaseModel)


def _rows(path: Path, model: type[_Row]) -> Iterator[tuple[str, _Row]]:
    """Each line of ``path`` validated as ``model``, with where it is (file, line, id).

    Raises:
        ReplySetError: a line that is not JSON or not a ``model`` (names the file, the line, the id and the field).
    """
    for n, row, why in json_lines(path):
        where = _where(path, n, row)
        if why is not None:
            raise ReplySetError(f"{where}: {why}")
        try:
            yield where, model.model_validate(row)
        except ValidationError as exc:
            raise _invalid(where, exc, model) from None


def read_replies(path: Path) -> dict[str, Reply]:
    """The replies of ``replies.jsonl`` by id, in file order.

    Raises:
        ReplySetError: a line that is not JSON or not a reply, or an id given twice (names the file,
            the line, the id and the field).
        OSError: the file cannot be read.
    """
    replies: dict[str, Reply] = {}
    for where, reply in _rows(path, Reply):
        if reply.id in replies:
            raise ReplySetError(f"{where}: id: given twice")
        replies[reply.id] = reply
    return replies


def read_labels(path: Path, replies: Mapping[str, Reply], gold: bool = False) -> dict[str, Label]:
    """One labeller's labels by id: every reply in ``replies`` labelled exactly once.

    Args:
        path: a ``labels-*.jsonl`` file.
        replies: the set's replies (:func:`read_replies`).
        gold: the file is the gold labels: ``source`` is required, and ``note`` on adjudicated rows.

    Raises:
        ReplySetError: another file of the plugin's (a record log, a report: named), a line that is
            not a label, an id labelled twice, unknown or left unlabelled,
            a gold row without its source or note (names the file, the line, the id and the field).
        OSError: the file cannot be read.
    """
    kind = output_kind(path) if path.is_file() else None
    if kind is not None and kind != LABELS:
        raise ReplySetError(f"{path}: is {kind}, not a reply set's labels (JSON lines of {{id, kind, ...}}, as the "
                            "set's GUIDE.md describes them)")
    labels: dict[str, Label] = {}
    for where, label in _rows(path, Label):
        if label.id in labels:
            raise ReplySetError(f"{where}: id: labelled twice")
        if label.id not in replies:
            raise ReplySetError(f"{where}: id: no such reply in replies.jsonl")
        if gold and label.source is None:
            raise ReplySetError(f"{where}: source: required in the gold labels (agreed or adjudicated)")
        if gold and label.source == "adjudicated" and not (label.note or "").strip():
            raise ReplySetError(f"{where}: note: an adjudicated row says why")
        if not gold and label.source is not None:
            raise ReplySetError(f"{where}: source: only the gold labels have one")
        labels[label.id] = label
    missing = [rid for rid in replies if rid not in labels]
    if missing:
        raise ReplySetError(f"{path}: id: {len(missing)} replies not labelled: {', '.join(missing[:5])}"
                            + (" …" if len(missing) > 5 else ""))
    return labels


class FieldAgreement(BaseModel):
    """Two labellers' agreement on one field.

    ``table[i][j]`` counts the rows labeller A put in ``categories[i]`` and labeller B in
    ``categories[j]``.  ``kappa`` is ``None`` when chance alone predicts the table in full (one
    category only); its interval is clipped to [-1, 1], and ``None`` with ``kappa`` and under
    perfect agreement (the asymptotic variance is then zero, computed as a rounding error of
    either sign: there is no interval to give); ``alpha`` is ``None`` when the rows hold one value
    only.
    """

    model_config = ConfigDict(extra="forbid")
    field: str
    categories: list[str]
    n: int
    agreement: float
    kappa: float | None
    kappa_ci95: tuple[float, float] | None
    alpha: float | None
    table: list[list[int]]


class AgreementReport(BaseModel):
    """Agreement of two label files of one reply set: one :class:`FieldAgreement` per field."""

    model_config = ConfigDict(extra="forbid")
    a: str
    b: str
    rows: int
    fields: list[FieldAgreement]


def krippendorff_alpha(pairs: Sequence[tuple[str, str]], categories: Sequence[str]) -> float | None:
    """Krippendorff's alpha, nominal, of two coders with no missing value.

    Computed by the ``krippendorff`` package (the ``labelling`` extra) from the reliability data
    (coders × units); the method is Krippendorff, "Computing Krippendorff's Alpha-Reliability"
    (2011), section A for two coders.

    Args:
        pairs: ``(a's value, b's value)`` per unit.
        categories: every value a coder may give (``krippendorff`` is told them all).

    Returns:
        Alpha in [-1, 1], or ``None`` when every value given is the same (no variation to agree on).

    Raises:
        pytest_tooleffect.util.extras.MissingExtra: ``krippendorff`` is not installed.
    """
    from pytest_tooleffect.util.extras import require

    require("krippendorff", "agreement of a reply set's labellers (Krippendorff's alpha)")
    import krippendorff
    import numpy as np

    if len({v for pair in pairs for v in pair}) < 2:
        return None
    index = {c: i for i, c in enumerate(categories)}
    data = np.array([[index[a] for a, _ in pairs], [index[b] for _, b in pairs]], dtype=float)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal",
                                    value_domain=list(range(len(categories)))))


def field_agreement(field: str, pairs: Sequence[tuple[str, str]], categories: Sequence[str]) -> FieldAgreement:
    """Raw agreement, Cohen's kappa with its 95 % interval (Cohen 1960, the asymptotic variance of
    Fleiss, Cohen and Everitt 1969: :func:`~pytest_tooleffect.scoring.judge.cohens_kappa`),
    Krippendorff's alpha (:func:`krippendorff_alpha`) and the confusion table.

    Args:
        field: the field's name (as reported).
        pairs: ``(a's value, b's value)`` per row; values are ``categories``.
        categories: the field's categories, the table's row and column order.

    Raises:
        ValueError: no pair, or a value that is not one of ``categories``.
    """
    from pytest_tooleffect.scoring.judge import cohens_kappa

    if not pairs:
        raise ValueError(f"{field}: no row to compare")
    index = {c: i for i, c in enumerate(categories)}
    table = [[0] * len(categories) for _ in categories]
    for a, b in pairs:
        if a not in index or b not in index:
            raise ValueError(f"{field}: value {a if a not in index else b!r} is not one of {list(categories)}")
        table[index[a]][index[b]] += 1
    kappa, low, high = cohens_kappa(table)
    known = not math.isnan(kappa)
    agreed = sum(table[i][i] for i in range(len(categories))) / len(pairs)
    interval = known and agreed < 1 and not (math.isnan(low) or math.isnan(high))
    return FieldAgreement(field=field, categories=list(categories), n=len(pairs), agreement=agreed,
                          kappa=kappa if known else None,
                          kappa_ci95=(max(low, -1.0), min(high, 1.0)) if interval else None,
                          alpha=krippendorff_alpha(pairs, categories), table=table)


def agreement(a: Mapping[str, Label], b: Mapping[str, Label], names: tuple[str, str] = ("a", "b")) -> AgreementReport:
    """Agreement of two labellers on the replies both labelled.

    ``kind`` and ``claim`` are compared on every shared row; ``claim_supported`` on the shared
    rows both call a claim (``claim`` not ``none``), whatever kind of claim each saw.

    Raises:
        ValueError: the two share no row.
    """
    shared = [rid for rid in a if rid in b]
    if not shared:
        raise ValueError(f"{names[0]} and {names[1]} share no reply id")
    claimed = [rid for rid in shared if a[rid].claim != "none" and b[rid].claim != "none"]
    fields = [field_agreement("kind", [(a[r].kind, b[r].kind) for r in shared], KINDS),
              field_agreement("claim", [(a[r].claim, b[r].claim) for r in shared], CLAIMS)]
    if claimed:
        fields.append(field_agreement("claim_supported", [(str(a[r].claim_supported).lower(),
                                                           str(b[r].claim_supported).lower()) for r in claimed],
                                      ("true", "false")))
    return AgreementReport(a=names[0], b=names[1], rows=len(shared), fields=fields)


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def render(report: AgreementReport) -> str:
    """The report as text: a line of figures per field, then each field's confusion table (rows A, columns B)."""
    lines = [f"{report.a} vs {report.b}: {report.rows} replies", "",
             "| field | n | raw agreement | Cohen's κ (95 % CI) | Krippendorff's α |",
             "|-------|---|---------------|---------------------|------------------|"]
    for f in report.fields:
        ci = (f" ({f.kappa_ci95[0]:.3f} to {f.kappa_ci95[1]:.3f})" if f.kappa_ci95
              else " (no interval: perfect agreement)" if f.agreement == 1 else "")
        lines.append(f"| {f.field} | {f.n} | {f.agreement:.3f} | {_num(f.kappa)}{ci} | {_num(f.alpha)} |")
    for f in report.fields:
        lines += ["", f"{f.field} (rows {report.a}, columns {report.b}):", "",
                  "| | " + " | ".join(f.categories) + " |", "|---" * (len(f.categories) + 1) + "|"]
        lines += [f"| {c} | " + " | ".join(str(x) for x in row) + " |" for c, row in zip(f.categories, f.table)]
    return "\n".join(lines)
