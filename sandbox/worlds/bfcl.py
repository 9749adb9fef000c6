"""The BFCL world: the Berkeley Function Calling Leaderboard's multi-turn back-ends as a sandbox world.

The back-ends are BFCL's own classes (``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``,
Apache-2.0, from the pinned ``bfcl-eval`` release: see :data:`BFCL_EVAL_VERSION`): a file system,
a trading bot, travel booking, vehicle control, messaging, posting, tickets and math.  Inside the
image they sit under ``vendor/`` beside the service (the image build takes them from the pinned
wheel); outside it (the in-process provider, the importer) under the folder named by the
``TOOLEFFECT_BFCL_SOURCE`` environment variable.

Unlike a table world, this world holds Python objects.  Its seed is two tables:

* ``classes``: one row per involved class, ``{"class": name, "config": initial_config}`` (the
  class's ``_load_scenario`` argument, as BFCL's ``initial_config[class]``; stateless classes
  take none); a row ``{"class": "$long_context", "config": true}`` loads BFCL's long-context
  variant of every class;
* ``history``: ``{"step": n, "name": method, "arguments": {...}}``, calls replayed in order at
  reset (a teacher-forced decision point starts from the state the conversation so far left).

A call runs ``instance.method(**arguments)`` on the class that has the method, as BFCL's
``execute_multi_turn_func_call`` does (its result turned into text the same way: a string as is,
a dict as JSON, anything else through ``str``; an exception as ``Error during execution: ...``).

The snapshot's ``state`` table has one row per public attribute of each instance
(``{"slot": "Class.attribute", "value": ...}``), the attributes BFCL's state checker compares.
Values are rendered so that two renderings are equal exactly when BFCL's ``!=`` finds the values
equal: tuples, sets, non-string dictionary keys and dates keep their type in a tagged form, and
objects with their own ``__eq__`` (the file system's files and directories) show the fields that
``__eq__`` compares.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import inspect
import json
import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

#: the pinned release whose back-end classes this world runs
BFCL_EVAL_VERSION = "2026.3.23"

#: class → module under ``bfcl_eval.eval_checker.multi_turn_eval.func_source_code``
#: (``bfcl_eval/constants/executable_backend_config.py``: CLASS_FILE_PATH_MAPPING)
CLASS_MODULES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
#: classes BFCL does not load a scenario into (STATELESS_CLASSES)
STATELESS = frozenset({"MathAPI"})
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
#: method names BFCL refuses to execute (``multi_turn_utils.execute_multi_turn_func_call``)
REFUSED = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})

TABLES: dict[str, dict[str, Any]] = {
    "classes": {"key": "class", "columns": {"class": "TEXT", "config": "JSON"}},
    "history": {"key": "step", "columns": {"step": "INTEGER", "name": "TEXT", "arguments": "JSON"}},
    "state": {"key": "slot", "columns": {"slot": "TEXT", "value": "JSON"}},
}
#: seed tables (the state table is the world's own)
SEED_TABLES = ("classes", "history")

ToolError: Any = None
RequestError: Any = None


def bind(service: Any) -> None:
    """Take the service's error types (called on load)."""
    global ToolError, RequestError
    ToolError, RequestError = service.ToolError, service.RequestError


def source_roots() -> list[Path]:
    """Where the ``bfcl_eval`` package may be: ``vendor/`` beside the service (the image),
    ``$TOOLEFFECT_BFCL_SOURCE``, then the download cache of ``pytest_tooleffect.sandbox.bfcl_source``.
    """
    roots = [Path(__file__).resolve().parents[1] / "vendor"]
    if os.environ.get("TOOLEFFECT_BFCL_SOURCE"):
        roots.append(Path(os.environ["TOOLEFFECT_BFCL_SOURCE"]))
    try:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except RuntimeError:  # no home directory (the image's unprivileged user)
        return roots
    roots.append(cache / "pytest-tooleffect" / f"bfcl-eval-{BFCL_EVAL_VERSION}")
    return roots


def load_class(name: str) -> type:
    """BFCL's back-end class ``name``.

    Raises:
        LookupError: not a multi-turn class, or BFCL's source is not where :func:`source_roots` look.
    """
    if name not in CLASS_MODULES:
        raise LookupError(f"no BFCL back-end class {name!r} (known: {', '.join(CLASS_MODULES)})")
    for root in source_roots():
        if (root / "bfcl_eval").is_dir():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            break
    else:
        if importlib.util.find_spec("bfcl_eval") is None:  # bfcl-eval itself installed: use it
            raise LookupError("BFCL's back-end source is missing (looked in "
                              f"{', '.join(map(str, source_roots()))}); `tooleffect sandbox build` fetches it")
    module = importlib.import_module(f"{PACKAGE}.{CLASS_MODULES[name]}")
    return getattr(module, name)  # type: ignore[no-any-return]


