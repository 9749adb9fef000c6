"""An LLM judge for the argument fields a family declares free text (``compare: free_text``).

The judge reads a short rubric, the labelled text and the emitted text, and answers with
structured output ``{"verdict": "pass" | "fail", "reason": "..."}`` through litellm.  Answers are
cached on disk keyed by model, rubric and both texts, so a re-run costs nothing and gives the
same verdict.  The judge's tokens and cost are kept apart from the agent's.  Without a judge
model the oracle's deterministic comparator (token overlap) stays, marked approximate.

Calibration: :func:`calibrate` scores the judge against hand-labelled pairs and reports Cohen's
kappa with its 95 % interval (:func:`cohens_kappa`; Cohen, "A coefficient of agreement for
nominal scales", 1960).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tooleffect.decide.answer_shape import body_problem, parts_read
from pytest_tooleffect.decide.reported_usage import RawAnswer, reported_counts

__all__ = ["Z_975", "Judge", "JudgeUsage", "calibrate", "cohens_kappa"]

#: The standard normal's 0.975 quantile as ``scipy.stats.norm.isf(0.025)`` gives it (``statistics.NormalDist``'s
#: ``inv_cdf`` is one unit in the last place lower), for :func:`cohens_kappa`'s interval.
Z_975 = 1.9599639845400545

PROMPT = """You judge one argument of a tool call that an AI agent made.
Rubric: {rubric}
Reference text (what a correct call would say): {expected}
Emitted text (what the agent wrote): {got}
Does the emitted text meet the rubric as well as the reference does? Wording may differ.
Answer as JSON: {{"verdict": "pass" or "fail", "reason": "one short sentence"}}."""

SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "judgement",
        "strict": True,
        "schema": {"type": "object", "additionalProperties": False, "required": ["verdict", "reason"],
                   "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]},
                                  "reason": {"type": "string"}}},
    },
}


@dataclass
class JudgeUsage:
    """What the judge spent: calls, cache hits, tokens (of the calls whose provider reported them),
    the calls whose provider reported no usage (``tokens_unknown``) or not the input or the output
    count (``input_tokens_unknown``, ``output_tokens_unknown``, each counting those too), and money
    (``None`` = unknown: a price unknown, or a call without both counts).
    """

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    tokens_unknown: int = 0
    input_tokens_unknown: int = 0
    output_tokens_unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records and the report."""
        return dict(self.__dict__)


class JudgeError(RuntimeError):
    """The judge's provider failed or answered without a readable verdict."""


class JudgeProviderError(JudgeError):
    """The judge's provider gave no answer at all (a connection refused, a timeout, an HTTP error):
    a failure of the measurement, never an answer that could not be read.
    """


@dataclass
class Judge:
    """Callable as ``judge(rubric, expected, got) -> (ok, reason)`` (the oracle's judge hook).

    Attributes:
        model: litellm model name.
        api_base: optional api base (a local server).
        cache_dir: folder of cached verdicts (one JSON file per key).
        timeout_s: request timeout in seconds.
        max_tokens: cap on the tokens of one answer (``None``: the provider's); an answer cut at the
            cap is not readable JSON, a :class:`JudgeError`.
    """

    model: str
    api_base: str | None = None
    cache_dir: Path | None = None
    timeout_s: float = 60.0
    max_tokens: int | None = None
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def key(self, rubric: str | None, expected: Any, got: Any) -> str:
        """Cache key: SHA-256 of model, rubric and both texts."""
        doc = json.dumps([self.model, rubric or "", str(expected), str(got)], ensure_ascii=False)
        return hashlib.sha256(doc.encode()).hexdigest()

    def __call__(self, rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        """Judge one field; raises :class:`JudgeError` when no verdict can be had."""
        prompt = PROMPT.format(rubric=rubric or "says the same thing as the reference", expected=expected, got=got)
        doc = self.ask(self.key(rubric, expected, got), prompt, SCHEMA, "verdict", ("pass", "fail"))
        return doc["verdict"] == "pass", str(doc.get("reason", ""))

    def ask(self, key: str, prompt: str, schema: Mapping[str, Any], field_name: str,
            choices: Sequence[str]) -> dict[str, Any]:
        """One question to the model at temperature 0, its answer a JSON object whose ``field_name``
        is one of ``choices``; cached under ``key``, its tokens and cost counted in :attr:`usage`.

        Returns:
            The answer's JSON object.

        Raises:
            JudgeProviderError: the provider gave no answer.
            JudgeError: the answer is not JSON or ``field_name`` is not one of ``choices``.
        """
        from pytest_tooleffect.decide.model_turn import ModelCache, api_key, import_litellm
        from pytest_tooleffect.util.exceptions import described
        from pytest_tooleffect.util.redaction import redact

        cache = ModelCache(self.cache_dir) if self.cache_dir else None
        hit = cache.get(key) if cache is not None else None
        if hit is not None and hit.get(field_name) in choices:
            with self._lock:
                self.usage.cached += 1
            return dict(hit)

        litellm = import_litellm()
        kwargs: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                  "response_format": schema, "temperature": 0, "timeout": self.timeout_s,
                                  "num_retries": 0}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.api_base:
            kwargs["api_base"] = self.api_base
            found = api_key(self.model, self.api_base, None)  # the provider's variable when set, else a placeholder
            if found is not None:
                kwargs["api_key"] = found
        raw = RawAnswer()  # litellm fills an absent usage with zeros: the body the provider sent tells
        try:
            response = litellm.completion(**kwargs, logger_fn=raw)
        except Exception as exc:  # no answer at all: the provider (or the connection to it) failed
            response = _read_refused(litellm, raw.body, exc, self.model)
        try:
            text = response.choices[0].message.content or ""
            doc = json.loads(text)
            if doc.get(field_name) not in choices:
                raise ValueError(f"{field_name} {doc.get(field_name)!r}")
        except Exception as exc:
            raise JudgeError(redact(f"judge {self.model}: {described(exc, 300)}")) from exc
        usage = getattr(response, "usage", None)
        known = (False, False) if usage is None else reported_counts(raw.body) or (True, True)
        unknown = not any(known)  # no usage reported: unknown, never 0; each count on its own too
        try:
            cost: float | None = None if not all(known) else float(litellm.completion_cost(completion_response=response,
                                                                                    model=self.model))
        except Exception:  # a model the cost map does not know: unknown, never zero
            cost = None
        with self._lock:
            self.usage.calls += 1
            self.usage.tokens_unknown += int(unknown)
            self.usage.input_tokens_unknown += int(not known[0])
            self.usage.output_tokens_unknown += int(not known[1])
            self.usage.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0) if known[0] else 0
            self.usage.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0) if known[1] else 0
            self.usage.cost_usd = None if cost is None or self.usage.cost_usd is None else self.usage.cost_usd + cost
        if cache is not None:
            cache.put(key, {"model": self.model, **doc})
        return dict(doc)


