"""Optional dependencies: the package's extras, and the error a missing one raises.

``pip install pytest-tooleffect`` installs what a run's core path needs; a feature whose import
only it uses is an extra (``pyproject.toml``, ``[project.optional-dependencies]``).  Every such
import is preceded by :func:`require`, so a missing extra is one error that names the feature and
the line that installs it, never a bare ``ModuleNotFoundError`` from deep inside a run.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtra", "install_line", "require"]

#: The extra that installs each optional top-level module (as ``pyproject.toml`` declares them).
EXTRAS = {
    "redis": "redis",  # the rate limit shared through Redis (ini tooleffect_rate_backend)
    "nltk": "labelling",  # Krippendorff's alpha with the MASI distance between labellers' sets
    "krippendorff": "labelling",  # Krippendorff's alpha (nominal) of the reply set's labellers
    "ijson": "traces",  # τ-bench trajectory files streamed (import tau-airline, sample --format tau-bench)
    "filelock": "local-model",  # the local llama.cpp model's build cache (tooleffect model fetch)
    "mpmath": "bfcl",  # BFCL's MathAPI, which the bfcl world imports when the local provider runs it in-process
    "mcp": "mcp",  # the MCP Python SDK's client: tooleffect import mcp lists a live server's tools
    "ruamel": "mcp",  # ruamel.yaml's round trip: tooleffect import mcp again keeps family.yaml's comments
}


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the ``pip install`` line."""


def install_line(extra: str) -> str:
    """The command that installs ``extra``: ``pip install 'pytest-tooleffect[EXTRA]'``."""
    return f"pip install 'pytest-tooleffect[{extra}]'"


def require(module: str, feature: str) -> None:
    """Make sure the optional ``module`` can be imported before ``feature`` imports it.

    Args:
        module: a top-level module name listed in :data:`EXTRAS` (``"redis"``, ``"nltk"``, ...).
        feature: what needs it, as the user knows it (``"ini tooleffect_rate_backend"``).

    Raises:
        MissingExtra: the module is not installed (the message names the extra's install line).
        KeyError: ``module`` is not one of :data:`EXTRAS` (a programming error).
    """
    extra = EXTRAS[module]
    if importlib.util.find_spec(module) is None:
        raise MissingExtra(f"{feature} needs the optional package {module!r}, which is not installed: "
                           f"{install_line(extra)}", name=module)
