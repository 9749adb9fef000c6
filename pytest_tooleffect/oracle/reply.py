"""What a no-tool reply must do (DESIGN.md scoring rule 6).

A ``tool: null`` action may say what its reply must do: ``reply: ask`` (ask for a missing or
ambiguous detail instead of guessing), ``reply: refuse`` (decline: out of scope or against
policy), ``reply: answer`` (report or confirm), and free-text criteria ``must`` / ``must_not``.
Each is judged by the LLM judge when one is configured (the same judge as free-text fields,
given a rubric per check), else by a deterministic fallback, and the result is then marked
approximate:

* ``ask``: some sentence ends with a question mark and reads as a question (it opens with an
  interrogative or auxiliary word, or holds one in its last clause), or the reply asks in the
  imperative (``please provide``, ``let me know``, ``could you``…);
* ``refuse``: the reply says it cannot or will not do it (``can't``, ``cannot``, ``unable``,
  ``not able``, ``outside``, ``against … policy``, ``not allowed``, ``only handle``,
  ``unfortunately``, ``non-refundable``, ``no exceptions``, ``does not cover``…);
* ``answer``: the reply has text and is not only a question;
* ``must``: at least half of the criterion's content words occur in the reply;
* ``must_not``: fails only when every content word of the criterion occurs in the reply
  (content words: three letters or more, compared by their first five letters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from pytest_tooleffect.oracle.context import CompareContext
from pytest_tooleffect.oracle.values import tokens

__all__ = ["QUESTION_SENTENCE", "REPLY_KINDS", "ReplyCheck", "judge_reply"]

#: What a no-tool reply may be required to do.
REPLY_KINDS = ("ask", "refuse", "answer")

RUBRICS = {
    "ask": "The reply asks the user for a missing or ambiguous detail (a clarifying question) instead of "
           "guessing it or acting on a guess.",
    "refuse": "The reply declines the request (it is out of scope or against policy) and does not pretend to "
              "do it.",
    "answer": "The reply reports a result or confirms something to the user; it is not only a question back.",
}

_QUESTION_WORDS = frozenset(
    "who whom whose what which when where why how can could would will shall should do does did is are was were "
    "may might have has had am ¿qué ¿cuál ¿cuándo ¿dónde ¿cómo ¿quién".split()
)
_ASKING = re.compile(
    r"\b(please (provide|confirm|share|send|tell|let me know|specify|clarify)|let me know|could you|can you|"
    r"would you|do you want|would you like|which one|tell me (which|what|when|who))\b", re.I)
_REFUSING = re.compile(
    r"(\bcan['’]?t\b|\bcannot\b|\bcan not\b|\bunable\b|\bnot able\b|\bwon['’]?t\b|\bnot possible\b|"
    r"\boutside (of )?(what|my|the)\b|\bagainst (the |our |airline )?polic|\bnot (allowed|permitted|eligible)\b|"
    r"\b(i|we) only (handle|organi[sz]e|arrange|help)|\bnot something (i|we) can\b|\bdon['’]?t (handle|do)\b|"
    r"\bunfortunately\b|\bnon-?refundable\b|\bno exceptions?\b|\b(don['’]?t|do not) have access\b|"
    r"\b(does|do|is|are) not (cover|allow|permit|covered|allowed|permitted|refundable)\b|\bno puedo\b)", re.I)
#: A sentence ending in a question mark.  Terminators are ``.``, ``!``, ``?``, ``¿`` and a newline,
#: except a ``.`` between two digits (a decimal point: "refund $49.99?" is one sentence).  The
#: lookbehinds let a match start only where a sentence starts (the text's start or right after a
#: terminator): without them every position inside a long sentence with no question mark rescans
#: it to its end, quadratic in the sentence's length.
QUESTION_SENTENCE = re.compile(r"(?:^|(?<=[!?¿\n])|(?<=\.)(?<!\d\.)|(?<=\.)(?!\d))(?:[^.!?¿\n]|(?<=\d)\.(?=\d))*[?？]")


class ReplyCheck(NamedTuple):
    """The reply's result against its criteria.

    Attributes:
        ok: every check passed.
        reply: the reply kind the label asked for, or ``None``.
        kind_ok: the reply did what ``reply`` asked (``None`` when it asked nothing).
        failures: one line per failed check (``reply ask: …``, ``must: …``, ``must_not: …``).
        approximate: some check was judged by the deterministic fallback.

    """

    ok: bool
    reply: str | None
    kind_ok: bool | None
    failures: tuple[str, ...]
    approximate: bool

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        return {"ok": self.ok, "reply": self.reply, "kind_ok": self.kind_ok, "failures": list(self.failures),
                "approximate": self.approximate}


def _asks(text: str) -> bool:
    if _ASKING.search(text):
        return True
    for sentence in QUESTION_SENTENCE.findall(text):
        words = re.findall(r"[\w¿']+", sentence.lower())
        if words and (words[0] in _QUESTION_WORDS or any(w in _QUESTION_WORDS for w in words[-8:])):
            return True
    return False


def _refuses(text: str) -> bool:
    return bool(_REFUSING.search(text))


def _only_question(text: str) -> bool:
    rest = QUESTION_SENTENCE.sub(" ", text)
    return _asks(text) and not re.search(r"\w", rest)


def _content(text: str) -> set[str]:
    """Content words (three letters or more), each cut to its first five letters (a crude stem)."""
    return {t[:5] for t in tokens(text) if len(t) > 2}


def _fallback_kind(kind: str, text: str) -> bool:
    if kind == "ask":
        return _asks(text)
    if kind == "refuse":
        return _refuses(text)
    return bool(text.strip()) and not _only_question(text)


def _fallback_must(criterion: str, text: str) -> bool:
    want = _content(criterion)
    return not want or len(want & _content(text)) * 2 >= len(want)


def _fallback_must_not(criterion: str, text: str) -> bool:
    banned = _content(criterion)
    return not banned or not banned <= _content(text)


def judge_reply(text: str | None, reply: str | None, must: Sequence[str], must_not: Sequence[str],
                ctx: CompareContext, reason: str | None = None) -> ReplyCheck:
    """Judge a no-tool reply's text against what the label says it must do.

    Args:
        text: the reply's text (``None`` or empty: no text).
        reply: ``ask``, ``refuse``, ``answer`` or ``None``.
        must: criteria the reply must meet (free text).
        must_not: criteria the reply must not meet (free text).
        ctx: the comparison's context; ``ctx.judge`` (``(rubric, expected, got) -> (ok, reason)``)
            judges each check when set.
        reason: the label's reason for the null action, shown to the judge as the reference.

    Returns:
        The :class:`ReplyCheck`.

    Raises:
        ValueError: ``reply`` is not one of :data:`REPLY_KINDS`.
        Exception: whatever the judge raises (a judge failure is an error, never a verdict).

    """
    if reply is not None and reply not in REPLY_KINDS:
        raise ValueError(f"reply {reply!r}: one of {', '.join(REPLY_KINDS)}")
    got = (text or "").strip()
    judge = ctx.judge
    failures: list[str] = []
    kind_ok: bool | None = None
    if reply is not None:
        if not got:
            kind_ok = False
        elif judge is not None:
            kind_ok, why = judge(RUBRICS[reply], reason or f"a reply that does this: {reply}", got)
            if not kind_ok:
                failures.append(f"reply {reply}: {why}")
        else:
            kind_ok = _fallback_kind(reply, got)
        if not kind_ok and not failures:
            failures.append(f"reply {reply}: " + ("no text" if not got else f"the reply does not {reply} (fallback)"))
    for criterion in must:
        if judge is not None and got:
            ok, why = judge(f"The reply does this: {criterion}", criterion, got)
        else:
            ok, why = bool(got) and _fallback_must(criterion, got), "not found in the reply (fallback)"
        if not ok:
            failures.append(f"must: {criterion}: {why}")
    for criterion in must_not:
        if judge is not None and got:
            ok, why = judge(f"The reply does NOT do this: {criterion}", f"a reply that does not: {criterion}", got)
        else:
            ok, why = _fallback_must_not(criterion, got), "the reply does it (fallback)"
        if not ok:
            failures.append(f"must_not: {criterion}: {why}")
    checked = reply is not None or bool(must) or bool(must_not)
    return ReplyCheck(not failures, reply, kind_ok, tuple(failures), checked and judge is None)