def _read_refused(litellm: Any, body: Any, exc: Exception, model: str) -> Any:
    """The answer litellm refused, read from its body when it is a content list of text parts; else the judge's
    provider error naming the body's fault by field (:mod:`~pytest_tooleffect.decide.answer_shape`), else litellm's.
    """
    from pytest_tooleffect.util.exceptions import described
    from pytest_tooleffect.util.redaction import redact

    if body is not None:
        problem = body_problem(body)
        if problem is not None:
            raise JudgeProviderError(redact(f"judge {model}: InvalidResponse: {problem}")) from exc
        read = parts_read(body)
        if read is not None:
            return litellm.ModelResponse(**read)
    raise JudgeProviderError(redact(f"judge {model}: {described(exc, 300)}")) from exc


def cohens_kappa(table: Sequence[Sequence[int]]) -> tuple[float, float, float]:
    """Cohen's kappa of a square agreement table with its asymptotic 95 % interval.

    Cohen, "A coefficient of agreement for nominal scales", Educational and Psychological
    Measurement 20(1), 37-46 (1960); the variance is the large-sample one of Fleiss, Cohen and
    Everitt, "Large sample standard errors of kappa and weighted kappa", Psychological Bulletin
    72(5), 323-327 (1969), computed term by term as ``statsmodels.stats.inter_rater.cohens_kappa``
    computes it (the same figures, without statsmodels).

    Args:
        table: counts, rows one rater's categories and columns the other's, in the same order.

    Returns:
        ``(kappa, low, high)``; the interval is ``kappa ± z(0.975) · sqrt(var)``, not clipped.
        A table whose agreement chance alone predicts in full (every count in one row and one
        column) has no kappa: ``nan``.
    """
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return _kappa(np.asarray(table, float))


def _kappa(t: Any) -> tuple[float, float, float]:
    import numpy as np

    nobs = t.sum()
    probs = t / nobs
    diag = np.diag(probs)
    freq_row, freq_col = t.sum(1) / nobs, t.sum(0) / nobs
    agree_exp = np.diag(freq_col * freq_row[:, None]).sum()
    kappa = (np.diag(t).sum() / nobs - agree_exp) / (1 - agree_exp)
    term_a = (diag * (1 - (freq_row + freq_col) * (1 - kappa)) ** 2).sum()
    off = probs * (freq_col[:, None] + freq_row) ** 2
    idx = np.arange(t.shape[0])
    off[idx, idx] = 0
    term_b = (1 - kappa) ** 2 * off.sum()
    term_c = (kappa - agree_exp * (1 - kappa)) ** 2
    var = (term_a + term_b - term_c) / (1 - agree_exp) ** 2 / nobs
    delta = Z_975 * float(np.sqrt(var))
    return float(kappa), float(kappa) - delta, float(kappa) + delta


def calibrate(judge: Judge, pairs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Score the judge against hand-labelled free-text pairs.

    Args:
        judge: the judge.
        pairs: ``{"rubric", "expected", "got", "human": "pass" | "fail"}`` each.

    Returns:
        ``{"model", "n", "agreement", "kappa", "kappa_ci95", "table", "disagreements"}``; the
        interval is the asymptotic one of :func:`cohens_kappa`, clipped to [-1, 1].
    """
    import numpy as np

    table = np.zeros((2, 2), dtype=int)
    disagreements = []
    rows = list(pairs)
    for i, p in enumerate(rows):
        human = p["human"] == "pass"
        ok, reason = judge(p.get("rubric"), p["expected"], p["got"])
        table[int(human), int(ok)] += 1
        if ok != human:
            disagreements.append({"index": i, "human": p["human"], "judge": "pass" if ok else "fail", "reason": reason})
    n = int(table.sum())
    kappa, low, high = cohens_kappa(table.tolist())
    return {
        "model": judge.model,
        "n": n,
        "agreement": float(np.trace(table)) / n if n else None,
        "kappa": kappa,
        "kappa_ci95": [max(-1.0, low), min(1.0, high)],
        "table": {"human_fail": table[0].tolist(), "human_pass": table[1].tolist()},
        "disagreements": disagreements,
    }
