"""The ``tooleffect`` subcommands, grouped by what they work on; :mod:`pytest_tooleffect.cli`
parses the command line and calls them.

Modules: :mod:`.labels` (``sample``, ``label``, ``merge``, ``agree``, ``calibrate-judge``,
``generate``), :mod:`.reports` (``report``, ``html``, ``baseline save``, ``compare``, ``schema``),
:mod:`.services` (``import``, ``serve``, ``model``, ``sandbox``).

Each command is a function of the parsed arguments returning the exit status.  The modules import
only the standard library at start-up; what a command needs is imported when it runs.
"""

from __future__ import annotations

__all__: list[str] = []
