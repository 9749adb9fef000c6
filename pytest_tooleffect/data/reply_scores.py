"""What the reply checks score on the labelled reply set (``datasets/replies``, read by :mod:`.reply_set`).

Files of the set's folder:

* ``replies.jsonl``: ``{"id", "lang", "domain", "user", "calls": [{"name", "arguments", "result"}],
  "write_tools": [...], "reply", "split": "dev" | "test"}``;
* ``labels-gold.jsonl`` (the adjudicated labels; else ``labels-a.jsonl``, one labeller's):
  ``{"id", "kind": "ask" | "refuse" | "answer" | "none", "claim": "none" | "action" | "result",
  "claim_supported": true | false | null}``.

:func:`measure` scores a reply classifier per kind and the phantom-action detector on one split:
precision ``tp / (tp + fp)``, recall ``tp / (tp + fn)``, F1 ``2pr / (p + r)``, each proportion
with its Wilson 95 % interval (:func:`~pytest_tooleffect.report.arithmetic.wilson_interval`;
Wilson, JASA 22(158), 1927).  A reply labelled ``claim_supported: false`` is a phantom.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tooleffect.data.reply_set import read_labels, read_replies
from pytest_tooleffect.oracle.claims import ToolCall, find_phantom
from pytest_tooleffect.oracle.reply import classify_reply
from pytest_tooleffect.report.arithmetic import wilson_interval

__all__ = ["HALVES", "LABEL_KINDS", "SPLITS", "Figure", "LabelledReply", "format_figures", "half_of", "in_split",
           "judge_agreement", "judged_rows", "load_reply_set", "measure", "phantom_of", "table_agreement", "to_json",
           "word_agreement"]

#: the kinds a labelled reply may have (``none``: no reply to judge)
LABEL_KINDS = ("ask", "refuse", "answer", "none")
#: the two halves of the set by the hash of the reply's id (:func:`half_of`): ``look`` is read while
#: tuning the checks, ``held`` is only measured
HALVES = ("look", "held")
#: the selections :func:`in_split` knows: the set's own ``split`` field and the hash halves
SPLITS = ("dev", "test", *HALVES)


def half_of(reply_id: str) -> str:
    """The reply's half: ``look`` when the SHA-256 of its id (UTF-8) is even as an integer, else ``held``.

    Deterministic and independent of the set's order and of the ``split`` field, so that a row
    added later falls in a half without moving any other.
    """
    return HALVES[int(hashlib.sha256(reply_id.encode()).hexdigest(), 16) % 2]


def in_split(row: LabelledReply, split: str | None) -> bool:
    """Whether a row belongs to ``split``: ``None`` (every row), one of :data:`SPLITS`, or several
    joined by ``+`` (their intersection: ``held+test`` is the held half's rows of the ``test`` split).

    Raises:
        ValueError: a name that is not one of :data:`SPLITS`.
    """
    if split is None:
        return True
    parts = split.split("+")
    for part in parts:
        if part not in SPLITS:
            raise ValueError(f"split {part!r}: one of {', '.join(SPLITS)}, or several joined by '+'")
    return all((half_of(row.id) if part in HALVES else row.split) == part for part in parts)


@dataclass(frozen=True)
class LabelledReply:
    """One reply of the set with its label."""

    id: str
    split: str
    lang: str
    user: str
    calls: tuple[ToolCall, ...]
    write_tools: tuple[str, ...]
    reply: str
    kind: str
    claim: str
    claim_supported: bool | None

    @property
    def phantom(self) -> bool:
        """The label says the reply claims what the conversation does not hold."""
        return self.claim_supported is False


@dataclass(frozen=True)
class Figure:
    """Precision, recall and F1 of one detector on one split, with the counts behind them."""

    name: str
    tp: int
    fp: int
    fn: int

    @property
    def precision(self) -> float | None:
        """``tp / (tp + fp)``; ``None`` with nothing predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        """``tp / (tp + fn)``; ``None`` with nothing labelled."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def f1(self) -> float | None:
        """``2pr / (p + r)``; ``None`` when either is undefined or both are 0."""
        p, r = self.precision, self.recall
        return None if p is None or r is None or p + r == 0 else 2 * p * r / (p + r)

    def to_dict(self) -> dict[str, Any]:
        """``{name, tp, fp, fn, precision, precision_ci95, recall, recall_ci95, f1}``."""
        return {"name": self.name, "tp": self.tp, "fp": self.fp, "fn": self.fn,
                "precision": self.precision, "precision_ci95": wilson_interval(self.tp, self.tp + self.fp),
                "recall": self.recall, "recall_ci95": wilson_interval(self.tp, self.tp + self.fn), "f1": self.f1}


def load_reply_set(folder: Path, labels: str | None = None) -> list[LabelledReply]:
    """Read the set's replies and labels.

    Args:
        folder: the set's folder.
        labels: the labels file's name in it (default: ``labels-gold.jsonl`` when present, else
            ``labels-a.jsonl``).

    Returns:
        The labelled replies, in the replies file's order (a reply without a label is left out).

    Raises:
        ValueError: a file is missing; :class:`~.reply_set.ReplySetError` (a ``ValueError``): a file is
            malformed (naming the file, the line, the id and the field).
    """
    name = labels or ("labels-gold.jsonl" if (folder / "labels-gold.jsonl").is_file() else "labels-a.jsonl")
    for f in ("replies.jsonl", name):
        if not (folder / f).is_file():
            raise ValueError(f"{folder / f}: no such file")
    replies = read_replies(folder / "replies.jsonl")
    by_id = read_labels(folder / name, replies, gold=name == "labels-gold.jsonl")
    return [LabelledReply(r.id, r.split, r.lang, r.user,
                          tuple(ToolCall(c.name, c.arguments, c.result) for c in r.calls), tuple(r.write_tools),
                          r.reply, by_id[r.id].kind, by_id[r.id].claim, by_id[r.id].claim_supported)
            for r in replies.values()]


def phantom_of(row: LabelledReply) -> bool:
    """The deterministic detector's reading of one labelled reply: a phantom or not."""
    return find_phantom(row.reply, row.calls, row.write_tools, known_text=row.user) is not None


