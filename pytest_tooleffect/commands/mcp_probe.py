"""``tooleffect sandbox probe cases/FAMILY``: an MCP family's probe pass, printed.

Each call of the family's ``sandbox.mcp.probe_pass`` runs on its ``setup`` state
(:func:`~pytest_tooleffect.sandbox.mcp_probe_pass.probe_pass`); one line per call says the
tool's hints, what changed and whether the hints held.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

__all__ = ["cmd_probe"]


def cmd_probe(args: argparse.Namespace) -> int:
    """Run and print a family's probe pass.

    Args:
        args: ``family`` (its folder) and ``provider`` (``docker`` or ``local``).

    Returns:
        The exit status: 0 when every hint held, 1 when some call contradicted its tool's hints,
        2 when the family has no probe pass, a probe names a tool the family does not have
        (``sandbox.mcp.probe_pass[i].name``), or the sandbox (or the server) failed.
    """
    from pytest_tooleffect.collect.family import FamilyError, load_family
    from pytest_tooleffect.decide.mcp_faults import server_failure
    from pytest_tooleffect.sandbox import SandboxError, provider_class
    from pytest_tooleffect.sandbox.mcp_probe_pass import probe_pass
    from pytest_tooleffect.util.display import shown
    from pytest_tooleffect.util.redaction import redact

    if not args.family:
        print("tooleffect sandbox probe: name the family's folder (cases/NAME)", file=sys.stderr)
        return 2
    try:
        family = load_family(Path(args.family))
    except FamilyError as exc:
        print(f"tooleffect sandbox probe: {exc}", file=sys.stderr)
        return 2
    spec = family.family.sandbox.mcp if family.family.sandbox is not None else None
    if spec is None or not spec.probe_pass:
        print(f"tooleffect sandbox probe: {args.family}/family.yaml: sandbox.mcp.probe_pass: the family lists no "
              "probe pass (an MCP world's calls to check on its setup state)", file=sys.stderr)
        return 2
    listed = {n for t in family.tools for n in (t.name, t.mcp_name) if n}
    for i, probe in enumerate(spec.probe_pass):
        if probe.name not in listed:  # a hint check of a tool the family does not have holds nothing
            where = f"{shown(Path(args.family) / 'family.yaml')}: sandbox.mcp.probe_pass[{i}].name"
            print(f"tooleffect sandbox probe: {where}: {shown(probe.name)!r} is not a tool of the family "
                  f"({family.family.tools_file or 'its tools'}); name one of its tools, or import the "
                  "server's list again (tooleffect import mcp)", file=sys.stderr)
            return 2
    kwargs = {"pool": True, "image": None} if args.provider == "docker" else {}
    provider = provider_class(args.provider)(uuid.uuid4().hex, os.getpid(), "probe", **kwargs)
    try:
        provider.session_init()
        probed = probe_pass(provider, spec)
    except SandboxError as exc:
        failure = server_failure(str(exc))
        # the server's words as the run shows them: control characters as visible escapes
        print(f"tooleffect sandbox probe: {shown(redact(failure.message if failure else str(exc)))}", file=sys.stderr)
        if failure is not None and failure.stderr:
            print(f"the server's stderr (last lines):\n{shown(redact(failure.stderr), lines=True)}", file=sys.stderr)
        return 2
    finally:
        provider.session_cleanup()
    found = [v for p in probed for v in p.violations]
    print(f"probe pass of {family.name}: {len(probed)} calls on the setup state")
    for p in probed:
        hints = ", ".join(k for k, v in p.hints.items() if v) or "no hint true"
        times = " ×2" if len(p.calls) > 1 else ""
        changed = "; ".join(p.diff[:3]) or "no change"
        verdict = ", ".join(v.kind.replace("_", " ") for v in p.violations) or "hints hold"
        print(shown(f"  {p.name}{times} [{hints}]: {changed} · {verdict}"))
    print(f"annotation violations: {len(found)}" + (" (findings against the server)" if found else ""))
    return 1 if found else 0
