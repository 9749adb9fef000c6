"""Typed data at the edges: a family's MCP server (``mcp:``), its annotation policy
(``annotations:``) and the MCP world its sandbox runs (``sandbox: {world: mcp, mcp: {...}}``).
Part of :mod:`pytest_tooleffect.formats`, which exports them; kept apart for its size.

``tooleffect import mcp`` writes the ``mcp:`` block (the server's name and version as it
introduced itself, how it was reached); a user writes ``annotations:`` to say how the tools' MCP
hints (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``) shape the
family's labels and report.  The pure logic on hints is :mod:`pytest_tooleffect.oracle.hints`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pytest_tooleffect.formats.policy import Amount, Count

__all__ = ["HINT_CLASSES", "AnnotationPolicy", "HintWeights", "McpServerInfo", "McpSource", "McpWorld", "ProbeCall",
           "SetupStep"]

#: the classes a tool's hints put it in, least severe first: ``read`` (``readOnlyHint: true``),
#: ``write`` (not read-only, ``destructiveHint: false``), ``destructive`` (the rest: MCP's default)
HINT_CLASSES = ("read", "write", "destructive")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerInfo(_Model):
    """The server as it introduced itself (``serverInfo`` of its ``initialize`` answer)."""

    name: str = Field(min_length=1)
    version: str = ""


class McpSource(_Model):
    """Where a family's tools came from: an MCP server (``family.yaml``'s ``mcp:``).

    Attributes:
        server: its name and version.
        transport: ``stdio`` (``command`` is the command line that starts it) or ``streamable-http``
            (``url`` is its endpoint).
        command: the server's command line, program first (stdio).
        url: the server's endpoint (streamable HTTP).
        trust_annotations: ``False`` (the default, and what the import writes): the server's hints
            are claims, never an exemption: a tool declaring itself read-only or non-destructive
            still needs the user's confirmation where the policy asks for it (it is read as MCP's
            worst case).  ``True``: the hints are taken as the server states them.
    """

    server: McpServerInfo
    transport: Literal["stdio", "streamable-http"]
    command: list[str] | None = Field(default=None, min_length=1)
    url: str | None = Field(default=None, min_length=1)
    trust_annotations: bool = False

    @model_validator(mode="after")
    def _one_address(self) -> McpSource:
        if self.transport == "stdio" and (self.command is None or self.url is not None):
            raise ValueError("transport stdio names the server's command (a list, program first) and no url")
        if self.transport == "streamable-http" and (self.url is None or self.command is not None):
            raise ValueError("transport streamable-http names the server's url and no command")
        return self


def _weight(value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a weight is a number > 0, got {value!r}")
    return value


class HintWeights(_Model):
    """The severity of a needless call by the hint class of the tool it called (any positive numbers;
    only their ratios matter).  Defaults: a needless destructive call weighs four redundant reads.
    """

    read: Amount = 1.0
    write: Amount = 2.0
    destructive: Amount = 4.0

    @field_validator("read", "write", "destructive")
    @classmethod
    def _positive(cls, v: float) -> float:
        return _weight(v)

    @model_validator(mode="after")
    def _ordered(self) -> HintWeights:
        if not self.read <= self.write <= self.destructive:
            raise ValueError(f"weights must not decrease from read to write to destructive (got read {self.read}, "
                             f"write {self.write}, destructive {self.destructive}): a needless destructive call "
                             "is never lighter than a redundant read")
        return self

    def of(self, hint_class: str) -> float:
        """The weight of ``hint_class`` (one of :data:`HINT_CLASSES`)."""
        return float(getattr(self, hint_class))


class AnnotationPolicy(_Model):
    """How the tools' MCP hints shape a family's labels and report (``family.yaml``'s ``annotations:``).

    Attributes:
        confirm_destructive: a destructive tool (by its hints; every tool when the family does not
            trust them) is forbidden at every state whose case does not say ``confirmed: true`` (the
            user explicitly confirmed the change in the conversation), unless the state's label
            lists it among the valid actions or already says how it is forbidden.
        weights: the severity of a needless call by hint class, for the report's weighted no-tool
            rate and the ``min_pct_weighted_no_tool`` gate.
    """

    confirm_destructive: bool = False
    weights: HintWeights = Field(default_factory=HintWeights)


class SetupStep(_Model):
    """One step that builds an MCP world's directory (``sandbox/mcp_probes.py``: ``build``):
    ``init`` (a repository on branch ``name``), ``write`` (``path`` gets ``content``), ``delete``
    (``path``), ``git`` (``args``), ``commit`` (everything, message ``content``).
    """

    step: Count = Field(ge=0)
    op: Literal["init", "write", "delete", "git", "commit"]
    name: str | None = None
    path: str | None = None
    content: str | None = None
    args: list[str] | None = None


class ProbeCall(_Model):
    """One call of a family's probe pass (:mod:`pytest_tooleffect.sandbox.mcp_probe_pass`)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    repeat: bool = False
    """Call it twice in a row (how an ``idempotentHint`` is checked)."""
    setup: list[SetupStep] = Field(default_factory=list)
    """Steps after the family's ``setup`` that make the state this call acts on (a change to stage)."""


class McpWorld(_Model):
    """An MCP world's server (``sandbox: {world: mcp, mcp: {...}}``, docs/sandboxes.md).

    ``command``: the server's command line inside the sandbox (``{root}`` is the world's
    directory); ``probe``: how its state is read (``git`` or ``files``); ``root_alias``: the path
    the agent is told instead of the directory; ``timeout_s``: the longest wait for an answer
    (seconds); ``env``: extra environment variables; ``setup``: the steps every case's world
    starts with (a case's own ``world.setup`` steps follow); ``probe_pass``: the calls that check
    the server's hints on the ``setup`` state before any agent runs.
    """

    command: list[str] = Field(min_length=1)
    probe: Literal["git", "files"] = "files"
    root_alias: str | None = None
    timeout_s: Amount = Field(default=10.0, gt=0, le=25)
    env: dict[str, str] = Field(default_factory=dict)
    setup: list[SetupStep] = Field(default_factory=list)
    probe_pass: list[ProbeCall] = Field(default_factory=list)
