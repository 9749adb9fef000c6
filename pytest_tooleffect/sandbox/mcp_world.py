"""The MCP world on the client side: the seed a family's server becomes, and its faults as errors.

A family whose ``sandbox`` names ``world: mcp`` gives its server in ``sandbox.mcp``
(:class:`~pytest_tooleffect.formats.McpWorld`); :func:`world_rows` adds it to a case's ``setup``
rows as the seed table ``server`` the world in ``sandbox/worlds/mcp.py`` reads.  When the server
fails (crash, hang, malformed JSON-RPC, a result breaking its ``outputSchema``, a changed tool
list) the world refuses the request with ``McpServerFault: {kind, message, stderr}``;
:func:`pytest_tooleffect.decide.mcp_faults.server_failure` turns that into the item's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.formats.mcp import McpWorld

__all__ = ["FAULT_MARK", "MCP_WORLD", "STDERR_LIMIT", "world_rows"]

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
