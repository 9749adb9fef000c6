"""The secrets a run knows, and their redaction from everything it writes or prints.

A run knows a secret when it could send one: the value of every environment variable a policy
names with ``api_key_env``, and the value of every variable whose name says it holds a
credential (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``HF_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, …: :data:`SECRET_NAME`), the variables litellm reads a provider's key
from.  :func:`redact` replaces each known value in a text with :data:`REDACTED`; the error
messages of providers and agents, every record, the report's files, pytest's reports (so JUnit
and pytest-json-report) and the model cache pass through it.

:func:`looks_like_key` tells a key written into a file (a policy's fields) from the name of a
variable that holds one; a policy file holding a key is refused at load.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["ENV_NAME", "MIN_SECRET_LEN", "REDACTED", "SECRET_KEY", "SECRET_NAME", "known", "looks_like_key", "redact",
           "redact_obj", "register", "register_environment"]

#: a parameter name that holds a secret (left out of the report, whatever its value)
SECRET_KEY = re.compile(r"(^|[_-])(api[_-]?key|secret|password|passwd|token|auth|authorization|credentials?)$",
                        re.IGNORECASE)
#: What a secret's value is replaced with.
REDACTED = "<redacted>"
#: Values shorter than this are not treated as secrets (``"1"`` or ``"true"`` in a variable named
#: ``*_TOKEN`` would otherwise be cut out of every number and word).
MIN_SECRET_LEN = 8
#: Environment variable names that hold a credential (matched case-insensitively at the end of the name).
SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|ACCESS_KEY|SECRET(?:_ACCESS)?(?:_KEY)?|TOKEN|PASSWORD|PASSWD|"
                         r"AUTH_TOKEN|CREDENTIALS?)$", re.IGNORECASE)
#: An environment variable's name (what ``api_key_env`` must hold).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Shapes of keys as providers issue them (OpenAI/Anthropic/OpenRouter ``sk-``, Google ``AIza``,
#: Hugging Face ``hf_``, GitHub ``ghp_``…, Slack ``xox?-``, AWS access key ids, bearer tokens,
#: JWTs), and credentials in a URL (``https://user:secret@host``, ``?key=…``).
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}|\bAIza[0-9A-Za-z_\-]{20,}|\bhf_[A-Za-z0-9]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bBearer\s+\S{8,}|\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"
    r"|://[^/\s:@]+:[^/\s@]+@|[?&](?:api[_-]?key|key|token|access_token)=[^&\s]{8,}",
    re.IGNORECASE)

_lock = threading.Lock()
_known: set[str] = set()
_pattern: re.Pattern[str] | None = None


def register(value: str | None) -> None:
    """Know ``value`` as a secret from now on (ignored when shorter than :data:`MIN_SECRET_LEN`)."""
    global _pattern
    if not value or len(value) < MIN_SECRET_LEN:
        return
    with _lock:
        if value not in _known:
            _known.add(value)
            _pattern = None


def register_environment(environ: Mapping[str, str] | None = None, names: tuple[str, ...] = ()) -> None:
    """Know the value of every credential variable (:data:`SECRET_NAME`) and of each of ``names``."""
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if name in names or SECRET_NAME.search(name):
            register(value)


def known() -> frozenset[str]:
    """The secrets known so far."""
    with _lock:
        return frozenset(_known)


def _compiled() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and _known:  # longest first: a key that contains another is cut whole
            _pattern = re.compile("|".join(re.escape(v) for v in sorted(_known, key=len, reverse=True)))
        return _pattern


def redact(text: str) -> str:
    """``text`` with every known secret replaced by :data:`REDACTED`."""
    pattern = _compiled()
    if pattern is None or not text:
        return text
    return pattern.sub(REDACTED, text)


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with every known secret redacted in its
    strings and keys; other values are returned as they are (and ``obj`` itself when no secret is
    known).
    """
    pattern = _compiled()
    if pattern is None:
        return obj

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(REDACTED, value) if value else value
        if isinstance(value, Mapping):
            return {pattern.sub(REDACTED, k) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(obj)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` holds something shaped like a credential (a provider's key, a bearer token,
    credentials in a URL), as opposed to the name of a variable that holds one.
    """
    return bool(_KEY_SHAPES.search(text))
