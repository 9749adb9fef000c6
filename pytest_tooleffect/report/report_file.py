"""A JSON report read back (``tooleffect html REPORT``): checked against :class:`~.model.Report`,
refused in one line naming the file and the field, as a baseline file is refused
(:meth:`pytest_tooleffect.ci.baseline.Baseline.from_json`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pytest_tooleffect.report.model import REPORT_VERSION, Report
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.versions import version_problem

__all__ = ["ReportFileError", "report_from_json"]


class ReportFileError(ValueError):
    """A JSON report that cannot be read: ``FILE: FIELD: what is wrong`` in one line.

    Args:
        path: the file.
        field: where in it (``version``, ``status``, ``blocks.0.n_scored``).
        message: what is wrong.
    """

    def __init__(self, path: Path | str, field: str, message: str) -> None:
        self.path, self.field, self.message = str(path), field, message
        super().__init__(f"{path}: {field}: {message}")


def report_from_json(data: Any, path: Path | str) -> Report:
    """The report a parsed JSON report file holds.

    Args:
        data: the file's JSON value (an object with ``blocks``).
        path: the file, named in the error.

    Returns:
        The report.

    Raises:
        ReportFileError: not a JSON object, a ``version`` this plugin does not read (checked first: a
            newer report's fields are not this version's), or a field that is not valid; the first
            problem only, with the count of the others.
    """
    if not isinstance(data, dict):
        raise ReportFileError(path, "<file>", f"a report is a JSON object, got {type(data).__name__}")
    why = version_problem(data.get("version"), REPORT_VERSION)
    if why is not None:
        raise ReportFileError(path, "version", f"{why} (not a tooleffect report this version can draw)")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "<file>"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        msg = str(first["msg"]).removeprefix("Value error, ")
        value = first.get("input")
        got = f", got {shown(repr(value))}" if isinstance(value, str | int | float | bool) else ""
        raise ReportFileError(path, where, f"{msg}{got}{more}: not a valid tooleffect report") from None
