"""The files a run writes: checked before the first test, written so a failure loses nothing.

Used by :mod:`~pytest_tooleffect.settings` (the checks at configure time) and by the controller's
writers (the reporter, the gate keeper).  Three rules:

* every output path is checked at start by *trying* it (opening an existing file for append,
  creating and removing a probe file in the nearest existing folder), so a read-only file
  system, a path under a file or a ``/proc``-like folder is a usage error even for root, who
  passes every permission bit;
* no two outputs, and no output and an input the run reads (the baseline, the prices), are the
  same file;
* a write that fails at the end (a full disk) is reported, kept out of the "written to" lines and
  turns the exit status non-zero; a regular file is replaced only once its new text is
  completely on disk, so the previous one survives a failed write.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest

__all__ = ["OutputProblems", "check_distinct", "check_writable", "output_problems_key", "shown_path", "write_text"]


def check_writable(option: str, path: Path) -> None:
    """Refuse, before any test runs, an output path that cannot be written.

    Nothing is left behind: an existing file is opened for append and closed unchanged, and
    for a new path a probe file is created and removed in the nearest existing folder.

    Args:
        option: the option (or ini key) that named the path, for the message.
        path: the output path.

    Raises:
        pytest.UsageError: the path is a folder, lies under a file, or cannot be created or written.
    """
    if path.is_dir():
        raise pytest.UsageError(f"{option} {path}: is a directory; give a file path")
    try:
        if path.exists():
            with open(path, "a", encoding="utf-8"):
                pass
            return
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise NotADirectoryError(f"{parent} is not a folder")
        fd, probe = tempfile.mkstemp(prefix=".tooleffect-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise pytest.UsageError(f"{option} {path}: cannot be written ({why})") from None


def check_distinct(outputs: Iterable[tuple[str, Path | None]], inputs: Iterable[tuple[str, Path | None]] = ()) -> None:
    """Refuse two outputs that are one file, or an output that is a file the run reads.

    Args:
        outputs: ``(option, path)`` of every output the run writes (``None``: not written).
        inputs: ``(option, path)`` of files the run reads and must not overwrite.

    Raises:
        pytest.UsageError: naming both options and the file.
    """
    seen: dict[Path, str] = {}
    for option, path in inputs:
        if path is not None:
            seen.setdefault(_same(path), option)
    outs = [(option, path) for option, path in outputs if path is not None]
    for option, path in outs:
        key = _same(path)
        if key in seen:
            raise pytest.UsageError(f"{option} {path}: the same file as {seen[key]}; each output needs its own "
                                    "path (one would overwrite the other)")
        seen[key] = option


def shown_path(path: Path, start: Path | str) -> str:
    """An output path as the "written to" lines print it: relative to ``start`` (the directory pytest
    was started in) when it lies under it, else absolute; every output is printed the same way
    whether its option was given relative, absolute, or relative to the rootdir (an ini key).
    """
    full = Path(os.path.abspath(Path(start) / path))
    try:  # symbolic links resolved on both sides: pytest's start directory is the real one
        return str(full.resolve().relative_to(Path(start).resolve()))
    except (ValueError, OSError):
        return str(full)


def _same(path: Path) -> Path:
    return Path(os.path.realpath(path))


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; a regular file (or a new one) is replaced atomically.

    The text goes to a temporary file beside ``path``, is flushed to disk, then renamed over it:
    a full disk leaves the previous file as it was.  Anything else (a device, a pipe) is written
    in place.  The file gets the mode ``open()`` would give a new one (0666 less the umask; a
    temporary file's own 0600 would hide the report from the other users of a shared host).

    Args:
        path: the file (its folder is created).
        text: UTF-8 text.

    Raises:
        OSError: the file could not be written (the temporary file is removed).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_file():
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    """The process's umask: Linux's ``/proc/self/status`` (read, never changed: other threads may
    be creating files), else set and set back.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class OutputProblems:
    """What the run failed to write, in the order it happened (one line each).

    The controller's writers add to it; the gate keeper turns a non-empty list into a failed
    exit status (a run whose outputs are incomplete never exits 0) and the lines are printed.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        """Note one output that could not be written."""
        self.lines.append(line)

    def __bool__(self) -> bool:
        return bool(self.lines)


output_problems_key = pytest.StashKey[OutputProblems]()
