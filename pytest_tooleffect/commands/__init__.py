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

__all__ = ["check_command_outputs"]


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
