"""The files a run or a command writes: refused before anything is written when they would destroy
something, written so a failure loses nothing.

Used by the run's output check at configure time (:mod:`~pytest_tooleffect.report.outputs`), by the
controller's writers (the reporter, the gate keeper) and by every ``tooleffect`` command that takes
``--out``.  The rules:

* :func:`check_outputs` is the one check of every output path, before anything is written.  An
  output is refused when it resolves (symbolic links followed) to a folder or to anything else
  that is not a regular file (``/dev/null`` alone excepted: what is written there is discarded),
  to anything under ``/dev`` or ``/proc`` (as given or resolved), or to the very file of the
  process's standard output or error (``/dev/stdout`` redirected to a file: the terminal output
  would tear it).  A path ending in a separator (``reports/``) names a folder: it is refused where
  the option is parsed (:func:`~pytest_tooleffect.util.arguments.output_file`), as ``Path`` drops it,
  to a file the run or command reads (case and family files, oracle rules, ``pyproject.toml``, the
  baseline, …: the caller lists them), to an existing file the plugin wrote of another kind than the
  output writes (an output replaces only a file of its own kind: an earlier run's record log named
  as the page, or a baseline named as anything but a baseline, is refused, ``--force`` or not), or
  to the file another output names; and when *trying* it
  fails (an existing file opened for append, a probe file created and removed in the nearest
  existing folder), so a read-only file system, a path under a file or a ``/proc``-like folder is
  refused even for root, who passes every permission bit;
* :class:`OutputLock` keeps a file that a run writes over its whole length (the record log) to one
  run at a time: a second run naming it is refused, in words, with the holder's pid;
* a write that fails at the end (a full disk) is reported, kept out of the "written to" lines and
  turns the exit status non-zero; a regular file is replaced only once its new text is
  completely on disk, so the previous one survives a failed write.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pytest

from pytest_tooleffect.util.input_files import special_kind
from pytest_tooleffect.util.own_outputs import BASELINE_WORDS, is_own_output, may_replace, output_kind

__all__ = ["DISCARD", "SOURCE_SUFFIXES", "OutputLock", "OutputPathError", "OutputProblems", "check_outputs",
           "output_problems_key", "shown_path", "write_text"]

#: the one output path that is not a regular file and is still accepted: its text is thrown away
DISCARD = Path(os.devnull)


class OutputPathError(ValueError):
    """An output path refused before anything is written; the message names the option, the path and
    what writing there would do.  A run turns it into a usage error (exit 4), a command into one
    line on stderr (exit 2).
    """


#: suffixes of files no output of the plugin or its commands is (Python sources, configuration):
#: an existing one of them is never overwritten, whether or not this run reads it
SOURCE_SUFFIXES = frozenset({".py", ".pyi", ".toml", ".cfg", ".ini", ".pth", ".sh"})


def check_outputs(outputs: Iterable[tuple[str, Path | None]], reads: Iterable[tuple[str, Path | None]] = (),
                  reader: str = "this run", *, project: Iterable[tuple[str, Path | None]] = (),
                  force: bool | None = None, becomes: Callable[[Path], str | None] | None = None,
                  others_kept: bool = True, replace: bool | None = None,
                  kinds: Mapping[str, str] | None = None) -> None:
    """Refuse every output path that is no place to write, before anything is written.

    Args:
        outputs: ``(option, path)`` of each file the run or command writes (``None``: not written).
        reads: ``(what, path)`` of each file the run or command reads, ``what`` saying what it is
            (``"a case file of family demo"``, ``"the baseline (--tooleffect-baseline)"``); ``None``
            paths are skipped.  Paths are compared once resolved, so a symbolic link or another
            spelling of an input is that input.
        reader: who reads ``reads``, for the message (``"this run"``, ``"this command"``).
        project: ``(what, path)`` of the files the project's runs read that the caller does not
            (the case, family and rules files of the project's families): an output on one is
            refused unless ``force`` is true.
        force: the user said ``--force`` (replace ``project`` files); ``None``: the caller has no
            ``--force`` (they are always refused, and the message does not offer it).
        kinds: option → the kind of file it writes, in the words of
            :mod:`~pytest_tooleffect.util.own_outputs` (``{"--out": HTML_PAGE}``).  An output replaces only
            a file of its own kind: an existing file recognised as another kind the plugin writes (an
            earlier run's record log named as the page) is refused, ``--force`` or not.  An option not
            in it writes an unnamed kind: it never replaces a baseline, the file a team commits and
            gates every run on.
        becomes: what an output would become an input of, in words, or ``None`` (a new file in a
            family's folder named as a case file: ``"a case file of the family in cases/demo"``):
            such an output is refused.
        others_kept: an existing file that is not one the plugin writes (recognised by its content:
            :func:`~pytest_tooleffect.util.own_outputs.is_own_output`) is refused unless ``force``.
            ``False`` for a command that writes case or family files (its folder is checked instead).
        replace: the user said ``--force`` to replace such a file (``None``: the caller has no such
            option; the message does not offer it).

    Raises:
        OutputPathError: an output resolves to a folder or to something else that is not a regular
            file (``/dev/null`` excepted), lies under ``/dev`` or ``/proc``, is the file of the
            process's standard output or error, resolves to a file in ``reads``, to a file in
            ``project`` (unless ``force``), to an existing file the plugin wrote of another kind than the
            output's (``kinds``), to an existing file the plugin did not write (unless ``replace``, or
            ``others_kept`` is false), to a file ``becomes`` names, to the file of an earlier output, or cannot be
            created or written (a path under a file, a read-only file system).
    """
    read_by: dict[Path, str] = {}
    for what, path in reads:
        if path is not None:
            read_by.setdefault(_same(path), what)
    projects: dict[Path, str] = {}
    for what, path in project:
        if path is not None:
            projects.setdefault(_same(path), what)
    written: dict[Path, str] = {}
    for option, path in outputs:
        if path is None:
            continue
        real = _same(path)
        if real == DISCARD:
            continue
        shown = f"{option} {path}" + (f" (resolved: {real})" if os.path.abspath(path) != str(real) else "")
        kind = _not_regular(path) or _not_regular(real)
        if kind is not None:
            raise OutputPathError(f"{shown}: is {kind}, not a regular file; give a file path")
        stream = _standard_stream(path)
        if stream is not None:
            raise OutputPathError(f"{shown}: is this process's standard {stream}: the terminal output written there "
                                  f"would tear the file {option} writes; give a file path of its own")
        system = _system_folder(path, real)
        if system is not None:
            raise OutputPathError(f"{shown}: lies under {system}, which holds devices and processes' streams, not "
                                  "files; give a file path (/dev/null alone takes an output and discards it)")
        if real in read_by:
            raise OutputPathError(f"{shown}: is {read_by[real]}, which {reader} reads: writing {option} there "
                                  f"would overwrite it; give {option} a path of its own")
        if real in projects and not force:
            offer = (f"pass --force to replace it, or give {option} a path of its own" if force is not None
                     else f"give {option} a path of its own")
            raise OutputPathError(f"{shown}: is {projects[real]}, which the project's runs read: writing {option} "
                                  f"there would replace it; {offer}")
        if real in written:
            raise OutputPathError(f"{shown}: the same file as {written[real]}; each output needs its own "
                                  "path (one would overwrite the other)")
        _same_kind(option, shown, real, (kinds or {}).get(option))
        would_be = becomes(real) if becomes is not None else None
        if would_be is not None:
            raise OutputPathError(f"{shown}: would be collected as {would_be}: the next run would read the output "
                                  f"as cases; give {option} a path outside the family's folder, or another name")
        if real.suffix.lower() in SOURCE_SUFFIXES and real.exists():
            raise OutputPathError(f"{shown}: is an existing {real.suffix} file (source or configuration: a "
                                  f"conftest, an agent, pyproject.toml); no output is one, so writing {option} "
                                  f"there would destroy it; give {option} a path of its own")
        if others_kept and not replace and real.is_file() and not is_own_output(real):
            offer = (f"pass --force to replace it, or give {option} a path of its own" if replace is not None
                     else f"remove it first, or give {option} a path of its own")
            raise OutputPathError(f"{shown}: exists and is not a file tooleffect writes (a record log, report, "
                                  f"baseline, page, job summary or labels); writing {option} there would replace "
                                  f"it; {offer}")
        written[real] = option
        _try_writing(option, path)


def _same_kind(option: str, shown: str, real: Path, writes: str | None) -> None:
    """Refuse ``option`` on the existing file ``real`` when it holds another kind of the plugin's files
    than the kind ``writes`` (``None``: an unnamed kind, which replaces no baseline).
    """
    holds = output_kind(real) if real.is_file() else None
    if holds is None or (writes is not None and may_replace(writes, holds)):
        return
    if writes is None and holds != BASELINE_WORDS:
        return
    what = f"{option} writes {writes}" if writes is not None else f"{option} writes another kind of file"
    gated = " (the file runs and compare are gated on)" if holds == BASELINE_WORDS else ""
    raise OutputPathError(f"{shown}: holds {holds}{gated}; {what}: give {option} another path, or remove it first "
                          "(an output replaces only a file of its own kind)")


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (``None``: a regular file, or
    nothing yet: trying to write it says why it cannot be reached).
    """
    return special_kind(path)


#: folders of the system whose entries are devices, processes' streams or kernel state, never files
SYSTEM_FOLDERS = (Path("/dev"), Path("/proc"))


def _standard_stream(path: Path) -> str | None:
    """``"output"`` or ``"error"`` when ``path`` is the very file (device and inode) of this
    process's standard output or error (``/dev/stdout`` with stdout redirected to a file, or that
    file by its own name), else ``None``.
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    for fd, name in ((1, "output"), (2, "error")):
        try:
            std = os.fstat(fd)
        except OSError:
            continue
        if (std.st_dev, std.st_ino) == (st.st_dev, st.st_ino):
            return name
    return None


def _system_folder(path: Path, real: Path) -> Path | None:
    """The folder of :data:`SYSTEM_FOLDERS` that ``path`` (as given, made absolute) or ``real`` (its
    resolved path) lies under, or ``None``.
    """
    for candidate in (Path(os.path.abspath(path)), real):
        for folder in SYSTEM_FOLDERS:
            if candidate == folder or folder in candidate.parents:
                return folder
    return None


def _try_writing(option: str, path: Path) -> None:
    """Refuse an output path that cannot be written, leaving nothing behind: an existing file is
    opened for append and closed unchanged, and for a new path a probe file is created and removed
    in the nearest existing folder.
    """
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
        raise OutputPathError(f"{option} {path}: cannot be written ({why})") from None


class OutputLock:
    """One run at a time on a file a run writes over its whole length (the record log).

    The lock is an exclusive ``flock`` on ``.NAME.lock`` beside the file (its resolved path, so two
    spellings of one file share the lock), holding the holder's pid, host and start time.  The
    kernel drops it when the holder ends however it ends, so a killed run leaves no stale lock;
    :meth:`release` removes the lock file, and the folders :meth:`acquire` created for it when they
    are still empty.  Where ``flock`` does not exist (Windows) no lock is taken.

    Use :meth:`acquire`; ``path`` is the locked output.
    """

    def __init__(self, path: Path, lock_path: Path | None, fd: int | None, created: tuple[Path, ...] = ()) -> None:
        self.path, self.lock_path, self._fd, self._created = path, lock_path, fd, created

    @classmethod
    def acquire(cls, option: str, path: Path) -> OutputLock:
        """Take the lock on ``path`` (its folder is created), or refuse.

        Args:
            option: the option that named the path, for the message.
            path: the output file.

        Returns:
            The held lock.

        Raises:
            OutputPathError: another process holds it (the message names its pid), or the lock file
                cannot be created.
        """
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no flock on this system
            return cls(path, None, None)
        real = _same(path)
        lock_path = real.parent / f".{real.name}.lock"
        created: list[Path] = []
        try:
            missing = [p for p in (real.parent, *real.parent.parents) if not p.exists()]
            for folder in reversed(missing):
                try:
                    folder.mkdir()
                except FileExistsError:  # another process made it meanwhile: not ours to remove
                    continue
                created.append(folder)
            while True:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                        os.close(fd)
                        raise
                    try:
                        holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
                    finally:
                        os.close(fd)
                    _remove_empty(created)
                    raise OutputPathError(
                        f"{option} {path}: another run ({holder or 'its pid not written yet'}) is writing it now; "
                        "two runs on one file would mix or replace each other's output. Wait for that run to end, "
                        f"or give this run its own {option} PATH") from None
                try:
                    same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if same:  # else its holder removed it as we opened it: take the new one
                    break
                os.close(fd)
            note = (f"pid {os.getpid()} on {socket.gethostname()}, since "
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n").encode()
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, note, 0)
            except OSError:
                os.close(fd)
                raise
        except OSError as exc:
            _remove_empty(created)
            raise OutputPathError(f"{option} {path}: cannot be locked for this run ({lock_path}: "
                                  f"{exc.strerror or exc})") from None
        return cls(path, lock_path, fd, tuple(created))

    def release(self) -> None:
        """Remove the lock file and let the lock go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if self.lock_path is not None:
                os.unlink(self.lock_path)
        except OSError:
            pass
        finally:
            os.close(fd)
        _remove_empty(self._created)


def _remove_empty(created: Iterable[Path]) -> None:
    """Remove the folders of ``created`` (outermost first) that are still empty, innermost first."""
    for folder in reversed(list(created)):
        try:
            folder.rmdir()
        except OSError:  # something was written there: kept, with the folders around it
            return


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
    in place.  A symbolic link is itself replaced by the new file (its target left as it was: an
    output is never written through a link).  The file gets the mode
    ``open()`` would give a new one (0666 less the umask; a temporary file's own 0600 would hide
    the report from the other users of a shared host).

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
