"""A reply-kind judge that asks one word: what the reply does (``ask``, ``refuse``, ``answer``, ``none``).

The rubric judge (:class:`~pytest_tooleffect.scoring.judge.Judge` given a kind's rubric from
:data:`pytest_tooleffect.oracle.reply.RUBRICS`) asks "does the reply meet this rubric, pass or
fail?" once per kind; a small model tends to say ``pass`` to everything.  :class:`KindWordJudge`
asks once per reply which one of the four words describes it, with the answer constrained to them
(JSON schema ``{"kind": ask | refuse | answer | none}``), and answers each rubric question from
that word: a reply passes kind ``K`` when the word is ``K``.  It is called like the rubric judge,
``judge(rubric, expected, got) -> (ok, why)``, so :func:`pytest_tooleffect.data.reply_scores.judge_agreement`
measures both the same way.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pytest_tooleffect.oracle.reply import RUBRICS
from pytest_tooleffect.scoring.judge import Judge, JudgeError

__all__ = ["KIND_PROMPT", "KIND_WORDS", "KindWordJudge"]

#: the words the judge may answer with
KIND_WORDS = ("ask", "refuse", "answer", "none")

KIND_PROMPT = """An AI assistant wrote this reply to a user.
Reply: {got}
Which ONE word describes what the reply does?
- ask: it asks the user for a missing or unclear detail before it can act.
- refuse: it declines what the user wants (not allowed, not possible, not its job), even if it offers something else.
- answer: it gives information or confirms something; a closing "anything else?" does not make it a question.
- none: it only greets, thanks or acknowledges.
Answer as JSON: {{"kind": "ask" or "refuse" or "answer" or "none"}}."""

KIND_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "reply_kind",
        "strict": True,
        "schema": {"type": "object", "additionalProperties": False, "required": ["kind"],
                   "properties": {"kind": {"type": "string", "enum": list(KIND_WORDS)}}},
    },
}


class KindWordJudge:
    """``judge(rubric, expected, got) -> (ok, why)`` for the reply-kind rubrics, from one word per reply.

    Args:
        judge: the model, endpoint, cache and usage counter the question goes through
            (:meth:`~pytest_tooleffect.scoring.judge.Judge.ask`).

    Attributes:
        model: the judge's model name, with ``[kind-word]`` after it (a calibration names the format).
    """

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.model = f"{judge.model} [kind-word]"
        self._words: dict[str, str] = {}
        self._kinds = {rubric: kind for kind, rubric in RUBRICS.items()}

    @property
    def usage(self) -> Any:
        """The underlying judge's :class:`~pytest_tooleffect.scoring.judge.JudgeUsage`."""
        return self.judge.usage

    def word(self, got: str) -> str:
        """The one word the model reads the reply as (asked once per reply text, then remembered).

        Raises:
            JudgeProviderError: the provider gave no answer.
            JudgeError: the answer is not one of :data:`KIND_WORDS`.
        """
        if got not in self._words:
            key = hashlib.sha256(json.dumps([self.judge.model, "kind-word", KIND_PROMPT, got]).encode()).hexdigest()
            doc = self.judge.ask(key, KIND_PROMPT.format(got=got), KIND_SCHEMA, "kind", KIND_WORDS)
            self._words[got] = str(doc["kind"])
        return self._words[got]

    @property
    def words(self) -> dict[str, str]:
        """Reply text → the word the model answered, for every reply asked about so far."""
        return dict(self._words)

    def __call__(self, rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        """Whether the reply does the kind ``rubric`` describes (one of the reply-kind rubrics).

        Raises:
            JudgeError: ``rubric`` is not a reply-kind rubric, or the model's answer cannot be read.
        """
        kind = self._kinds.get(str(rubric))
        if kind is None:
            raise JudgeError(f"judge {self.model}: asks only about the reply kinds ({', '.join(RUBRICS)})")
        word = self.word(str(got))
        return word == kind, f"the reply reads as {word}"
