"""The files a run or a command reads, opened so that no input can exhaust memory or hang the reader.

Every input (record logs, JSON reports, baselines, case and family files, label files, traces,
the prices and ``pyproject.toml``) is opened by :func:`open_input` or read whole by
:func:`read_input_bytes` / :func:`read_input_text`:

* a regular file is read up to :func:`max_input_bytes` (1 GiB, or ``TOOLEFFECT_MAX_INPUT_BYTES``):
  a larger one is refused before a byte of it is read;
* a pipe (``/dev/stdin`` fed by a pipe, a shell's ``<(…)``) is read as it comes, up to the same
  limit, and opened without waiting for a writer (a pipe nobody writes to reads as empty);
* anything else (a folder, a character device such as ``/dev/zero`` or a terminal, a block device,
  a socket) is refused at once: none of them is a file of records, cases or labels;
* a case or family file (and the files a family file names) is read only when it is a regular
  file (``pipes=False``): a named pipe among them is refused too, so collection never waits on one
  and never reads it as empty.

Each refusal is an :class:`InputFileError`, an :class:`OSError` naming the file, so every caller
that reports an unreadable file reports these too; :func:`not_an_input` says the same in words
without opening anything (for a command that checks its arguments first).

A pipe can be read once.  Inside :func:`pipes_read_once` (the ``tooleffect`` command runs each
command in it) a pipe is read whole the first time it is opened and every later opening of the same
pipe reads those bytes again, so a command that reads its input twice (to tell a report from a
record log, then to read the records) reads a pipe as it reads a file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["DEFAULT_MAX_INPUT_BYTES", "MAX_INPUT_ENV", "InputFileError", "empty_pipe", "max_input_bytes",
           "not_an_input", "open_input", "pipes_read_once", "read_input_bytes", "read_input_text", "special_kind"]

#: the most bytes read from one input unless :data:`MAX_INPUT_ENV` says otherwise (1 GiB)
DEFAULT_MAX_INPUT_BYTES = 1 << 30
#: the environment variable that sets another limit, in bytes
MAX_INPUT_ENV = "TOOLEFFECT_MAX_INPUT_BYTES"


class InputFileError(OSError):
    """An input refused: not a regular file or a pipe, or longer than the limit.

    ``strerror`` says why, ``filename`` names the file; ``str()`` is ``path: why``.
    """

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def max_input_bytes() -> int:
    """The most bytes one input may hold: ``TOOLEFFECT_MAX_INPUT_BYTES``, else 1 GiB.

    Raises:
        ValueError: the variable is set to something other than a whole number of bytes above 0.
    """
    raw = os.environ.get(MAX_INPUT_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_INPUT_BYTES
    if not (raw.isascii() and raw.isdigit() and int(raw) > 0):
        raise ValueError(f"{MAX_INPUT_ENV}={raw!r}: the most bytes one input file may hold, a whole number above 0")
    return int(raw)


def _file_kind(mode: int) -> str | None:
    """What a file of ``mode`` is in words when it is not a regular file (``None``: a regular file)."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "a special file"


