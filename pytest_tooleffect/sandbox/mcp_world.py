"""The MCP world on the client side: the seed a family's server becomes, and its faults as errors.

A family whose ``sandbox`` names ``world: mcp`` gives its server in ``sandbox.mcp``
(:class:`~pytest_tooleffect.formats.McpWorld`); :func:`world_rows` adds it to a case's ``setup``
rows as the seed table ``server`` the world in ``sandbox/worlds/mcp.py`` reads.  When the server
fails (crash, hang, malformed JSON-RPC, a result breaking its ``outputSchema``, a changed tool
list) the world refuses the request with ``McpServerFault: {kind, message, stderr}``;
:func:`server_failure` turns that into the item's error (:class:`~pytest_tooleffect.outcomes.Failure`
with the server's standard error kept, bounded), never a verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.formats import McpWorld
from pytest_tooleffect.outcomes import Failure

__all__ = ["FAULT_MARK", "MCP_WORLD", "STDERR_LIMIT", "server_failure", "world_rows"]

#: the world module's name (``sandbox/worlds/mcp.py``)
MCP_WORLD = "mcp"
#: how the world marks a refusal that is the server's failure
FAULT_MARK = "McpServerFault: "
#: the longest stderr tail kept in a record, characters (the world sends at most this many)
STDERR_LIMIT = 2000


def world_rows(spec: McpWorld, rows: Mapping[str, Any]) -> dict[str, Any]:
    """A case's seed rows with the server row the MCP world needs.

    Args:
        spec: the family's ``sandbox.mcp``.
        rows: the case's ``world`` (its ``setup`` rows).

    Returns:
        ``{"setup": [the family's steps, then the case's], "server": [{name, command, probe,
        timeout_s, root_alias, env}]}``.
    """
    server = {"name": "server", "command": list(spec.command), "probe": spec.probe, "timeout_s": spec.timeout_s,
              "root_alias": spec.root_alias, "env": dict(spec.env)}
    setup = [s.model_dump(exclude_none=True) for s in spec.setup] + list(rows.get("setup") or [])
    return {**dict(rows), "setup": setup, "server": [server]}


def server_failure(message: str) -> Failure | None:
    """The item's error for a sandbox message that carries an MCP server's fault, else ``None``.

    Args:
        message: the :class:`~pytest_tooleffect.sandbox.SandboxError`'s text.

    Returns:
        ``Failure("McpServerFault", "<kind>: <what happened>", stderr=<tail>)``, or ``None``.
    """
    at = message.find(FAULT_MARK)
    if at < 0:
        return None
    try:
        payload = json.loads(message[at + len(FAULT_MARK):])
    except ValueError:
        return Failure("McpServerFault", message[at + len(FAULT_MARK):][:500])
    if not isinstance(payload, dict):
        return None
    stderr = str(payload.get("stderr") or "")[-STDERR_LIMIT:] or None
    text = " ".join(f"{payload.get('kind')}: {payload.get('message')}".split())[:500]
    return Failure("McpServerFault", text, stderr=stderr)
