"""State probes and builders for MCP worlds, standard library only (runs inside the sandbox).

A *probe* reads the state an MCP server acts on as tables, so the effect checks that judge a
table world judge an MCP world unchanged.  :data:`PROBES` maps a probe's name to its function
``probe(root) -> {table: [row]}``; every table is in :data:`TABLES`.

* ``git``: the repository at ``root``: ``head`` (the branch HEAD names and its commit),
  ``refs`` (every ref and its commit), ``commits`` (every commit reachable from a ref: parents
  and subject), ``index`` (path, stage, mode, blob) and ``worktree`` (every file outside
  ``.git``: its git blob id and size).
* ``files``: the ``worktree`` table of the directory ``root`` alone.

:func:`lost` says what a change removed for good (a non-destructive tool must remove nothing);
:func:`build` makes a world's directory from its ``setup`` rows, deterministically (fixed
authors, dates and an empty template), so two builds of one seed are byte-identical repositories.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

#: tables every probe's rows fit in, ``{table: {"key": column, "columns": {column: type}}}``
TABLES: dict[str, dict[str, Any]] = {
    "head": {"key": "name", "columns": {"name": "TEXT", "ref": "TEXT", "commit": "TEXT"}},
    "refs": {"key": "name", "columns": {"name": "TEXT", "commit": "TEXT"}},
    "commits": {"key": "commit", "columns": {"commit": "TEXT", "parents": "TEXT", "subject": "TEXT"}},
    "index": {"key": "path", "columns": {"path": "TEXT", "stage": "INTEGER", "mode": "TEXT", "blob": "TEXT"}},
    "worktree": {"key": "path", "columns": {"path": "TEXT", "blob": "TEXT", "size": "INTEGER"}},
}
#: the date of a setup's first commit; each later setup step is one minute later
EPOCH = 1767225600  # 2026-01-01T00:00:00Z


def git_env(base: dict[str, str], home: str, step: int = 0) -> dict[str, str]:
    """An environment in which git is deterministic and reads no user or system configuration."""
    date = f"@{EPOCH + 60 * step} +0000"
    return {**base, "HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": "Dana Example", "GIT_AUTHOR_EMAIL": "dana@example.org", "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": "Dana Example", "GIT_COMMITTER_EMAIL": "dana@example.org",
            "GIT_COMMITTER_DATE": date, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def _git(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, timeout=20)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()[:300]}")
    return done.stdout.decode(errors="replace")


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (SHA-1 of ``blob <size>``, a NUL byte and ``data``, as ``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def worktree(root: Path, contents: dict[str, bytes] | None = None) -> list[dict[str, Any]]:
    """Every file under ``root`` outside ``.git``: path (``/``-separated), blob id, size (and each
    file's bytes into ``contents`` when given).
    """
    rows = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            path = Path(folder) / name
            data = path.read_bytes() if not path.is_symlink() else os.readlink(path).encode()
            rows.append({"path": path.relative_to(root).as_posix(), "blob": blob_id(data), "size": len(data)})
            if contents is not None:
                contents[rows[-1]["path"]] = data
    return rows


def probe_files(root: Path, env: dict[str, str], contents: dict[str, bytes] | None = None
                ) -> dict[str, list[dict[str, Any]]]:
    """The ``files`` probe: the directory's work tree alone."""
    return {"head": [], "refs": [], "commits": [], "index": [], "worktree": worktree(root, contents)}


def probe_git(root: Path, env: dict[str, str], contents: dict[str, bytes] | None = None
              ) -> dict[str, list[dict[str, Any]]]:
    """The ``git`` probe (see the module docstring)."""
    refs = []
    for line in _git(root, env, "for-each-ref", "--format=%(refname) %(objectname)").splitlines():
        name, _, commit = line.partition(" ")
        refs.append({"name": name, "commit": commit})
    head_text = (root / ".git" / "HEAD").read_text().strip()
    by_name = {r["name"]: r["commit"] for r in refs}
    if head_text.startswith("ref: "):
        ref = head_text[5:]
        head = {"name": "HEAD", "ref": ref, "commit": by_name.get(ref)}
    else:
        head = {"name": "HEAD", "ref": None, "commit": head_text}
    commits = []
    if refs or head["commit"]:
        log = _git(root, env, "log", "--all", *(["HEAD"] if head["commit"] else []), "--format=%H%x00%P%x00%s")
        for line in log.splitlines():
            commit, parents, subject = (line.split("\0") + ["", ""])[:3]
            commits.append({"commit": commit, "parents": parents, "subject": subject})
    index = []
    for entry in _git(root, env, "ls-files", "--stage", "-z").split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            mode, blob, stage = meta.split()
            index.append({"path": path, "stage": int(stage), "mode": mode, "blob": blob})
    return {"head": [head], "refs": refs, "commits": commits, "index": index, "worktree": worktree(root, contents)}


PROBES = {"git": probe_git, "files": probe_files}


def lost(probe: str, root: Path, env: dict[str, str], before: dict[str, list[dict[str, Any]]],
         after: dict[str, list[dict[str, Any]]], contents: dict[str, bytes] | None = None) -> list[str]:
    """What the change from ``before`` to ``after`` removed for good, one line each.

    ``files``: a file's content found nowhere in the work tree after (a file whose new content
    begins with its old one was appended to: nothing lost).  ``git``: besides, a work-tree or
    index blob found neither in the work tree, the index nor any commit reachable after; a ref
    deleted, or moved off a commit no ref reaches any more.  ``contents``: the work tree's bytes
    before the change, by path.
    """
    now = {r["blob"] for r in after["worktree"]} | {r["blob"] for r in after["index"]}
    appended = set()
    if contents is not None:
        for path, data in contents.items():
            target = root / path
            try:
                if target.is_file() and target.stat().st_size >= len(data):
                    with target.open("rb") as handle:
                        appended.add(path) if handle.read(len(data)) == data else None
            except OSError:
                pass
    gone = [(table, r) for table in ("worktree", "index") for r in before[table]
            if r["blob"] not in now and not (table == "worktree" and r["path"] in appended)]
    refs_after = {r["name"]: r["commit"] for r in after["refs"]}
    moved = [r for r in before["refs"] if refs_after.get(r["name"]) != r["commit"]]
    if probe != "git":
        return [f"{table} {r['path']} (blob {r['blob'][:7]}) is gone" for table, r in gone]
    if not gone and not moved:
        return []
    listing = _git(root, env, "rev-list", "--objects", "--all", *(["HEAD"] if after["head"][0]["commit"] else []))
    reachable = {line.split(" ", 1)[0] for line in listing.splitlines()}
    out = [f"{table} {r['path']} (blob {r['blob'][:7]}) is in no commit, index entry or file any more"
           for table, r in gone if r["blob"] not in reachable]
    for r in moved:
        if r["commit"] not in reachable:
            where = "deleted" if r["name"] not in refs_after else f"moved to {str(refs_after[r['name']])[:7]}"
            out.append(f"ref {r['name']} {where}: commit {r['commit'][:7]} is reachable from no ref")
    return out


def build(root: Path, rows: list[dict[str, Any]], env: dict[str, str], home: str) -> None:
    """Make the directory ``root`` from ``setup`` rows, in ``step`` order.

    Ops: ``init`` (``git init`` on branch ``name``, default ``main``), ``write`` (``path`` gets
    ``content``), ``delete`` (``path``), ``git`` (``args``: one git command), ``commit``
    (everything staged, message ``content``).

    Raises:
        ValueError: an unknown op or a missing field (the message names the step).
        RuntimeError: a git command failed.
    """
    root.mkdir(parents=True, exist_ok=True)
    for row in sorted(rows, key=lambda r: r.get("step", 0)):
        step, op = int(row.get("step", 0)), row.get("op")
        genv = git_env(env, home, step)
        if op == "init":
            _git(root, genv, "init", "--quiet", "--template=", "-b", str(row.get("name") or "main"))
            _git(root, genv, "config", "core.trustctime", "false")
            _git(root, genv, "config", "core.checkStat", "minimal")
        elif op == "write":
            path = root / _relative(row, step)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(row.get("content") or ""))
        elif op == "delete":
            (root / _relative(row, step)).unlink()
        elif op == "git":
            args = row.get("args")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError(f"setup step {step}: git needs args, a list of strings")
            _git(root, genv, *args)
        elif op == "commit":
            _git(root, genv, "add", "--all")
            _git(root, genv, "commit", "--quiet", "--no-verify", "-m", str(row.get("content") or f"step {step}"))
        else:
            raise ValueError(f"setup step {step}: unknown op {op!r} (init, write, delete, git, commit)")


def _relative(row: dict[str, Any], step: int) -> str:
    path = row.get("path")
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in Path(path).parts:
        raise ValueError(f"setup step {step}: path must be a relative path inside the world")
    return path
