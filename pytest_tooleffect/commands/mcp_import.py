"""``tooleffect import mcp``: a live MCP server's tools written as a family."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

__all__ = ["cmd_import_mcp"]


def _folder_name(server: str) -> str:
    """A family folder name for a server's name: what a case id may hold, else ``mcp``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", server).strip("-.")
    return name or "mcp"


def cmd_import_mcp(args: argparse.Namespace) -> int:
    """List a server's tools (stdio: the command after ``--``; streamable HTTP: ``--url``) and write
    the family (``--out``; default ``cases/<server name>``).

    Args:
        args: the parsed command line (``server_command``, ``url``, ``out``, ``timeout``, ``force``).

    Returns:
        0 when written (a JSON summary on stdout; a warning on stderr when the server listed no
        tools or gave hints that are not booleans, which are read as not declared); 2 when the
        server could not be listed, the options are wrong, or ``--out`` holds files this import
        did not write and ``--force`` was not given.
    """
    from pytest_tooleffect.commands import check_command_outputs, check_output_folder
    from pytest_tooleffect.data.importers.mcp import IMPORT_MCP, McpImportError, import_mcp, list_catalog
    from pytest_tooleffect.formats import McpSource
    from pytest_tooleffect.util.display import shown
    from pytest_tooleffect.util.own_outputs import FAMILY_FILES

    command = list(args.server_command or [])
    if bool(command) == bool(args.url):
        print("tooleffect import mcp: give the server's command after -- (stdio) or --url URL (streamable HTTP), "
              "not both: tooleffect import mcp --out cases/NAME -- python -m mcp_server_git --repository REPO",
              file=sys.stderr)
        return 2
    if args.timeout is not None and not args.timeout > 0:
        print(f"tooleffect import mcp: --timeout must be more than 0 seconds (got {args.timeout})", file=sys.stderr)
        return 2
    if args.out:
        check_output_folder("--out", Path(args.out), "the import writes the family into it")
    try:
        catalog = list_catalog(command or None, args.url or None, timeout=args.timeout or 60.0)
    except McpImportError as exc:
        print(f"tooleffect import mcp: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or Path("cases") / _folder_name(catalog.server.name))
    check_output_folder("--out", out, "the import writes the family into it")
    check_command_outputs([("--out", out / name) for name in ("family.yaml", "tools.json")], [], families=False,
                          force=bool(args.force), family=("--out", out, IMPORT_MCP), kinds={"--out": FAMILY_FILES})
    source = McpSource(server=catalog.server, transport="stdio" if command else "streamable-http",
                       command=command or None, url=args.url or None)
    try:
        summary = import_mcp(out, catalog, source)
    except McpImportError as exc:
        print(f"tooleffect import mcp: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"out": str(out), **summary}))
    if not summary["tools"]:
        print(f"tooleffect import mcp: warning: the server listed no tools: {out}/tools.json is empty, so every case "
              "of the family can only expect no call", file=sys.stderr)
    if summary["trust"] == "reset":
        print(f"tooleffect import mcp: warning: trust_annotations went back to false in {out}/family.yaml: the "
              "server or its tools changed since it was set; check the hints again (tooleffect sandbox probe) "
              "before trusting them", file=sys.stderr)
    if summary["ignored_hints"]:
        print(f"tooleffect import mcp: warning: hints not of MCP's type were read as not declared (MCP's worst-case "
              f"default): {shown('; '.join(summary['ignored_hints']), limit=1000)}", file=sys.stderr)
    return 0