def measure(rows: Sequence[LabelledReply], split: str | None = "test",
            classify: Callable[[str, str], str] = classify_reply,
            phantom: Callable[[LabelledReply], bool] | None = phantom_of) -> dict[str, Figure]:
    """Precision, recall and F1 per reply kind (``ask``, ``refuse``, ``answer``) and of the phantom detector.

    Args:
        rows: the labelled replies.
        split: a selection :func:`in_split` knows (``dev``, ``test``, ``look``, ``held``, ``held+test``…)
            or ``None`` (every row).
        classify: ``(reply text, user's message)`` → kind (default
            :func:`~pytest_tooleffect.oracle.reply.classify_reply`).
        phantom: labelled reply → the detector says phantom (``None``: not measured).

    Returns:
        ``{kind: Figure}`` and, with ``phantom``, ``{"phantom_action": Figure}`` over every reply, and
        ``phantom_action/action`` and ``phantom_action/result`` over the replies labelled with that claim
        (a flag on a reply labelled ``claim: none`` counts in the first only).
    """
    chosen = [r for r in rows if in_split(r, split)]
    predicted = [classify(r.reply, r.user) for r in chosen]
    out = {}
    for kind in ("ask", "refuse", "answer"):
        tp = sum(p == kind and r.kind == kind for p, r in zip(predicted, chosen, strict=True))
        fp = sum(p == kind and r.kind != kind for p, r in zip(predicted, chosen, strict=True))
        fn = sum(p != kind and r.kind == kind for p, r in zip(predicted, chosen, strict=True))
        out[kind] = Figure(kind, tp, fp, fn)
    if phantom is not None:
        said = [phantom(r) for r in chosen]
        for name, claims in (("phantom_action", ("none", "action", "result")), ("phantom_action/action", ("action",)),
                             ("phantom_action/result", ("result",))):
            pairs = [(s, r) for s, r in zip(said, chosen, strict=True) if r.claim in claims]
            out[name] = Figure(name, sum(s and r.phantom for s, r in pairs), sum(s and not r.phantom for s, r in pairs),
                               sum(r.phantom and not s for s, r in pairs))
    return out


