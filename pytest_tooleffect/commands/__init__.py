"""The ``tooleffect`` subcommands, grouped by what they work on; :mod:`pytest_tooleffect.cli`
parses the command line and calls them.

Modules: :mod:`.labels` (``sample``, ``label``, ``merge``, ``agree``, ``calibrate-judge``,
``generate``), :mod:`.reports` (``report``, ``html``, ``baseline save``, ``compare``, ``schema``),
:mod:`.services` (``import``, ``serve``, ``model``, ``sandbox``), :mod:`.bootstrap` (``baseline init``).

Each command is a function of the parsed arguments returning the exit status.  The modules import
only the standard library at start-up; what a command needs is imported when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["check_command_outputs", "check_output_folder"]


def check_command_outputs(outputs: Iterable[tuple[str, Path | None]], reads: Iterable[tuple[str, Path | None]] = (),
                          cases: Path | None = None, families: bool = True) -> None:
    """Refuse a command's output paths before it writes anything, as a run refuses its own
    (:func:`~pytest_tooleffect.util.output_files.check_outputs`).

    Args:
        outputs: ``(option, path)`` of each file the command writes.
        reads: ``(what, path)`` of each file it reads.
        cases: a folder of families the command reads (``--cases``): their case, family, rules,
            tools and prompt files are inputs too.
        families: the family in each output's own folder is an input too (``False`` for a command
            whose output is a case file of its family: ``label import``, ``sample``).

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: a ``ValueError`` naming the option, the
            path and what writing there would overwrite (the command line prints it, exit 2).
    """
    import os

    from pytest_tooleffect.collect.family import family_dirs, family_inputs, is_family_dir
    from pytest_tooleffect.util.output_files import check_outputs

    outputs = list(outputs)
    dirs = set(family_dirs([cases])) if cases is not None and cases.is_dir() else set()
    if families:
        dirs.update(folder for folder in (Path(os.path.realpath(p)).parent for _, p in outputs if p is not None)
                    if is_family_dir(folder))
    check_outputs(outputs, [*reads, *family_inputs(sorted(dirs))], reader="this command")


def check_output_folder(option: str, path: Path, what: str) -> None:
    """Refuse an output that must be a folder (an import's ``--out``) when it, or a folder on its way,
    is something else: a file, a device, a pipe.  A folder that does not exist yet is fine (it is made).

    Args:
        option: the option, e.g. ``--out``.
        path: the folder given.
        what: what the command writes into it, for the message.

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: one line naming the option, the path,
            what is there and what the command writes (the command line prints it, exit 2).
    """
    import os
    import stat

    from pytest_tooleffect.util.output_files import OutputPathError

    for at in (path, *path.parents):
        try:
            mode = os.stat(at).st_mode
        except (FileNotFoundError, NotADirectoryError):  # not there yet, or under a file: its parents say which
            continue
        except OSError as exc:
            raise OutputPathError(f"{option} {path}: {at} cannot be reached ({exc.strerror or exc})") from None
        if stat.S_ISDIR(mode):
            return
        kind = ("a file" if stat.S_ISREG(mode) else "a character device" if stat.S_ISCHR(mode)
                else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a block device" if stat.S_ISBLK(mode) else "a special file")
        where = "is" if at == path else f"lies under {at}, which is"
        raise OutputPathError(f"{option} {path}: {where} {kind}, not a folder: {what}")
