"""``tooleffect label agreement FOLDER``: the agreement of a reply set's two labellers
(:mod:`pytest_tooleffect.data.reply_set`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["cmd_reply_agreement"]


def cmd_reply_agreement(args: argparse.Namespace) -> int:
    """``tooleffect label agreement FOLDER [--a FILE] [--b FILE] [--json]``: read the reply set in
    FOLDER (``replies.jsonl`` and two label files, by default ``labels-a.jsonl`` and
    ``labels-b.jsonl``) and print each field's agreement, as a table or as JSON.

    Args:
        args: the parsed command line (``files``: one folder).

    Returns:
        The exit status: 0 when printed; 2 for not exactly one folder, a file missing or not as
        the set's guide has it (the file, line, id and field on stderr), or the same label file
        given as both labellers (by another path too: the agreement of a file with itself is no
        measurement).  Every message shows the set's text as the run does
        (:func:`pytest_tooleffect.util.display.shown`).
    """
    from pytest_tooleffect.data.reply_set import ReplySetError, agreement, read_labels, read_replies, render
    from pytest_tooleffect.util.display import shown

    if len(args.files) != 1 or not Path(args.files[0]).is_dir():
        print(shown(f"tooleffect label agreement: give one reply set folder (got {' '.join(args.files)})"),
              file=sys.stderr)
        return 2
    folder = Path(args.files[0])
    names = (args.a or "labels-a.jsonl", args.b or "labels-b.jsonl")
    first, second = (folder / name for name in names)
    if first.exists() and second.exists() and os.path.samefile(first, second):
        print(shown(f"tooleffect label agreement: {first} and {second} are the same file: the agreement of a "
                    "labeller with itself measures nothing; give the two labellers' files (--a, --b)"),
              file=sys.stderr)
        return 2
    try:
        replies = read_replies(folder / "replies.jsonl")
        a, b = (read_labels(folder / name, replies, gold=name.endswith("gold.jsonl")) for name in names)
    except (OSError, ReplySetError) as exc:
        print(shown(f"tooleffect label agreement: {exc}"), file=sys.stderr)
        return 2
    report = agreement(a, b, names)
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return 0