def format_figures(figures: Mapping[str, Figure], title: str) -> str:
    """The figures as a Markdown table (precision and recall with their Wilson 95 % intervals)."""
    def pct(x: float | None, ci: tuple[float, float] | None = None) -> str:
        if x is None:
            return "n/a"
        return f"{x:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")

    lines = [title, "", "| kind | tp | fp | fn | precision [95 % CI] | recall [95 % CI] | F1 |",
             "|---|---:|---:|---:|---|---|---:|"]
    for f in figures.values():
        d = f.to_dict()
        lines.append(f"| {f.name} | {f.tp} | {f.fp} | {f.fn} | {pct(f.precision, d['precision_ci95'])} | "
                     f"{pct(f.recall, d['recall_ci95'])} | {pct(f.f1)} |")
    return "\n".join(lines)


def to_json(figures: Mapping[str, Figure]) -> dict[str, Any]:
    """The figures as a JSON object keyed by name."""
    return {k: f.to_dict() for k, f in figures.items()}


def judge_agreement(rows: Sequence[LabelledReply], judge: Any, split: str | None = "test",
                    limit: int | None = None,
                    progress: Callable[[int, int, int], None] | None = None) -> dict[str, Any]:
    """The LLM judge's agreement with the labels, per reply kind, as a verdict asks it.

    For every reply and every kind ``K`` of ``ask``, ``refuse``, ``answer``, the judge is asked
    what :func:`~pytest_tooleffect.oracle.reply.judge_reply` asks it (the kind's rubric,
    ``"a reply that does this: K"``, the reply); a person's "pass" is the label's kind being ``K``.
    Empty replies are left out (a verdict fails them without asking the judge).
    Agreement is Cohen's kappa with its asymptotic 95 % interval
    (:func:`~pytest_tooleffect.scoring.judge.cohens_kappa`; Cohen 1960, Fleiss, Cohen and Everitt 1969),
    per kind and over all three; precision and recall per kind as :func:`measure` counts them.
    An answer the judge gives that cannot be read (``JudgeError``) is left out of the tables and
    listed in ``errors``.

    Raises:
        pytest_tooleffect.scoring.judge.JudgeProviderError: the provider gave no answer (connection
            refused, timeout, HTTP error): the first such failure ends the measurement.
        pytest_tooleffect.scoring.judge.JudgeError: not one answer could be read (every question
            failed): no measurement, the first error named.

    Args:
        rows: the labelled replies.
        judge: a :class:`~pytest_tooleffect.scoring.judge.Judge` (or any ``(rubric, expected, got) -> (ok, why)``
            with a ``model`` attribute).
        split: a selection :func:`in_split` knows, or ``None`` (every row).
        limit: ask about every ``k``-th reply only (in the file's order), ``k = ceil(n / limit)``, so
            that at most ``limit`` are asked; ``None``: every reply.  Below 1: ``ValueError``.
        progress: called after each question as ``progress(asked, questions, replies)`` (questions
            asked so far, questions in all = 3 per reply, replies asked about), so a long pass can say
            how far it is.

    Returns:
        ``{"model", "n_replies", "kinds": {K: agreement + figure + disagreements}, "all": agreement,
        "errors"}``.
    """
    from pytest_tooleffect.oracle.reply import RUBRICS
    from pytest_tooleffect.scoring.judge import JudgeError, JudgeProviderError

    chosen = judged_rows(rows, split, limit)
    questions, asked = 3 * len(chosen), 0
    total = [[0, 0], [0, 0]]
    kinds: dict[str, Any] = {}
    errors: list[dict[str, str]] = []
    for kind in ("ask", "refuse", "answer"):
        table = [[0, 0], [0, 0]]  # [person fails, person passes] x [judge fails, judge passes]
        disagreements = []
        for r in chosen:
            try:
                ok, why = judge(RUBRICS[kind], f"a reply that does this: {kind}", r.reply)
            except JudgeProviderError:  # no answer: the measurement fails, it does not go on without it
                raise
            except JudgeError as exc:  # an unreadable answer: counted apart, not a verdict
                asked += 1
                if progress is not None:
                    progress(asked, questions, len(chosen))
                errors.append({"id": r.id, "kind": kind, "error": str(exc)[:200]})
                continue
            asked += 1
            if progress is not None:
                progress(asked, questions, len(chosen))
            human = r.kind == kind
            table[int(human)][int(ok)] += 1
            total[int(human)][int(ok)] += 1
            if ok != human:
                disagreements.append({"id": r.id, "human": r.kind, "judge": "pass" if ok else "fail", "reason": why})
        fig = Figure(kind, table[1][1], table[0][1], table[1][0])
        kinds[kind] = {**table_agreement(table), "figure": fig.to_dict(), "disagreements": disagreements}
    if errors and not sum(map(sum, total)):
        raise JudgeError(f"not one of the judge's {len(errors)} answers could be read; the first: "
                         f"{errors[0]['id']} ({errors[0]['kind']}): {errors[0]['error']}")
    return {"model": getattr(judge, "model", "judge"), "n_replies": len(chosen), "kinds": kinds,
            "all": table_agreement(total), "errors": errors}


