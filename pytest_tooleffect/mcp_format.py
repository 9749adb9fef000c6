"""Typed data at the edges for MCP: where a family's tools came from (``family.yaml``'s ``mcp:``)
and the MCP world its sandbox runs (``sandbox: {world: mcp, mcp: {...}}``).  Part of
:mod:`pytest_tooleffect.formats`, which exports them; kept apart for its size.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["McpServerRef", "McpSource", "McpWorld", "ProbeCall", "SetupStep"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServerRef(_Model):
    """An MCP server's name and version, as its ``initialize`` answer gives them (``serverInfo``)."""

    name: str
    version: str


class McpSource(_Model):
    """``family.yaml``'s ``mcp:``: the server the family's tools were imported from.

    ``transport`` is ``stdio`` (then ``command``: the program and its arguments) or
    ``streamable-http`` (then ``url``); ``trust_annotations`` says whether the server's hints may
    shape the labels (untrusted by default: they are claims, checked in the sandbox).
    """

    server: McpServerRef
    transport: Literal["stdio", "streamable-http"] = "stdio"
    command: list[str] | None = None
    url: str | None = None
    trust_annotations: bool = False

    @model_validator(mode="after")
    def _where(self) -> McpSource:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs its command")
        if self.transport == "streamable-http" and not self.url:
            raise ValueError("a streamable-http server needs its url")
        return self


class SetupStep(_Model):
    """One step that builds an MCP world's directory (``sandbox/mcp_probes.py``: ``build``):
    ``init`` (a repository on branch ``name``), ``write`` (``path`` gets ``content``), ``delete``
    (``path``), ``git`` (``args``), ``commit`` (everything, message ``content``).
    """

    step: int = Field(ge=0)
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
    timeout_s: float = Field(default=10.0, gt=0, le=25)
    env: dict[str, str] = Field(default_factory=dict)
    setup: list[SetupStep] = Field(default_factory=list)
    probe_pass: list[ProbeCall] = Field(default_factory=list)
