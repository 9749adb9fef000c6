"""``tooleffect calibrate-replies``: the reply checks measured against the labelled reply set."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["JudgeProgress", "cmd_calibrate_replies"]


class JudgeProgress:
    """The judge pass's progress on stderr, so a long pass is never silent: one line
    ``judge: 40 of 276 replies (120 of 828 questions), 35 s`` every ``every`` questions or every
    ``period`` seconds, whichever comes first, and one when the last question is answered.

    Args:
        stream: where the lines go (the command's stderr).
        every: questions between two lines at most.
        period: seconds between two lines at most.
        clock: seconds, monotonic (``time.monotonic``).
    """

    def __init__(self, stream: TextIO, every: int = 30, period: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.every, self.period, self.clock = stream, every, period, clock
        self.start = self.last = clock()
        self.shown = 0

    def __call__(self, asked: int, questions: int, replies: int) -> None:
        """Note that ``asked`` of ``questions`` questions (about ``replies`` replies) are answered."""
        now = self.clock()
        if asked < questions and asked - self.shown < self.every and now - self.last < self.period:
            return
        self.shown, self.last = asked, now
        done = asked * replies // questions if questions else 0
        print(f"judge: {done} of {replies} replies ({asked} of {questions} questions), {now - self.start:.0f} s",
              file=self.stream, flush=True)


def cmd_calibrate_replies(args: argparse.Namespace) -> int:
    """Precision, recall and F1 per reply kind (the deterministic fallback) and of the phantom-action
    check on one split of a labelled reply set, each with its Wilson 95 % interval; with
    ``--judge-model``, the LLM judge's Cohen's kappa against the labels per kind, with its cost.
    Printed as Markdown tables and written as JSON to ``--out``.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when written; 2 for a missing or malformed set, a ``--cache`` that is not
        a folder, or a judge whose provider fails (the first failure, or every answer unreadable:
        named on stderr, nothing written).  ``--out`` naming one of the set's files (the replies,
        a labels file) is refused, ``--force`` or not.  Messages show the set's text as the run does
        (:func:`pytest_tooleffect.util.display.shown`).
    """
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.data.reply_scores import (
        format_figures,
        in_split,
        judge_agreement,
        judged_rows,
        load_reply_set,
        measure,
        to_json,
        word_agreement,
    )
    from pytest_tooleffect.util.display import shown
    from pytest_tooleffect.util.own_outputs import REPLY_CALIBRATION

    folder = Path(args.folder)
    reads: list[tuple[str, Path | None]] = [("the reply set", folder)]
    if folder.is_dir():  # every file of the set: its replies and every labeller's labels
        reads += [(f"a file of the reply set {folder}", p) for p in sorted(folder.iterdir()) if p.is_file()]
    if args.labels:
        reads.append(("the reply set's labels", folder / args.labels))
    check_command_outputs([("--out", Path(args.out))], reads, force=args.force, kinds={"--out": REPLY_CALIBRATION})
    if args.cache and Path(args.cache).exists() and not Path(args.cache).is_dir():
        print(shown(f"tooleffect calibrate-replies: --cache {args.cache}: not a folder; give a folder for the "
                    "cached verdicts (made when missing)"), file=sys.stderr)
        return 2
    split = None if args.split == "all" else args.split
    try:
        rows = load_reply_set(folder, args.labels)
    except ValueError as exc:
        print(shown(f"tooleffect calibrate-replies: {exc}"), file=sys.stderr)
        return 2
    try:
        chosen = [r for r in rows if in_split(r, split)]
    except ValueError as exc:
        print(shown(f"tooleffect calibrate-replies: --split: {exc}"), file=sys.stderr)
        return 2
    figures = measure(rows, split)
    print(format_figures(figures, f"reply fallback and phantom-action check on {folder}, split={args.split}, "
                                  f"n={len(chosen)}"))
    result: dict[str, Any] = {"kind": "tooleffect-reply-calibration", "set": str(folder), "split": args.split,
                              "n": len(chosen), "fallback": to_json(figures)}
    if args.judge_model:
        from pytest_tooleffect.scoring.judge import Judge, JudgeError

        judge = Judge(args.judge_model, args.api_base, Path(args.cache) if args.cache else None,
                      timeout_s=args.judge_timeout, max_tokens=args.judge_max_tokens)
        asked: Any = judge
        if getattr(args, "judge_format", "rubric") == "kind-word":
            from pytest_tooleffect.scoring.kind_judge import KindWordJudge

            asked = KindWordJudge(judge)
        try:
            agreement = judge_agreement(rows, asked, split, args.judge_limit, progress=JudgeProgress(sys.stderr))
        except JudgeError as exc:  # a provider failure is an error, never a measurement: nothing written
            print(shown(f"tooleffect calibrate-replies: {exc}; nothing written"), file=sys.stderr)
            return 2
        agreement["usage"] = judge.usage.to_dict()
        agreement["format"] = getattr(args, "judge_format", "rubric")
        if agreement["format"] == "kind-word":  # the four kinds at once: the word against the label
            agreement["words"] = word_agreement(judged_rows(rows, split, args.judge_limit), asked.words)
        result["judge"] = agreement
        each = "1 question each" if agreement["format"] == "kind-word" else "3 questions each"
        print(f"\njudge {asked.model} on {agreement['n_replies']} replies ({each}):")
        for kind, k in {**agreement["kinds"], "all": agreement["all"]}.items():
            ci = k["kappa_ci95"]
            interval = "no interval: one side never varies" if ci is None else f"95 % CI {_num(ci[0])} to {_num(ci[1])}"
            fig = k.get("figure")
            pr = "" if fig is None else (f", precision {_num(fig['precision'])}, recall {_num(fig['recall'])}")
            print(f"  {kind}: agreement {_num(k['agreement'])}, Cohen's kappa {_num(k['kappa'])} ({interval}){pr}")
        if "words" in agreement:
            w = agreement["words"]
            ci = w["kappa_ci95"]
            interval = "no interval: one side never varies" if ci is None else f"95 % CI {_num(ci[0])} to {_num(ci[1])}"
            print(f"  the word against the label (4 kinds, {w['n']} replies): agreement {_num(w['agreement'])}, "
                  f"Cohen's kappa {_num(w['kappa'])} ({interval})")
        usage = judge.usage
        cost = "unknown" if usage.cost_usd is None else f"{usage.cost_usd:.4f} USD"
        print(f"  answers that could not be read (left out): {len(agreement['errors'])}")
        unknown = f"; tokens unknown for {usage.tokens_unknown} calls (no usage reported), not added" \
            if usage.tokens_unknown else ""
        for what, k in (("input", usage.input_tokens_unknown), ("output", usage.output_tokens_unknown)):
            if k > usage.tokens_unknown:  # calls that reported a usage without that count
                unknown += f"; {what} tokens unknown for {k - usage.tokens_unknown} more calls, not added"
        print(f"  spent: {usage.calls} calls ({usage.cached} cached), {usage.input_tokens} input and "
              f"{usage.output_tokens} output tokens{unknown}, {cost}")
    result["measured_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"written to {out}")
    return 0


def _num(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x:.3f}"