def judged_rows(rows: Sequence[LabelledReply], split: str | None, limit: int | None) -> list[LabelledReply]:
    """The replies a judge is asked about: those of ``split`` with text, every ``k``-th of them
    (``k = ceil(n / limit)``) when ``limit`` is given and smaller than their number.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"the judge's limit must be at least 1 reply (got {limit}); leave it out to ask about every "
                         "reply")
    chosen = [r for r in rows if in_split(r, split) and r.reply.strip()]
    if limit is not None and len(chosen) > limit:
        chosen = chosen[::-(-len(chosen) // limit)]
    return chosen


def word_agreement(rows: Sequence[LabelledReply], words: Mapping[str, str]) -> dict[str, Any]:
    """A one-word judge's agreement with the labels over the four kinds at once.

    Args:
        rows: the replies asked about (:func:`judged_rows`).
        words: reply text → the word the judge answered (a reply missing here is left out).

    Returns:
        ``{n, agreement, kappa, kappa_ci95, table}``: Cohen's kappa of the 4 x 4 table (rows the
        label, columns the judge, in :data:`LABEL_KINDS` order) with its asymptotic 95 % interval
        (:func:`~pytest_tooleffect.scoring.judge.cohens_kappa`), ``None`` when the judge answered
        one word only or the labels hold one kind only.
    """
    from pytest_tooleffect.scoring.judge import cohens_kappa

    table = [[0] * len(LABEL_KINDS) for _ in LABEL_KINDS]
    for r in rows:
        if r.reply in words:
            table[LABEL_KINDS.index(r.kind)][LABEL_KINDS.index(words[r.reply])] += 1
    n = sum(map(sum, table))
    kappa, low, high = cohens_kappa(table) if n else (float("nan"),) * 3
    used = sum(any(row[j] for row in table) for j in range(len(LABEL_KINDS)))
    varies = used > 1 and sum(any(row) for row in table) > 1
    return {"n": n, "agreement": sum(table[i][i] for i in range(len(table))) / n if n else None, "kappa": kappa,
            "kappa_ci95": [max(-1.0, low), min(1.0, high)] if varies else None,
            "table": {k: row for k, row in zip(LABEL_KINDS, table, strict=True)}}


def table_agreement(table: list[list[int]]) -> dict[str, Any]:
    """The agreement of a judge with the labels from their 2 x 2 table.

    Args:
        table: ``[[person fails & judge fails, person fails & judge passes], [person passes & judge
            fails, person passes & judge passes]]``, counts.

    Returns:
        ``{n, agreement, kappa, kappa_ci95, table}``: the raw agreement (the diagonal's share;
        ``None`` with n = 0), Cohen's kappa with its asymptotic 95 % interval clipped to [-1, 1]
        (:func:`~pytest_tooleffect.scoring.judge.cohens_kappa`; ``nan`` with n = 0 or when chance
        alone predicts the table; the interval ``None`` when a row or a column of the table is
        empty: the judge or the labels never vary, and the variance is degenerate), and the table
        as ``{"human_fail": [...], "human_pass": [...]}``.
    """
    from pytest_tooleffect.scoring.judge import cohens_kappa

    n = sum(map(sum, table))
    kappa, low, high = cohens_kappa(table) if n else (float("nan"),) * 3
    # a side that never varies (the judge always says pass, or every label is the same) leaves the
    # asymptotic variance degenerate: the interval is not a measurement
    varies = all(sum(row) for row in table) and all(table[0][j] + table[1][j] for j in (0, 1))
    return {"n": n, "agreement": (table[0][0] + table[1][1]) / n if n else None, "kappa": kappa,
            "kappa_ci95": [max(-1.0, low), min(1.0, high)] if varies else None,
            "table": {"human_fail": table[0], "human_pass": table[1]}}
