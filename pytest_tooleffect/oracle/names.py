"""Provider-safe tool names: the reversible mapping both the model turn and the text channel use.

Providers reject tool names outside ``^[a-zA-Z0-9_-]{1,64}$`` (the OpenAI and Anthropic rule;
``calendar.create_event`` breaks it), so a model turn offers each tool under a safe name and maps
the answer back.  A model that writes its call into the text channel writes the name it was
given, so the text check (:mod:`pytest_tooleffect.oracle.emission`) reads both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["SAFE_NAME", "NameMap", "name_map"]

SAFE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class NameMap:
    """Reversible mapping between tool names and provider-safe names."""

    to_provider: Mapping[str, str]
    to_original: Mapping[str, str]

    def out(self, name: str) -> str:
        """Original → provider-safe (unknown names pass through)."""
        return self.to_provider.get(name, name)

    def back(self, name: str) -> str:
        """Provider-safe → original (unknown names pass through)."""
        return self.to_original.get(name, name)


def name_map(names: Iterable[str]) -> NameMap:
    """Map each name to a provider-safe one, keeping safe names as they are.

    Unsafe characters become ``_``; a name over 64 characters is cut and suffixed with a hash;
    a clash gets a numeric suffix.  The mapping is injective, so it reverses exactly.
    """
    names = list(dict.fromkeys(names))
    taken = {n for n in names if SAFE_NAME.match(n)}
    out: dict[str, str] = {}
    for n in names:
        if SAFE_NAME.match(n):
            out[n] = n
            continue
        base = re.sub(r"[^a-zA-Z0-9_-]", "_", n) or "tool"
        if len(base) > 64:
            base = base[:55] + "_" + hashlib.sha1(n.encode()).hexdigest()[:8]
        cand, k = base, 1
        while cand in taken:
            k += 1
            suffix = f"_{k}"
            cand = base[: 64 - len(suffix)] + suffix
        taken.add(cand)
        out[n] = cand
    return NameMap(out, {v: k for k, v in out.items()})


