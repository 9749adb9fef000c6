"""A family's probe pass: each MCP tool called on a fixed state to check its hints before any agent runs.

``sandbox.mcp.probe_pass`` in ``family.yaml`` lists the calls (``{name, arguments, repeat, setup}``);
:func:`probe_pass` resets the family's MCP world to its ``setup`` state (and the call's own
``setup`` steps) before each one, runs it
(twice in a row with ``repeat``, how an ``idempotentHint`` is checked), and holds the state
probe's diff against the tool's hints (:func:`~pytest_tooleffect.sandbox.mcp_hints.violations`).
``tooleffect sandbox probe cases/FAMILY`` prints the result; its exit status is 1 when a hint is
contradicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_tooleffect.formats.mcp import McpWorld
from pytest_tooleffect.sandbox.environment import SandboxProvider, World
from pytest_tooleffect.sandbox.mcp_hints import AnnotationViolation, effective_hints, violations
from pytest_tooleffect.sandbox.mcp_world import MCP_WORLD, world_rows

__all__ = ["ProbedCall", "probe_pass"]


@dataclass
class ProbedCall:
    """One probe-pass call (or pair, with ``repeat``) and what it showed.

    Attributes:
        name: the tool.
        arguments: its arguments.
        hints: its hints as the server listed them (MCP's defaults for the absent ones).
        calls: the call records (``name``, ``arguments``, ``content``, ``error``, ``mcp``).
        violations: the hints the calls contradicted.
    """

    name: str
    arguments: dict[str, Any]
    hints: dict[str, bool]
    calls: list[dict[str, Any]] = field(default_factory=list)
    violations: list[AnnotationViolation] = field(default_factory=list)

    @property
    def diff(self) -> list[str]:
        """Every call's diff lines, in order."""
        return [line for c in self.calls for line in c["mcp"].get("diff") or []]


def probe_pass(provider: SandboxProvider, spec: McpWorld) -> list[ProbedCall]:
    """Run ``spec.probe_pass`` in a sandbox of ``provider`` (already session-initialised).

    Args:
        provider: the sandbox provider (``docker`` for the image's servers, ``local`` in-process).
        spec: the family's ``sandbox.mcp``.

    Returns:
        One :class:`ProbedCall` per listed call, in order.

    Raises:
        SandboxError: the sandbox or the server failed (a server's fault says so, with its stderr).
    """
    world = World(MCP_WORLD, world_rows(spec, {"setup": []}))
    sandbox = provider.item_init(world, "probe-pass")
    out: list[ProbedCall] = []
    try:
        for probe in spec.probe_pass:
            sandbox.reset(World(MCP_WORLD, world_rows(spec, {"setup": [s.model_dump(exclude_none=True)
                                                                       for s in probe.setup]})))
            calls: list[dict[str, Any]] = []
            for _ in range(2 if probe.repeat else 1):
                result = sandbox.call(probe.name, dict(probe.arguments))
                calls.append({"name": probe.name, "arguments": dict(probe.arguments), "content": result.content,
                              "error": result.error, "executed": True, "mcp": dict(result.extras)})
            hints = effective_hints(dict(calls[0]["mcp"]).get("annotations"))
            out.append(ProbedCall(probe.name, dict(probe.arguments), hints, calls, violations(calls, step=0)))
    finally:
        provider.item_cleanup(sandbox, interrupted=False, keep=False)
    return out
