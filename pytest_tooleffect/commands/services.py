"""The commands that reach outside the records: ``import`` (a case family from a public dataset),
``serve`` (recorded decisions as a local OpenAI-compatible model), ``model`` (the real local
model: build, fetch, serve, stop) and ``sandbox`` (the image and its containers).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["cmd_import", "cmd_model", "cmd_sandbox", "cmd_serve"]


def cmd_import(args: argparse.Namespace) -> int:
    """``tooleffect import``: build a case family from a public dataset (tau-airline, BFCL,
    ToolTalk) or from labelled JSON-lines rows.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when built; 1 when some rows or conversations were refused (each named on stderr);
        2 for missing inputs or bad options, or an output folder holding files this import did not write
        (a hand-authored family, another source's) without ``--force``.
    """
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.util.own_outputs import FAMILY_FILES

    force = bool(getattr(args, "force", False))

    def check_family(out: Path, command: str, names: tuple[str, ...], reads: list[tuple[str, Path | None]]) -> None:
        """The one check of an import's family folder and files, before anything is written."""
        check_command_outputs([("--out", out / name) for name in names], reads, families=False, force=force,
                              family=("--out", out, command), kinds={"--out": FAMILY_FILES})

    if args.source == "mcp":
        from pytest_tooleffect.commands.mcp_import import cmd_import_mcp

        return cmd_import_mcp(args)
    shared = Path(args.shared)
    if args.source == "tooltalk":
        from pytest_tooleffect.commands import check_output_folder
        from pytest_tooleffect.data.importers.tooltalk import import_tooltalk

        check_output_folder("--out", Path(args.out or "cases/tooltalk"), "the import writes the family into it")
        src = shared / "datasets" / "tooltalk"
        if not (src / "data").is_dir():
            print(f"tooleffect import: {src.resolve()} not found; pass --shared DIR or set TOOLEFFECT_SHARED",
                  file=sys.stderr)
            return 2
        out = Path(args.out or "cases/tooltalk")
        check_family(out, "tooleffect import tooltalk", ("family.yaml", "cases.jsonl", "NOTICE.md"), [])
        try:
            print(json.dumps(import_tooltalk(src, out)))
        except (ValueError, OSError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.source == "labelled-jsonl":
        from pytest_tooleffect.data.importers.labelled_jsonl import IMPORT_LABELLED, import_labelled_jsonl

        if not args.input or not args.out:
            print("tooleffect import labelled-jsonl: give --input ROWS.jsonl and --out FAMILY_DIR", file=sys.stderr)
            return 2
        from pytest_tooleffect.commands import check_output_folder

        out = Path(args.out)
        check_output_folder("--out", out, "the import writes the family into it")
        check_family(out, IMPORT_LABELLED, ("family.yaml", "cases.jsonl"),
                     [("the rows it imports (--input)", Path(args.input))])
        try:
            counts, problems = import_labelled_jsonl(Path(args.input), Path(args.out))
        except (ValueError, OSError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        for problem in problems:
            print(f"tooleffect import: {problem}", file=sys.stderr)
        print(json.dumps(counts))
        return 1 if problems else 0
    if args.source == "bfcl":
        from pytest_tooleffect.commands import check_output_folder
        from pytest_tooleffect.data.importers.bfcl import import_bfcl

        check_output_folder("--out", Path(args.out or "bfcl"), "the import writes one family folder per category "
                                                               "into it")
        src = shared / "datasets" / "bfcl"
        if not src.is_dir():
            print(f"tooleffect import: {src.resolve()} not found; pass --shared DIR or set TOOLEFFECT_SHARED",
                  file=sys.stderr)
            return 2
        from pytest_tooleffect.data.importers.bfcl import CATEGORIES
        from pytest_tooleffect.data.importers.bfcl_multi_turn import MULTI_TURN, import_multi_turn
        from pytest_tooleffect.sandbox import SandboxError

        asked = args.category or [*CATEGORIES, *MULTI_TURN]
        strange = [c for c in asked if c not in CATEGORIES and c not in MULTI_TURN]
        if strange:
            print(f"tooleffect import: unknown BFCL category {strange[0]!r} (known: "
                  f"{', '.join([*CATEGORIES, *MULTI_TURN])})", file=sys.stderr)
            return 2
        if args.limit is not None and args.limit < 1:
            print(f"tooleffect import: --limit must be at least 1 (got {args.limit})", file=sys.stderr)
            return 2
        refused: list[str] = []

        def refuse(line: str) -> None:
            refused.append(line)
            print(f"tooleffect import: {line}", file=sys.stderr)

        try:
            from pytest_tooleffect.data.importers.bfcl import check_entry_ids

            for category in asked:  # every category's ids before any family is written: a refusal writes nothing
                check_entry_ids(src / (CATEGORIES[category] if category in CATEGORIES else MULTI_TURN[category])[0])
                check_family(Path(args.out or "bfcl") / category, "tooleffect import bfcl",
                             ("family.yaml", "rules.yaml", "cases.jsonl", "rejected.json"), [])
            single = [c for c in asked if c in CATEGORIES]
            counts = import_bfcl(src, Path(args.out or "bfcl"), single) if single else {}
            for category in (c for c in asked if c in MULTI_TURN):
                counts[category] = import_multi_turn(src, Path(args.out or "bfcl"), category, args.limit, refuse)
        except (ValueError, OSError, SandboxError) as exc:
            print(f"tooleffect import: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(counts))
        return 1 if refused else 0
    from pytest_tooleffect.data.importers.tau_airline import DEFAULT_QUOTA, build_family

    if args.quota is not None:
        unknown = set(args.quota) - set(DEFAULT_QUOTA)
        if unknown or any(n <= 0 for n in args.quota.values()):
            print(f"tooleffect import: --quota buckets are {', '.join(DEFAULT_QUOTA)} with positive counts "
                  f"(got {args.quota})", file=sys.stderr)
            return 2

    from pytest_tooleffect.commands import check_output_folder

    check_output_folder("--out", Path(args.out or "cases/tau-airline"), "the import writes the family into it")
    if not args.trajectories and not (shared / "datasets").is_dir():
        print(f"tooleffect import: {shared.resolve()}/datasets not found; run from the repository root "
              "(../shared beside it), pass --shared DIR or set TOOLEFFECT_SHARED", file=sys.stderr)
        return 2
    trajectories = Path(args.trajectories or shared / "datasets/tau-bench/historical_trajectories/gpt-4o-airline.json")
    tools = Path(args.tools or shared / "datasets/tau-bench/airline_tools.json")
    out = Path(args.out or "cases/tau-airline")
    check_family(out, "tooleffect import tau-airline", ("family.yaml", "cases.jsonl", "tools.json", "system_prompt.md",
                                                        "labels/rules.jsonl"),
                 [("the trajectories (--trajectories)", trajectories), ("the tools (--tools)", tools)])
    try:
        counts = build_family(trajectories, tools, out, args.quota, args.seed)
    except Exception as exc:  # unreadable inputs: one line, not a traceback
        print(f"tooleffect import: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(counts))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """``tooleffect serve``: serve the recorded decisions under ``--cases`` as a local
    OpenAI-compatible model until Ctrl-C.

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 on Ctrl-C; 2 for a missing cases folder or a port that cannot be bound.
    """
    import time

    from pytest_tooleffect.servers.recorded import recorded_server

    if not Path(args.cases).is_dir():
        print(f"tooleffect serve: --cases {args.cases}: no such folder", file=sys.stderr)
        return 2
    try:  # a server that keeps no request body past its request
        server, states, keyed_on = recorded_server(Path(args.cases), port=args.port,
                                                   system=not args.ignore_system_prompt)
    except (OSError, OverflowError) as exc:
        print(f"tooleffect serve: port {args.port}: {exc}", file=sys.stderr)
        return 2
    with server as srv:
        print(f"tooleffect serve: {states} recorded states at {srv.base_url} (OpenAI chat format, keyed on "
              f"{keyed_on}; the case files are read again when they change); Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


def cmd_model(args: argparse.Namespace) -> int:
    """``tooleffect model serve|stop|status|fetch``: the real local model (llama-server on
    127.0.0.1).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when done (``serve``: once it answers with ``--detach``, else on Ctrl-C); 1 when
        ``status`` finds none running or the served process ends; 2 for a failure of the local model.
    """
    import time

    from pytest_tooleffect.servers import local_model as localmodel

    def say(text: str) -> None:
        print(f"tooleffect model: {text}", file=sys.stderr, flush=True)

    try:
        if args.action == "stop":
            pid = localmodel.stop()
            print(f"stopped llama-server pid {pid}" if pid else "no llama-server was running")
            return 0
        if args.action == "status":
            server = localmodel.running()
            print(f"llama-server pid {server.pid} at {server.api_base} serving {server.model}" if server
                  else "no llama-server is running")
            return 0 if server else 1
        if args.action == "fetch":
            print(localmodel.ensure_server(log=say))
            print(localmodel.ensure_weights(log=say))
            return 0
        t0 = time.monotonic()
        server = localmodel.serve(port=args.port, threads=args.threads, max_tokens=args.max_tokens, log=say)
        print(f"llama-server pid {server.pid} at {server.api_base} serving {server.model} "
              f"(ready in {time.monotonic() - t0:.1f} s; log {server.log})", flush=True)
        if args.detach:
            return 0
        try:
            while localmodel.running() is not None:
                time.sleep(2)
            return 1
        except KeyboardInterrupt:
            localmodel.stop()
            return 0
    except localmodel.LocalModelError as exc:
        print(f"tooleffect model {args.action}: {exc}", file=sys.stderr)
        return 2


def cmd_sandbox(args: argparse.Namespace) -> int:
    """``tooleffect sandbox build|tag|list|clean|probe``: the sandbox image and its containers, and an
    MCP family's probe pass (:mod:`pytest_tooleffect.commands.mcp_probe`).

    Args:
        args: the parsed command line.

    Returns:
        The exit status: 0 when done; 2 for a sandbox failure (Docker unreachable, a build that fails).
    """
    from pytest_tooleffect.sandbox.environment import SandboxError
    from pytest_tooleffect.sandbox.image import build_image, context_dir, docker_client, image_tag

    if args.action == "probe":
        from pytest_tooleffect.commands.mcp_probe import cmd_probe

        return cmd_probe(args)
    try:
        if args.action == "build":
            tag = build_image(force=args.force, log=lambda m: print(m, file=sys.stderr))
            print(tag)
            return 0
        if args.action == "tag":
            print(image_tag())
            return 0
        from pytest_tooleffect.sandbox.docker import (
            KEPT_PREFIX,
            LABEL,
            remove_container,
            sandbox_containers,
            sweep_leftovers,
        )

        client = docker_client()
        if args.action == "clean":
            removed = sweep_leftovers(client)
            if args.kept:
                for container, name, labels in sandbox_containers(client):
                    if name.startswith(KEPT_PREFIX):
                        remove_container(container, labels)
                        removed.append(container.id)
            print(f"removed {len(removed)} sandbox container(s)")
            return 0
        print(f"image {image_tag()} (context {context_dir()})")
        for container, name, labels in sandbox_containers(client):
            print(f"{container.short_id} {name} {container.attrs.get('State', '?')} "
                  f"run={labels.get(LABEL + '.run', '?')[:8]} worker={labels.get(LABEL + '.worker', '?')}")
        return 0
    except SandboxError as exc:
        print(f"tooleffect sandbox {args.action}: {exc}", file=sys.stderr)
        return 2