def methods(cls: type) -> dict[str, Any]:
    """The public methods of a class (the tools it offers), name → function."""
    return {n: f for n, f in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")}


def render(value: Any) -> Any:
    """A JSON rendering of an attribute value, equal for two values exactly when ``==`` holds
    (for the types BFCL's back-ends hold).
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"$float": repr(value)}
    if isinstance(value, list):
        return [render(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [render(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"$set": sorted((render(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: render(v) for k, v in value.items()}
        return {"$dict": [[render(k), render(v)] for k, v in value.items()]}
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return {"$" + type(value).__name__: value.isoformat()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value.normalize())}
    fields = _eq_fields(type(value))
    if fields is not None:
        return {"$object": type(value).__name__, **{f: render(getattr(value, f, None)) for f in fields}}
    # an object compared by identity: two distinct instances are never equal (as in BFCL)
    return {"$object": type(value).__name__, "$id": id(value)}


def _eq_fields(cls: type) -> tuple[str, ...] | None:
    """The fields the file system's ``File`` / ``Directory`` ``__eq__`` compares."""
    return {"File": ("name", "content"), "Directory": ("name", "contents")}.get(cls.__name__)


def result_text(result: Any) -> str:
    """A call's result as BFCL hands it to the model (``execute_multi_turn_func_call``)."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


class ObjectWorld:
    """The involved classes' instances, loaded with their scenario, history replayed.

    Args:
        rows: the seed, ``{"classes": [...], "history": [...]}`` (see the module docstring).

    Raises:
        RequestError: an unknown class, a bad row, or a history call that does not exist.
    """

    def __init__(self, rows: dict[str, list[dict[str, Any]]]) -> None:
        unknown = sorted(set(rows) - set(SEED_TABLES))
        if unknown:
            raise RequestError(f"the bfcl world is seeded by {' and '.join(SEED_TABLES)}, not {unknown[0]!r}")
        self.seed = {t: [dict(r) for r in rows.get(t, [])] for t in SEED_TABLES}
        long_context = any(r.get("class") == "$long_context" and r.get("config") for r in self.seed["classes"])
        self.instances: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
        for row in self.seed["classes"]:
            name = row.get("class")
            if name == "$long_context":
                continue
            try:
                cls = load_class(str(name))
            except LookupError as exc:
                raise RequestError(str(exc)) from None
            instance = cls()
            if name not in STATELESS:
                import copy

                instance._load_scenario(copy.deepcopy(row.get("config") or {}), long_context=long_context)
            self.instances[str(name)] = instance
            for method in methods(cls):
                self.owner[method] = str(name)
        for row in sorted(self.seed["history"], key=lambda r: int(r.get("step", 0))):
            if row.get("name") not in self.owner:
                raise RequestError(f"history step {row.get('step')}: no involved class has {row.get('name')!r}")
            self.call(str(row["name"]), row.get("arguments") or {})

    @property
    def tools(self) -> frozenset[str]:
        """The method names the involved classes offer."""
        return frozenset(self.owner)

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Run one call; returns the text the agent reads back and whether it is an error."""
        owner = self.owner.get(name)
        if owner is None:
            return f"Error during execution: no function named {name!r}", True
        if name in REFUSED:
            return f"Error during execution: Function call {name} is not allowed.", True
        try:
            result = getattr(self.instances[owner], name)(**arguments)
        except Exception as exc:  # BFCL turns every exception into the model's result text
            return f"Error during execution: {exc}", True
        return result_text(result), False

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """The seed tables as given and ``state``: one row per public attribute of each instance."""
        state = [{"slot": f"{cls}.{attr}", "value": render(value)}
                 for cls, instance in self.instances.items()
                 for attr, value in vars(instance).items() if not attr.startswith("_")]
        return {**{t: [dict(r) for r in rows] for t, rows in self.seed.items()}, "state": state}


def tool_names(classes: list[str]) -> frozenset[str]:
    """The tools of the given classes (for validation outside the sandbox)."""
    return frozenset(m for c in classes for m in methods(load_class(c)))


TOOLS: dict[str, Any] = {}
"""Filled per reset: a BFCL world's tools are the involved classes' methods."""
