"""The ``tooleffect`` subcommands, grouped by what they work on; :mod:`pytest_tooleffect.cli`
parses the command line and calls them.

Modules: :mod:`.labels` (``sample``, ``label``, ``merge``, ``agree``, ``calibrate-judge``,
``generate``), :mod:`.reports` (``report``, ``html``, ``baseline save``, ``compare``, ``schema``),
:mod:`.services` (``import``, ``serve``, ``model``, ``sandbox``), :mod:`.bootstrap` (``baseline init``).

Each command is a function of the parsed arguments returning the exit status.  The modules import
only the standard library at start-up; what a command needs is imported when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["check_command_outputs", "check_output_folder"]

#: the folder of families a project's runs read when a command is not told another (``--cases``)
PROJECT_CASES = Path("cases")


def check_command_outputs(outputs: Iterable[tuple[str, Path | None]], reads: Iterable[tuple[str, Path | None]] = (),
                          cases: Path | None = None, families: bool = True, force: bool | None = None,
                          own: Iterable[Path] = (), family: tuple[str, Path, str] | None = None,
                          kinds: Mapping[str, str] | None = None) -> None:
    """Refuse a command's output paths before it writes anything, as a run refuses its own
    (:func:`~pytest_tooleffect.util.output_files.check_outputs`): the one check of every ``--out``.

    The project's families are those under ``cases`` (``--cases``; else ``./cases``) and the family
    in each output's own folder: their case, family, rules, tools and prompt files are never
    overwritten unasked.

    Args:
        outputs: ``(option, path)`` of each file the command writes.
        reads: ``(what, path)`` of each file it reads (always refused as an output).
        cases: a folder of families the command reads (``--cases``): their files are inputs too.
        families: the command's outputs are not case files (a report, a page, labels): the files of
            the project's families are refused as outputs, and so is a new file that the next run
            would collect as a case file (a case-file name in a family's folder).  ``False`` for a
            command that writes case or family files (``import``, ``generate``, ``sample``, ``label
            import``): the project's files are refused unless ``force``.  With ``True``, an existing
            file the plugin did not write (``Makefile``, ``requirements.txt``) is refused unless ``force``.
        force: the user said ``--force``; ``None``: the command has no ``--force``.  For a command
            whose outputs are not case files it replaces existing files the plugin did not write,
            never the project's family files.
        own: files the command rewrites as its own (``label import``'s case file in place): never
            refused as the project's.
        family: ``(option, folder, command)`` when the command writes a family into ``folder``: a
            folder holding files ``command`` did not write (its family file does not name it: a
            hand-authored family, another import's) is refused unless ``force``; the files of one
            it wrote before are its own.
        kinds: option → the kind of file it writes (:mod:`~pytest_tooleffect.util.own_outputs`'s words,
            ``{"--out": HTML_PAGE}``): an output replaces only a file of its own kind, ``--force`` or not
            (an earlier run's record log given as ``html``'s ``--out`` is refused).

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: a ``ValueError`` naming the option, the
            path and what writing there would overwrite (the command line prints it, exit 2).
    """
    import os

    from pytest_tooleffect.collect.family import collected_as, family_dirs, family_inputs, is_family_dir
    from pytest_tooleffect.util.output_files import OutputPathError, check_outputs

    outputs = list(outputs)
    read_dirs = set(family_dirs([cases])) if cases is not None and cases.is_dir() else set()
    here = {Path(os.path.realpath(p)).parent for _, p in outputs if p is not None}
    if families:
        read_dirs.update(folder for folder in here if is_family_dir(folder))
    project_dirs = set(family_dirs([PROJECT_CASES])) if cases is None and PROJECT_CASES.is_dir() else set()
    if not families:
        project_dirs.update(folder for folder in here if is_family_dir(folder))
    refusal = None
    own = list(own)
    if family is not None:
        files, refusal = _family_folder(*family, bool(force))
        own += files
    mine = {Path(os.path.realpath(p)) for p in own}
    project = [(what, p) for what, p in family_inputs(sorted(project_dirs - read_dirs))
               if Path(os.path.realpath(p)) not in mine]
    check_outputs(outputs, [*reads, *family_inputs(sorted(read_dirs))], reader="this command", project=project,
                  force=None if families else force, becomes=collected_as if families else None,
                  others_kept=families, replace=force if families else None, kinds=kinds)
    if refusal is not None:
        raise OutputPathError(refusal)


def _family_folder(option: str, folder: Path, command: str, force: bool) -> tuple[list[Path], str | None]:
    """The files of the family in ``folder`` that ``command`` may rewrite, and why it may not write
    there (``None``: it may).

    An empty or missing folder, and one whose family file says ``command`` wrote it (an earlier
    import: rebuilt in place), are the command's to write; any other folder holding files (a
    hand-authored family, another import's) is written only under ``--force``.
    """
    from pytest_tooleffect.collect.family import FAMILY_FILE, family_inputs, is_family_dir, written_by

    try:
        held = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    except OSError:
        held = []
    if not held:
        return [], None
    files = [p for _, p in family_inputs([folder])] if is_family_dir(folder) else []
    if written_by(folder, command) or force:
        return files, None
    what = (f"a family whose {FAMILY_FILE} was not written by `{command}`" if is_family_dir(folder)
            else "files that are not a family")
    shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
    return files, (f"{option} {folder}: holds {what} ({shown}); writing the family there would replace them; pass "
                   f"--force to replace them, or give {option} another folder")


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