def special_kind(path: Path | str) -> str | None:
    """What ``path`` reaches (symbolic links followed) when it exists and is not a regular file:
    ``"a directory"``, ``"a character device"``, ``"a block device"``, ``"a named pipe (FIFO)"``,
    ``"a socket"`` or ``"a special file"``; ``None`` for a regular file or a path that cannot be
    reached (missing, a dangling link: opening it says why).  Never opens the file.
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _file_kind(mode)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def _too_long(path: Path | str, limit: int, size: int | None = None) -> InputFileError:
    held = f"holds {_size(size)}, more" if size is not None else "holds more"
    return InputFileError(errno.EFBIG, f"{held} than the {_size(limit)} an input may hold (set {MAX_INPUT_ENV} "
                                       "in bytes for a larger one)", str(path))


class _Capped(io.RawIOBase):
    """A raw file that raises once more than ``limit`` bytes have been read from it."""

    def __init__(self, raw: io.FileIO, limit: int, path: Path | str) -> None:
        super().__init__()
        self._raw = raw
        self._limit = limit
        self._path = path
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]  # typeshed: WriteableBuffer
        n = self._raw.readinto(buffer) or 0
        self._read += n
        if self._read > self._limit:
            raise _too_long(self._path, self._limit)
        return n

    def fileno(self) -> int:
        return self._raw.fileno()

    def close(self) -> None:
        self._raw.close()
        super().close()


def _kind(mode: int) -> str | None:
    """What a file that is no input is, in words (``None``: a regular file or a pipe, readable)."""
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file to read"
    kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    return f"is {kind}, not a file to read"


def not_an_input(path: Path | str) -> str | None:
    """Why ``path`` cannot be read as an input, without opening it: ``"no such file"``, ``"is a
    directory, not a file to read"``, ``"is a character device, not a file to read"`` …; ``None`` for
    a regular file or a pipe (``/dev/stdin`` fed by a pipe, a shell's ``<(…)``, a FIFO).

    Args:
        path: the input (symlinks followed).

    Returns:
        The reason, without the path, or ``None``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return _kind(mode)


def empty_pipe(path: Path | str) -> str:
    """What to say of an input that held nothing: ``""`` for a file; for a pipe, that nothing came
    through it (its writer wrote nothing, or had not opened it yet: a pipe is read without waiting).
    """
    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return ""
    return (" (a pipe through which nothing came: its writer wrote nothing, or had not opened it when it was read; "
            "a named pipe is read without waiting for a writer)") if fifo else ""


#: inside :func:`pipes_read_once`: the bytes of each pipe read, by (device, inode), and its first
#: descriptor, held open so that no new pipe takes its inode while the block lasts
_pipes: dict[tuple[int, int], tuple[bytes, int]] | None = None


@contextlib.contextmanager
def pipes_read_once() -> Iterator[None]:
    """Within it, a pipe opened again by :func:`open_input` reads the bytes its first opening read.

    The pipes' bytes are kept until the block ends (each at most :func:`max_input_bytes`).
    """
    global _pipes
    outer, _pipes = _pipes, {}
    try:
        yield
    finally:
        held, _pipes = _pipes, outer
        for _, fd in held.values():
            os.close(fd)


def _remembered(fd: int, st: os.stat_result, path: Path | str, limit: int) -> BinaryIO:
    """A pipe's bytes: read whole now (``fd`` then held until the block ends), or the first time
    it was opened (``fd`` closed).
    """
    assert _pipes is not None
    key = (st.st_dev, st.st_ino)
    if key in _pipes:
        os.close(fd)
    else:
        os.set_blocking(fd, True)
        with io.BufferedReader(_Capped(io.FileIO(os.dup(fd), "rb", closefd=True), limit, path)) as fh:
            _pipes[key] = (fh.read(), fd)
    return io.BytesIO(_pipes[key][0])


def open_input(path: Path | str, pipes: bool = True) -> BinaryIO:
    """Open an input for reading in binary, refusing what is not a file to read.

    Args:
        path: the input.
        pipes: a named pipe is read (``False``: refused, as a case or family file is).

    Returns:
        A buffered binary reader that raises :class:`InputFileError` once it has read more than
        :func:`max_input_bytes` (a pipe that goes on and on).

    Raises:
        InputFileError: ``path`` is a folder, a device or a socket (a named pipe under
            ``pipes=False``), or a regular file larger than the limit.
        OSError: it cannot be opened (missing, no permission).
        ValueError: ``TOOLEFFECT_MAX_INPUT_BYTES`` is not a number of bytes.
    """
    limit = max_input_bytes()
    # O_NONBLOCK: opening a pipe nobody writes to returns at once instead of waiting for a writer
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        why = _kind(st.st_mode)
        if why is None and stat.S_ISFIFO(st.st_mode) and not pipes:
            why = f"is {_file_kind(st.st_mode)}, not a file to read"
        if why is not None:
            if not pipes and not stat.S_ISDIR(st.st_mode):
                why += ": a case or family file is a regular file"
            raise InputFileError(errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL, why, str(path))
        if stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise _too_long(path, limit, st.st_size)
        if stat.S_ISFIFO(st.st_mode) and _pipes is not None:
            return _remembered(fd, st, path, limit)
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_Capped(raw, limit, path), buffer_size=1 << 16)


def read_input_bytes(path: Path | str, pipes: bool = True) -> bytes:
    """An input's bytes, read by :func:`open_input` (the same refusals and limit; ``pipes`` as there).

    Raises:
        InputFileError: not a regular file or a pipe, or longer than the limit.
        OSError: it cannot be opened or read.
    """
    with open_input(path, pipes) as fh:
        return fh.read()


def read_input_text(path: Path | str, encoding: str = "utf-8", pipes: bool = True) -> str:
    """An input's text, read by :func:`open_input` (the same refusals and limit), its line ends
    (CRLF, CR) turned into LF as :meth:`pathlib.Path.read_text` turns them.

    Args:
        path: the input.
        encoding: its encoding (``utf-8-sig`` drops a byte-order mark).
        pipes: a named pipe is read (``False``: refused, as a case or family file is).

    Raises:
        InputFileError: not a regular file or a pipe, or longer than the limit.
        OSError: it cannot be opened or read.
        UnicodeDecodeError: its bytes are not text in ``encoding``.
    """
    text = read_input_bytes(path, pipes).decode(encoding)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
