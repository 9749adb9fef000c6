"""An MCP server's failure in the sandbox as the item's error, never a verdict.

The MCP world (``sandbox/worlds/mcp.py``) refuses a request the server failed with
``McpServerFault: {kind, message, stderr}`` (crash, hang, malformed JSON-RPC, a result breaking its
``outputSchema``, a changed tool list); :func:`server_failure` reads it back.
"""

from __future__ import annotations

import json

from pytest_tooleffect.outcomes import Failure
from pytest_tooleffect.sandbox.mcp_world import FAULT_MARK, STDERR_LIMIT

__all__ = ["server_failure"]


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
