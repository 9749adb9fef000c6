"""The on-disk cache of model turns (``--tooleffect-cache``), and the check of what it holds.

A stored turn is read back as the model's answer, so it is checked as one is
(:func:`turn_entry_problem`): the decision a JSON object holding no lone surrogate, its usage
counts and money within the bounds a live answer's are held to
(:func:`~pytest_tooleffect.util.bounds.usage_problem`).  An entry that does not validate (edited by
hand, written by another tool, cut by a full disk) is never scored: under ``--tooleffect-cache read``
it is the item's error outcome naming the file and the field (:class:`CacheEntryError`); under
``readwrite`` the model is asked again and the entry rewritten, said once.

The modes (``--tooleffect-cache``): ``read`` answers from the cache alone, and a decision it holds no
answer for is the item's error outcome (:class:`CacheMissError`, no request made); ``write`` always
asks the model and stores the answer; ``readwrite`` answers from the cache and asks the model (then
stores the answer) on a miss.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tooleffect.util.bounds import usage_problem
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.exceptions import described
from pytest_tooleffect.util.jsonl import loads  # a key given twice (in a call's arguments too) is refused
from pytest_tooleffect.util.redaction import redact_obj
from pytest_tooleffect.util.unicode import surrogate_problem

__all__ = ["CACHE_ENTRY_INVALID", "CACHE_MISS", "CacheEntryError", "CacheEntryWarning", "CacheMissError", "ModelCache",
           "message_role_problem", "turn_entry_problem"]

#: The error type of an item whose cached turn does not validate under ``--tooleffect-cache read``.
CACHE_ENTRY_INVALID = "CacheEntryInvalid"
#: The error type of an item the cache holds no answer for under ``--tooleffect-cache read``.
CACHE_MISS = "CacheMiss"


class CacheEntryError(Exception):
    """A stored turn that does not validate, read where no model may be asked instead.

    Attributes:
        path: the entry's file.
        problem: the field and what is wrong with it, one line.
        message: ``model cache PATH: problem: …``.
        kind: the item's error type (:data:`CACHE_ENTRY_INVALID`).
    """

    kind = CACHE_ENTRY_INVALID

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        self.message = (f"model cache {path}: {problem}: the entry is not used, and --tooleffect-cache read asks no "
                        "model (delete the file, or run with --tooleffect-cache readwrite to ask again)")
        super().__init__(self.message)


class CacheMissError(CacheEntryError):
    """No stored turn for a decision, under ``--tooleffect-cache read``, where no model is asked.

    Attributes:
        path: the file the answer would be in (its name is the cache key).
        case_id: the case whose decision it is (``None`` when not known).
        message: ``case ID: model cache PATH: no stored answer for this decision: …`` (``PATH``'s name
            is the request's key, :meth:`ModelCache.key`).
        kind: :data:`CACHE_MISS`.
    """

    kind = CACHE_MISS

    def __init__(self, path: Path, case_id: str | None = None) -> None:
        Exception.__init__(self)
        self.path = path
        self.case_id = case_id
        self.problem = "no stored answer for this decision"  # the file's name is the request's key
        where = f"case {case_id}: " if case_id is not None else ""
        self.message = (f"{where}model cache {path}: {self.problem}: --tooleffect-cache read asks no model (run with "
                        "--tooleffect-cache readwrite to ask it and store the answer)")
        self.args = (self.message,)


class CacheEntryWarning(UserWarning):
    """A stored turn that does not validate, under ``--tooleffect-cache readwrite``: asked again."""


def message_role_problem(message: Mapping[str, Any], where: str) -> str | None:
    """Why an answer's message is not the model's own turn (its ``role`` another than ``assistant``:
    the user's or a tool's turn echoed back), or ``None``; ``where`` names the message in the line.
    """
    role = message.get("role")
    if role in (None, "assistant"):
        return None
    return f"{where}.role is {shown(str(role), limit=40)}, not assistant: the answer is not the model's own turn"


def turn_entry_problem(doc: Any) -> str | None:
    """What is wrong with a stored model turn, in one line naming the field, or ``None``.

    Args:
        doc: the entry's JSON: ``{"emitted": the assistant message, "cost": {input_tokens,
            output_tokens, latency_ms, cost_usd, priced_by}, "provider_names": {name: name}}``.

    Returns:
        ``cost.cost_usd -99.0: a number of US dollars from 0 to …``, ``emitted: not a JSON object``, …
    """
    if not isinstance(doc, dict):
        return f"not a JSON object but {type(doc).__name__}"
    emitted, cost, names = doc.get("emitted"), doc.get("cost"), doc.get("provider_names", {})
    if not isinstance(emitted, dict):
        return "emitted: not a JSON object (the model's message)"
    wrong_role = message_role_problem(emitted, "emitted")  # checked as a live answer is
    if wrong_role is not None:
        return wrong_role
    if not isinstance(cost, dict):
        return "cost: not a JSON object"
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()):
        return "provider_names: not an object of names"
    problem = usage_problem(cost.get("input_tokens"), cost.get("output_tokens"), cost.get("cost_usd"))
    if problem is not None:
        return f"cost.{problem}"
    latency = cost.get("latency_ms")
    if latency is not None and (isinstance(latency, bool) or not isinstance(latency, (int, float))
                                or not math.isfinite(latency) or latency < 0):
        return f"cost.latency_ms {latency!r}: a number of milliseconds >= 0, or None when unknown"
    if not isinstance(cost.get("priced_by"), (str, type(None))):
        return "cost.priced_by: a name or None"
    return surrogate_problem(emitted, "emitted") or surrogate_problem(names, "provider_names")


@dataclass(frozen=True)
class ModelCache:
    """On-disk cache of model answers keyed by policy (model, parameters, prompt overrides), state
    and trial: one JSON file per key under ``directory``.

    litellm 1.110's own cache has no disk backend (its ``local`` cache lives in memory), so answers
    are stored here: the request keyword arguments litellm gets (which hold the policy's model,
    temperature, system prompt and tool descriptions, and the state's messages and tools), plus
    the trial number, hashed with SHA-256.

    Attributes:
        directory: where answers are stored.
        read: answer from the cache when a key is present.
        write: store fresh answers.
        warned: the entry a :class:`CacheEntryWarning` named (at most one per cache).
    """

    directory: Path
    read: bool = True
    write: bool = True
    warned: list[str] = field(default_factory=list, compare=False, repr=False)

    @staticmethod
    def key(kwargs: Mapping[str, Any], trial: int) -> str:
        """The cache key of one request."""
        doc = {k: v for k, v in kwargs.items() if k != "api_key"}
        return hashlib.sha256(json.dumps([doc, trial], sort_keys=True, default=str).encode()).hexdigest()

    def path(self, key: str) -> Path:
        """The file of ``key``'s answer."""
        return self.directory / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """A stored answer, or ``None`` (none stored, or its file cannot be read as JSON)."""
        path = self.path(key)
        if not self.read or not path.is_file():
            return None
        try:
            doc: dict[str, Any] = loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc

    def get_turn(self, key: str, case_id: str | None = None) -> dict[str, Any] | None:
        """A stored model turn (``emitted``, ``cost``, ``provider_names``) that validates
        (:func:`turn_entry_problem`), or ``None`` (the model is then asked): ``read`` off
        (``--tooleffect-cache write``), none stored under ``readwrite``, or, under ``readwrite``, one
        that does not validate: it is asked of the model again and overwritten, and the first such
        entry is said once in a :class:`CacheEntryWarning`.

        Args:
            key: the request's key (:meth:`key`).
            case_id: the case whose decision it is (named in a :class:`CacheMissError`).

        Raises:
            CacheMissError: under ``--tooleffect-cache read`` (``write`` off: no model is asked), no
                answer is stored for ``key``.
            CacheEntryError: under ``--tooleffect-cache read``, the stored entry does not validate.
        """
        path = self.path(key)
        if not self.read:
            return None
        if not path.is_file():
            if not self.write:
                raise CacheMissError(path, case_id)
            return None
        try:
            doc: Any = loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problem: str | None = f"not a JSON file ({described(exc, 200)})"
        else:
            problem = turn_entry_problem(doc)
        if problem is None:
            return dict(doc)
        if not self.write:
            raise CacheEntryError(path, problem)
        if not self.warned:
            self.warned.append(str(path))
            warnings.warn_explicit(  # located at the entry's file: the plugin's line would tell a user nothing
                CacheEntryWarning(f"model cache {path}: {problem}: not used; its turn is asked of the model again "
                                  "and the entry rewritten (said once: other invalid entries are treated the same)"),
                CacheEntryWarning, str(path), 1)
        return None

    def put(self, key: str, doc: Mapping[str, Any]) -> None:
        """Store an answer (atomically: written aside, then renamed), known secrets redacted."""
        if not self.write:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f"{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(redact_obj(doc), default=str), encoding="utf-8")
        os.replace(tmp, self.directory / f"{key}.json")
