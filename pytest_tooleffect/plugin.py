"""The pytest plugin: options, collection of case files, the decision fixture, records, report.

Thin by design: state lives in plugin objects kept in ``config.stash``; the scoring is the
oracle's, the report arithmetic is :mod:`pytest_tooleffect.report`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from .cases import CASE_SUFFIXES, FAMILY_FILE, FamilyError, LoadedFamily, is_case_file, load_case_file, load_family
from .model_turn import Price, ProviderError
from .models import Case, Policy
from .oracle import CompareContext, Verdict, compile_label, parse_emission, score
from .records import RecordLog, build_record
from .sandboxing import (
    SandboxFailed,
    tooleffect_sandbox,  # noqa: F401  (the fixture, defined with the sandbox support)
)

__all__ = ["OPT_RECORDS", "OPT_REPORT", "REPLAY", "CaseItem", "Decision", "Settings"]

OPT_REPORT = "--tooleffect-report"
OPT_RECORDS = "--tooleffect-records"
OPT_NO_SUMMARY = "--tooleffect-no-summary"
OPT_MODEL = "--tooleffect-model"
OPT_API_BASE = "--tooleffect-api-base"
OPT_POLICY = "--tooleffect-policy"
OPT_TIMEOUT = "--tooleffect-timeout"
OPT_PRICES = "--tooleffect-prices"
OPT_JUDGE = "--tooleffect-judge-model"
OPT_JUDGE_BASE = "--tooleffect-judge-api-base"
OPT_JUDGE_CAL = "--tooleffect-judge-calibration"
INI_JUDGE_CACHE = "tooleffect_judge_cache"
OPT_REPEATS = "--tooleffect-repeats"
OPT_CACHE = "--tooleffect-cache"
INI_MODEL_CACHE = "tooleffect_model_cache"
CACHE_MODES = ("off", "read", "write", "readwrite")
OPT_CONCURRENCY = "--tooleffect-concurrency"
OPT_RETRIES = "--tooleffect-retries"
OPT_RPM = "--tooleffect-rpm"
OPT_TPM = "--tooleffect-tpm"
INI_RPM = "tooleffect_rpm"
INI_TPM = "tooleffect_tpm"
INI_RATE_WINDOW = "tooleffect_rate_window"
INI_RATE_FILE = "tooleffect_rate_file"  # a limiter state file shared by every run that names it
RATE_STATE = "tooleffect_rate_state"  # workerinput key: the controller's rate-limit state file
PREFETCH_GROUP = 64  # live items per xdist_group chunk: a worker prefetches the chunk it is handed
INI_RECORDS = "tooleffect_records"
DEFAULT_RECORDS = "reports/tooleffect-records.jsonl"

#: The offline default policy: replay the action the agent actually took (``recorded``).
REPLAY = Policy(name="replay")
CLASS_MARKERS = {
    "single": "the label has exactly one valid action, a tool call",
    "several": "the label has two or more valid alternatives, none of them no-tool",
    "no_tool": "calling no tool is among the valid actions",
}


@dataclass(frozen=True)
class Settings:
    """Options resolved once at configure time."""

    report: Path | None
    records: Path | None
    summary: bool
    model: str | None = None
    api_base: str | None = None
    policies: tuple[str, ...] = ()
    timeout_s: float = 60.0
    prices: Mapping[str, Price] = field(default_factory=dict)
    pyproject_policies: Mapping[str, Policy] = field(default_factory=dict)
    judge_model: str | None = None
    judge_api_base: str | None = None
    judge_cache: Path | None = None
    judge_calibration: Path | None = None
    repeats: int = 1
    cache_mode: str = "off"
    cache_dir: Path | None = None
    concurrency: int = 8
    retries: int = 2
    rpm: int | None = None
    tpm: int | None = None
    rate_window_s: float = 60.0


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _path_or_none(value: str) -> Path | None:
    return Path(value) if value else None


def _positive_float(value: str) -> float:
    import argparse
    import math

    try:
        f = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from exc
    if not math.isfinite(f) or f <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be positive")
    return f


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type=`` for whole numbers ≥ ``minimum``."""

    def parse(value: str) -> int:
        import argparse

        try:
            n = int(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from exc
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at least {minimum}")
        return n

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _load_prices(path: Path | None) -> dict[str, Price]:
    import math

    if path is None:
        return {}
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        prices = {}
        for m, p in raw.items():
            values = [p["input_per_mtok"], p["output_per_mtok"]]
            if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0
                   for v in values):
                raise ValueError(f"{m}: prices are finite numbers >= 0")
            prices[str(m)] = Price(float(values[0]), float(values[1]))
        return prices
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise pytest.UsageError(f"{OPT_PRICES} {path}: {exc}; expected {{model: {{input_per_mtok: USD, "
                                f"output_per_mtok: USD}}}}") from exc


def _rooted(config: pytest.Config, value: str) -> Path | None:
    return Path(config.rootpath) / value if value else None


def _check_writable(option: str, path: Path) -> None:
    """Refuse, before any test runs, an output path that cannot be written."""
    import os

    if path.is_dir():
        raise pytest.UsageError(f"{option} {path}: is a directory; give a file path")
    if path.exists():
        ok = os.access(path, os.W_OK)
    else:  # nothing is created here: the nearest existing folder must let us create the path
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        ok = parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        raise pytest.UsageError(f"{option} {path}: cannot be written (permission or not a folder)")


def _pyproject_policies(config: pytest.Config) -> dict[str, Policy]:
    path = Path(config.rootpath) / "pyproject.toml"
    if not path.is_file():
        return {}
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"{path}: {exc}") from exc
    tool = doc.get("tool", {})
    section = tool.get("tooleffect", {}) if isinstance(tool, dict) else {}
    table = section.get("policies", {}) if isinstance(section, dict) else None
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{path}: [tool.tooleffect.policies] must be a table of policy tables")
    out = {}
    for name, spec in table.items():
        if not isinstance(spec, dict):
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.{name}] must be a table (model = ...)")
        try:
            out[name] = Policy.model_validate({**spec, "name": name})
        except ValidationError as exc:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.{name}]: {exc}") from exc
        if name == REPLAY.name:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.replay]: 'replay' is the built-in offline "
                                    "policy; choose another name")
        if not out[name].model:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.{name}]: model is required")
    return out


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tooleffect", "tool-selection scoring (pytest-tooleffect)")
    group.addoption(OPT_REPORT, metavar="PATH", type=_path_or_none, default=None,
                    help="write the per-class report as JSON to PATH")
    group.addoption(OPT_RECORDS, metavar="PATH", type=str, default=None,
                    help=f"write one JSON record per scored sample to PATH as it completes, a new file each run "
                         f"(default: ini {INI_RECORDS} = {DEFAULT_RECORDS}; empty string disables)")
    group.addoption(OPT_NO_SUMMARY, action="store_true", default=False,
                    help="do not print the per-class report at the end of the run")
    group.addoption(OPT_MODEL, metavar="PROVIDER/MODEL", default=None,
                    help="ask this litellm model for the decision at every labelled state (a policy of that name)")
    group.addoption(OPT_API_BASE, metavar="URL", default=None,
                    help="api base for --tooleffect-model (a local vLLM, Ollama or llama.cpp server)")
    group.addoption(OPT_POLICY, metavar="NAME", action="append", default=[],
                    help="run a named policy (from the family file or [tool.tooleffect.policies] in "
                         "pyproject.toml; 'replay' replays recorded decisions); repeatable")
    group.addoption(OPT_TIMEOUT, metavar="SECONDS", type=_positive_float, default=60.0,
                    help="timeout of one model call in seconds (default 60)")
    group.addoption(OPT_PRICES, metavar="PATH", type=_path_or_none, default=None,
                    help="YAML or JSON prices for models litellm's cost map does not know: "
                         "{model: {input_per_mtok: USD, output_per_mtok: USD}}")
    group.addoption(OPT_JUDGE, metavar="PROVIDER/MODEL", default=None,
                    help="LLM judge (through litellm) for argument fields the oracle rules declare free_text; "
                         "without it a deterministic comparator is used and marked approximate")
    group.addoption(OPT_JUDGE_BASE, metavar="URL", default=None, help="api base for the judge model")
    group.addoption(OPT_JUDGE_CAL, metavar="PATH", type=_path_or_none, default=Path("reports/judge-calibration.json"),
                    help="the judge's last calibration (tooleffect calibrate-judge), named in the report")
    group.addoption(OPT_REPEATS, metavar="K", type=_positive_int, default=1,
                    help="run each case x policy K times (trials); the report adds pass^k and the share of cases "
                         "whose verdict flips between trials")
    group.addoption(OPT_CONCURRENCY, metavar="N", type=_positive_int, default=8,
                    help="model turns in flight at once in each process (default 8); with -n W up to W x N in all")
    group.addoption(OPT_RETRIES, metavar="N", type=_non_negative_int, default=2,
                    help="litellm retries of a model call on 429, 5xx and timeouts, with backoff (default 2)")
    group.addoption(OPT_RPM, metavar="N", type=_positive_int, default=None,
                    help=f"run-wide limit of model requests per minute, over all xdist workers (ini {INI_RPM})")
    group.addoption(OPT_TPM, metavar="N", type=_positive_int, default=None,
                    help=f"run-wide limit of model tokens (input + output) per minute, over all xdist workers "
                         f"(ini {INI_TPM})")
    parser.addini(INI_RPM, "run-wide model requests per minute (empty: no limit)", default="")
    parser.addini(INI_TPM, "run-wide model tokens per minute (empty: no limit)", default="")
    parser.addini(INI_RATE_WINDOW, "seconds the rate limits count over (default 60: per minute)", default="60")
    parser.addini(INI_RATE_FILE, "limiter state file shared by all runs that name it, relative to the rootdir "
                  "(empty: one private file per run, shared by its xdist workers only)", default="")
    group.addoption(OPT_CACHE, choices=CACHE_MODES, default="off",
                    help="on-disk cache of model answers keyed by policy, state and trial (default off)")
    from . import sandboxing

    sandboxing.addoptions(group, parser)
    parser.addini(INI_MODEL_CACHE, "folder of cached model answers, relative to the rootdir",
                  default=".tooleffect-cache/model")
    parser.addini(INI_RECORDS, "record log path, relative to the rootdir", default=DEFAULT_RECORDS)
    parser.addini(INI_JUDGE_CACHE, "folder of cached judge verdicts, relative to the rootdir (empty: no cache)",
                  default=".tooleffect-cache/judge")


settings_key = pytest.StashKey[Settings]()
families_key = pytest.StashKey[dict[Path, "LoadedFamily | FamilyError"]]()
seen_ids_key = pytest.StashKey[dict[Path, set[str]]]()
predicates_key = pytest.StashKey[Mapping[str, Callable[..., Any]]]()
record_key = pytest.StashKey[dict[str, Any]]()
reporter_key = pytest.StashKey["Reporter"]()


def pytest_configure(config: pytest.Config) -> None:
    for name, doc in CLASS_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: tooleffect class: {doc}")
    if not config.pluginmanager.hasplugin("xdist"):  # live items carry it for --dist loadgroup
        config.addinivalue_line("markers", "xdist_group(name): group of live tooleffect items (pytest-xdist)")
    records_opt = config.getoption(OPT_RECORDS)
    records = records_opt if records_opt is not None else config.getini(INI_RECORDS)
    config.stash[settings_key] = Settings(
        report=config.getoption(OPT_REPORT),
        records=(Path(config.rootpath) / records) if records else None,
        summary=not config.getoption(OPT_NO_SUMMARY),
        model=config.getoption(OPT_MODEL),
        api_base=config.getoption(OPT_API_BASE),
        policies=tuple(dict.fromkeys(config.getoption(OPT_POLICY))),
        timeout_s=config.getoption(OPT_TIMEOUT),
        prices=_load_prices(config.getoption(OPT_PRICES)),
        pyproject_policies=_pyproject_policies(config),
        judge_model=config.getoption(OPT_JUDGE),
        judge_api_base=config.getoption(OPT_JUDGE_BASE),
        judge_cache=_rooted(config, config.getini(INI_JUDGE_CACHE)),
        judge_calibration=config.getoption(OPT_JUDGE_CAL),
        repeats=config.getoption(OPT_REPEATS),
        cache_mode=config.getoption(OPT_CACHE),
        cache_dir=_rooted(config, config.getini(INI_MODEL_CACHE)),
        concurrency=config.getoption(OPT_CONCURRENCY),
        retries=config.getoption(OPT_RETRIES),
        **_rate_settings(config),
    )
    config.stash[families_key] = {}
    config.stash[seen_ids_key] = {}
    from . import sandboxing

    sandboxing.configure(config)
    if config.stash[settings_key].model or config.stash[settings_key].policies:
        from .model_turn import set_concurrency

        set_concurrency(config.stash[settings_key].concurrency)
        _start_rate_limit(config)
    if not hasattr(config, "workerinput"):
        settings = config.stash[settings_key]
        for opt, out in ((OPT_RECORDS, settings.records), (OPT_REPORT, settings.report)):
            if out is not None:
                _check_writable(opt, out)
        reporter = Reporter(config)
        config.stash[reporter_key] = reporter
        config.pluginmanager.register(reporter, "tooleffect-reporter")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C: drop model turns not yet started; finished records are already on disk."""
    from .model_turn import shutdown

    shutdown(cancel=True)


def _rate_settings(config: pytest.Config) -> dict[str, Any]:
    """``rpm``, ``tpm`` and ``rate_window_s`` from the options, else the ini keys."""
    out: dict[str, Any] = {}
    for key, opt, ini in (("rpm", OPT_RPM, INI_RPM), ("tpm", OPT_TPM, INI_TPM)):
        value = config.getoption(opt)
        raw = str(config.getini(ini)).strip()
        if value is None and raw:
            try:
                value = _positive_int(raw)
            except Exception as exc:
                raise pytest.UsageError(f"ini {ini} = {raw!r}: {exc}") from None
        out[key] = value
    raw = str(config.getini(INI_RATE_WINDOW)).strip() or "60"
    try:
        out["rate_window_s"] = _positive_float(raw)
    except Exception as exc:
        raise pytest.UsageError(f"ini {INI_RATE_WINDOW} = {raw!r}: {exc}") from None
    return out


_rate_dir_key = pytest.StashKey[Path]()
_rate_file_key = pytest.StashKey[Path]()


def _start_rate_limit(config: pytest.Config) -> None:
    """One limiter state file per run: the controller creates it, xdist workers get its path."""
    settings = config.stash[settings_key]
    if settings.rpm is None and settings.tpm is None:
        return
    from .model_turn import set_rate_limit
    from .ratelimit import RateLimit

    workerinput = getattr(config, "workerinput", None)
    shared = _rooted(config, config.getini(INI_RATE_FILE))
    if workerinput is not None and RATE_STATE in workerinput:
        path = Path(workerinput[RATE_STATE])
    elif shared is not None:  # several runs (other terminals, CI jobs on one host) share one limit
        shared.parent.mkdir(parents=True, exist_ok=True)
        path = shared
        config.stash[_rate_file_key] = path
    else:
        import tempfile

        config.stash[_rate_dir_key] = Path(tempfile.mkdtemp(prefix="tooleffect-rate-"))
        path = config.stash[_rate_dir_key] / "limiter.sqlite"
    set_rate_limit(RateLimit(path, settings.rpm, settings.tpm, settings.rate_window_s))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """On the xdist controller, hand each worker the run's rate-limit state file."""
    rate_dir = node.config.stash.get(_rate_dir_key, None)
    if rate_dir is not None:
        node.workerinput[RATE_STATE] = str(rate_dir / "limiter.sqlite")
    elif _rate_file_key in node.config.stash:
        node.workerinput[RATE_STATE] = str(node.config.stash[_rate_file_key])


def pytest_unconfigure(config: pytest.Config) -> None:
    rate_dir = config.stash.get(_rate_dir_key, None)
    if rate_dir is not None:
        import shutil

        from .model_turn import set_rate_limit

        set_rate_limit(None)
        shutil.rmtree(rate_dir, ignore_errors=True)
    reporter = config.stash.get(reporter_key, None)
    if reporter is not None:
        reporter.close()
        config.pluginmanager.unregister(reporter)
        del config.stash[reporter_key]


# ------------------------------------------------------------------------------- collection


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    directory = file_path.parent
    if file_path.suffix not in CASE_SUFFIXES or not (directory / FAMILY_FILE).is_file():
        return None
    fam = _loaded(parent.config, directory)
    if is_case_file(file_path, fam.referenced_files):
        return CaseFile.from_parent(parent, path=file_path)
    if file_path.name == FAMILY_FILE and isinstance(fam, FamilyError) and (
            parent.session.isinitpath(file_path) or not _collects_a_case_file(parent, directory, fam)):
        return CaseFile.from_parent(parent, path=file_path)  # the family's error, where no case file carries it
    return None  # the family file, or its own rules, tools or prompt file: not a case file


def _collects_a_case_file(parent: pytest.Collector, directory: Path, fam: LoadedFamily | FamilyError) -> bool:
    """Some case file of the family in ``directory`` is collected (not ``--ignore``d)."""
    return any(p.is_file() and is_case_file(p, fam.referenced_files)
               and not parent.ihook.pytest_ignore_collect(collection_path=p, config=parent.config)
               for p in directory.iterdir())


_loaded_key = pytest.StashKey[dict[Path, "LoadedFamily | FamilyError"]]()
_family_names_key = pytest.StashKey[dict[str, Path]]()


def _loaded(config: pytest.Config, directory: Path) -> LoadedFamily | FamilyError:
    """The family in ``directory`` as :func:`load_family` reads it (or its error), read once."""
    cache = config.stash.setdefault(_loaded_key, {})
    if directory not in cache:
        try:
            cache[directory] = load_family(directory)
        except FamilyError as exc:
            cache[directory] = exc
    return cache[directory]


def _family(config: pytest.Config, directory: Path) -> LoadedFamily | FamilyError:
    """The family whose cases are collected from ``directory``, or why it cannot run: refused when
    a family collected before it has its name (families are separate populations).
    """
    cache = config.stash[families_key]
    if directory not in cache:
        fam = _loaded(config, directory)
        if isinstance(fam, LoadedFamily):
            other = config.stash.setdefault(_family_names_key, {}).setdefault(fam.name, directory)
            if other != directory:
                fam = FamilyError(f"{directory / FAMILY_FILE}: name: family {fam.name!r} is also defined in {other}; "
                                  "families are separate populations and need distinct names")
        cache[directory] = fam
    return cache[directory]


def _marker_name(prefix: str, value: str) -> str:
    return prefix + re.sub(r"\W", "_", value)


def _policies(settings: Settings, family: LoadedFamily) -> list[Policy] | str:
    """The policies this family runs under, or the reason a named policy cannot be found."""
    chosen: list[Policy] = []
    if settings.model == REPLAY.name:
        return "--tooleffect-model replay: 'replay' is the built-in offline policy, not a model"
    if settings.model:
        chosen.append(Policy(name=settings.model, model=settings.model, api_base=settings.api_base))
    own = {p.name: p for p in family.family.policies}
    for p in family.family.policies:
        if p.name == REPLAY.name or not p.name or not p.model:
            return (f"policies: {p.name!r}: a named policy needs a name other than 'replay' and a model")
    if len(own) != len(family.family.policies):
        return "policies: two policies share a name"
    for name in settings.policies:
        if name == REPLAY.name:
            chosen.append(REPLAY)
        elif name in own:
            chosen.append(own[name])
        elif name in settings.pyproject_policies:
            chosen.append(settings.pyproject_policies[name])
        else:
            known = sorted({REPLAY.name, *own, *settings.pyproject_policies})
            return f"policy {name!r} is not defined for family {family.name} (known: {', '.join(known)})"
    return chosen or [REPLAY]


class CaseFile(pytest.File):
    """A case file: one item per case × policy, sorted by case id."""

    def collect(self) -> Iterator[pytest.Item]:
        config = self.config
        fam = _family(config, self.path.parent)
        if isinstance(fam, FamilyError):
            yield InvalidCaseItem.from_parent(self, name="<family>", problems=[str(fam)])
            return
        seen = config.stash[seen_ids_key].setdefault(self.path.parent, set())
        cases, problems = load_case_file(self.path, fam, seen)
        by_case: dict[str, list[str]] = {}
        for p in problems:
            by_case.setdefault(p.case_id or "<file>", []).append(str(p))
        for cid in sorted(by_case):
            yield InvalidCaseItem.from_parent(self, name=f"{cid}[invalid]", problems=by_case[cid])
        policies = _policies(config.stash[settings_key], fam)
        if isinstance(policies, str):
            yield InvalidCaseItem.from_parent(self, name="<policy>", problems=[f"{self.path}: {policies}"],
                                              heading="cannot run this family")
            return
        fixtureinfo = None
        repeats = config.stash[settings_key].repeats
        for case in sorted(cases, key=lambda c: c.id):
            for policy in policies:
                for trial in range(1, repeats + 1):
                    name = f"{case.id}[{policy.name}]" if repeats == 1 else f"{case.id}[{policy.name}:{trial}]"
                    item = CaseItem.from_parent(self, name=name, callobj=_tooleffect_case, fixtureinfo=fixtureinfo,
                                                case=case, family=fam, policy=policy, trial=trial,
                                                decisions=len(policies) * repeats)
                    fixtureinfo = item._fixtureinfo
                    self._mark(item, fam, case)
                    yield item

    def _mark(self, item: pytest.Item, fam: LoadedFamily, case: Case) -> None:
        names = [_marker_name("family_", fam.name), _marker_name("bucket_", case.placement.bucket)]
        if case.label is not None:
            names.append(case.label.label_class)
        for name in names:
            item.add_marker(_marker(self.config, name))
        if case.xfail:
            reason = case.xfail if isinstance(case.xfail, str) else "case marked xfail"
            # only the agent's failing decision is the expected failure: a provider error stays an error
            item.add_marker(pytest.mark.xfail(reason=reason, strict=False, raises=DecisionFailed))


_markers_key = pytest.StashKey[dict[str, pytest.MarkDecorator]]()


def _marker(config: pytest.Config, name: str) -> pytest.MarkDecorator:
    """One registered marker per name, built once (classes, ``family_*``, ``bucket_*``)."""
    cache = config.stash.setdefault(_markers_key, {})
    if name not in cache:
        if name not in CLASS_MARKERS:
            config.addinivalue_line("markers", f"{name}: tooleffect family or position bucket")
        cache[name] = getattr(pytest.mark, name)
    return cache[name]


def _tooleffect_case(tooleffect_decision: Decision) -> None:
    """Score the decision made in setup against the case's label."""
    tooleffect_decision.judge()


class CaseItem(pytest.Function):
    """One case × policy.  Its setup obtains the decision; its call scores it."""

    def __init__(self, *, case: Case, family: LoadedFamily, policy: Policy, trial: int = 1, decisions: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.family = family
        self.policy = policy
        self.trial = trial
        self.decisions = decisions  # how many decisions on this case the run scores (policies × repeats)

    @property
    def record_id(self) -> str:
        """``family/case-id[policy]`` (``[policy:trial]`` with repeats)."""
        trial = f":{self.trial}" if self.config.stash[settings_key].repeats > 1 else ""
        return f"{self.family.name}/{self.case.id}[{self.policy.name}{trial}]"

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.record_id


class InvalidCaseItem(pytest.Item):
    """Stands for a case (or file) that failed validation: an error outcome naming the problems."""

    def __init__(self, *, problems: list[str], heading: str = "invalid case", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problems = problems
        self.heading = heading

    def setup(self) -> None:
        pytest.fail(f"{self.heading}:\n" + "\n".join(self.problems), pytrace=False)

    def runtest(self) -> None:  # pragma: no cover - setup always fails
        pytest.fail("invalid case", pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"{self.name} (invalid)"


class DecisionFailed(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The agent's decision is not acceptable (the one-line reason is the message)."""


class ProviderFailed(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A provider failure raised in setup: pytest reports an error (never a failed decision)."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(f"provider error (not scored): {error.kind}: {error.message}", pytrace=False)
        self.error = error


@dataclass
class Decision:
    """The decision under test at one item: what was emitted and its cost.

    Attributes:
        item: the test item.
        emitted: the model turn (any shape :func:`~pytest_tooleffect.oracle.parse_emission` reads).
        cost: ``input_tokens``, ``output_tokens``, ``latency_ms`` (milliseconds), ``cost_usd``;
            ``None`` values mean unknown.

    """

    item: CaseItem
    emitted: Any
    cost: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    sandbox_run: Any = None  # a sandboxing.SandboxRun when the case declares a world

    def judge(self) -> Verdict:
        """Score and attach the record; fail the test (one-line reason) on a failing kind."""
        item = self.item
        case, fam = item.case, item.family
        assert case.label is not None
        tools = list(case.tools) if case.tools is not None else list(fam.tools)
        names = [t.name for t in tools]
        judge = _judge(item.config)
        before = judge.usage.to_dict() if judge is not None else None
        ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages,
                             predicates=_predicates(item.config), judge=judge)
        effect = None
        try:
            if item.decisions > 1:  # compiled once, every decision on the case is then looked up
                compile_label(case.label, tools, fam.rules)
            verdict = score(parse_emission(self.emitted, offered=names), case.label, tools, fam.rules, ctx)
            if self.sandbox_run is not None:
                from .sandboxing import judge as judge_effect

                effect, effect_fields = judge_effect(item, self.sandbox_run)
        except Exception as exc:  # a rule, predicate or input the oracle cannot judge: not the agent's failure
            error = {"type": "OracleError", "message": f"{type(exc).__name__}: {exc}"[:500]}
            record = build_record(fam.name, case, item.policy.name, None, {t.name: t for t in tools}, self.cost,
                                  error=error, extra={"model": item.policy.model, **self.extra})
            item.config.hook.pytest_tooleffect_modify_record(record=record, item=item)
            item.stash[record_key] = record
            pytest.fail(f"{item.record_id}: scoring error (not counted as a decision): {error['message']}",
                        pytrace=False)
        extra: dict[str, Any] = {"model": item.policy.model, "trial": item.trial, **self.extra}
        if judge is not None and before is not None:
            after = judge.usage.to_dict()
            spent = {k: (None if after[k] is None or before[k] is None else after[k] - before[k]) for k in after}
            if spent["calls"] or spent["cached"]:
                extra["judge"] = {"model": judge.model, **spent}
        if effect is not None:
            extra.update(effect_fields)
        record = build_record(fam.name, case, item.policy.name, verdict, {t.name: t for t in tools}, self.cost,
                              extra=extra)
        item.config.hook.pytest_tooleffect_modify_record(record=record, item=item)
        item.stash[record_key] = record
        reasons = [] if verdict.passed else [verdict.one_line(case.label)]
        if effect is not None and not effect.passed:
            reasons.append(f"effect {effect.kind}: " + "; ".join(effect.failures))
        if reasons:
            raise DecisionFailed(f"{item.record_id}: " + " | ".join(reasons), pytrace=False)
        return verdict


_judge_key = pytest.StashKey[Any]()


def _judge(config: pytest.Config) -> Any:
    """The run's judge (one per process), or ``None`` without ``--tooleffect-judge-model``."""
    if _judge_key not in config.stash:
        settings = config.stash[settings_key]
        judge = None
        if settings.judge_model:
            from .judge import Judge

            judge = Judge(settings.judge_model, settings.judge_api_base, settings.judge_cache, settings.timeout_s)
        config.stash[_judge_key] = judge
    return config.stash[_judge_key]


def _predicates(config: pytest.Config) -> Mapping[str, Callable[..., Any]]:
    if predicates_key not in config.stash:
        merged: dict[str, Callable[..., Any]] = {}
        for contributed in config.hook.pytest_tooleffect_predicates():
            merged.update(contributed or {})
        config.stash[predicates_key] = merged
    return config.stash[predicates_key]


@pytest.fixture
def tooleffect_decision(request: pytest.FixtureRequest) -> Decision:
    """The decision at this item, obtained in setup (so a provider failure is an error).

    Replay (no model option): the case's ``recorded`` turn, at no cost; a case with nothing
    recorded is skipped.
    """
    item = request.node
    if not isinstance(item, CaseItem):
        raise pytest.UsageError("tooleffect_decision is only available to tooleffect case items")
    if item.case.label is None:
        pytest.skip("unlabelled case: nothing to score against")
    if item.policy.model is None:
        if item.case.recorded is None:
            pytest.skip("no recorded action to replay")
        decision = Decision(item, item.case.recorded.model_dump(exclude_none=True), {})
        if item.case.world is not None:
            from .sandboxing import execute

            execute(request, decision)
        return decision
    from .model_turn import wait_turn

    settings = item.config.stash[settings_key]
    future = _prefetched(item.config).pop(item.nodeid, None) or _submit(item)
    try:
        turn = wait_turn(future, settings.timeout_s, settings.retries)
    except ProviderError as exc:
        raise ProviderFailed(exc) from None
    extra: dict[str, Any] = {"provider_tool_names": turn.provider_names} if turn.provider_names else {}
    extra["cached"] = turn.cached
    extra["rate_wait_ms"] = turn.rate_wait_ms
    decision = Decision(item, turn.emitted, turn.cost, extra)
    if item.case.world is not None:
        from .sandboxing import execute

        execute(request, decision)
    return decision


_prefetch_key = pytest.StashKey[dict[str, Any]]()
_groups_key = pytest.StashKey[dict[str, list["CaseItem"]]]()


def _prefetched(config: pytest.Config) -> dict[str, Any]:
    return config.stash.setdefault(_prefetch_key, {})


def model_cache(settings: Settings) -> Any:
    """The run's on-disk model cache (a :class:`~pytest_tooleffect.model_turn.ModelCache`), or ``None``."""
    if settings.cache_mode == "off" or settings.cache_dir is None:
        return None
    from .model_turn import ModelCache

    return ModelCache(settings.cache_dir, read="read" in settings.cache_mode, write="write" in settings.cache_mode)


def _submit(item: CaseItem) -> Any:
    """Start the item's model turn on the shared pool (or take it from the cache)."""
    from .model_turn import submit_turn

    settings = item.config.stash[settings_key]
    tools = list(item.case.tools) if item.case.tools is not None else list(item.family.tools)
    api_key = "unused-local-key" if item.policy.api_base else None
    cache = model_cache(settings)
    return submit_turn(item.case, tools, item.family.system_prompt, item.policy, settings.timeout_s,
                       settings.prices, api_key=api_key, cache=cache, trial=item.trial, retries=settings.retries)


def _live(item: pytest.Item) -> bool:
    return (isinstance(item, CaseItem) and item.policy.model is not None and item.case.label is not None)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only items that will run are grouped
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group live items in chunks (``xdist_group``) so a worker knows which items it will run."""
    if config.stash[settings_key].concurrency <= 1:
        return
    groups: dict[str, list[CaseItem]] = {}
    live = [it for it in items if _live(it)]
    for n, item in enumerate(live):
        assert isinstance(item, CaseItem)
        name = f"tooleffect-{n // PREFETCH_GROUP}"
        groups.setdefault(name, []).append(item)
        item.add_marker(pytest.mark.xdist_group(name=name))
    config.stash[_groups_key] = groups


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Prefetch model turns so that each item only waits for its own answer.

    Without xdist every live item runs here, so all are queued at the first one (the pool keeps
    ``--tooleffect-concurrency`` in flight).  Under xdist with ``--dist loadgroup`` a worker is
    handed whole chunks of live items, so it queues the chunk of the item it starts.  Under other
    ``--dist`` modes a worker does not know its items: it looks one item ahead.
    """
    config = item.config
    if not _live(item) or config.stash[settings_key].concurrency <= 1:
        return
    prefetched = _prefetched(config)
    submitted = config.stash.setdefault(_submitted_key, set())
    groups = config.stash.get(_groups_key, {})
    if not hasattr(config, "workerinput"):
        batch: list[Any] = [it for group in groups.values() for it in group]
    elif getattr(config.option, "dist", "no") == "loadgroup":
        batch = next((g for g in groups.values() if item in g), [])
    else:
        batch = [nextitem] if nextitem is not None and _live(nextitem) else []
    for it in [item, *batch]:
        assert isinstance(it, CaseItem)
        if it.nodeid not in submitted:
            submitted.add(it.nodeid)
            prefetched[it.nodeid] = _submit(it)


_submitted_key = pytest.StashKey[set[str]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "setup" and call.excinfo is not None and isinstance(call.excinfo.value,
                                                                        (ProviderFailed, SandboxFailed)):
        assert isinstance(item, CaseItem)
        exc = call.excinfo.value.error
        case = item.case
        tools = list(case.tools) if case.tools is not None else list(item.family.tools)
        item.stash[record_key] = build_record(
            item.family.name, case, item.policy.name, None, {t.name: t for t in tools},
            error={"type": exc.kind, "message": exc.message}, extra={"model": item.policy.model})
        item.config.hook.pytest_tooleffect_modify_record(record=item.stash[record_key], item=item)
    if call.when in ("setup", "call") and record_key in item.stash and not hasattr(report, "tooleffect_record"):
        report.tooleffect_record = item.stash[record_key]  # type: ignore[attr-defined]
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_json_runtest_metadata(item: pytest.Item, call: pytest.CallInfo[None]) -> dict[str, Any] | None:
    if call.when in ("setup", "call") and record_key in item.stash:
        return {"tooleffect": item.stash[record_key]}
    return None


# ----------------------------------------------------------------------- controller side


class Reporter:
    """Controller-only: collects records from reports (local or from xdist workers), writes the
    record log as they arrive, and the report at the end.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[settings_key]
        self.records: list[dict[str, Any]] = []
        self.log: RecordLog | None = None
        self.report: dict[str, Any] | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # a new log each run that addresses case families, even when nothing gets scored
        if self.settings.records is not None and _family_dirs(self.config):
            try:
                self.log = RecordLog(self.settings.records)
            except OSError as exc:
                raise pytest.UsageError(f"{OPT_RECORDS} {self.settings.records}: {exc}") from exc

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = getattr(report, "tooleffect_record", None)
        if record is None:
            return
        self.records.append(record)
        if self.log is None and self.settings.records is not None:
            self.log = RecordLog(self.settings.records)
        if self.log is not None:
            self.log.write(record)

    def _families_meta(self) -> dict[str, dict[str, Any]]:
        meta: dict[str, dict[str, Any]] = {}
        for fam in self.config.stash[families_key].values():
            if isinstance(fam, LoadedFamily):
                meta[fam.name] = fam.meta
        missing = {r["family"] for r in self.records} - set(meta)
        if missing:  # xdist controller: families were loaded on the workers
            for path in _family_dirs(self.config):
                try:
                    fam = load_family(path)
                except FamilyError:
                    continue
                if fam.name in missing:
                    meta[fam.name] = fam.meta
        return meta

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.records and self.settings.report is None:
            return
        from .report import dumps, summarise

        status = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "complete"
        self.report = summarise(self.records, self._families_meta(), status=status)
        self.report["judge"] = self._judge_info()
        if self.settings.report is not None:
            path = self.settings.report
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(dumps(self.report) + "\n", encoding="utf-8")
            except OSError as exc:
                session.config.get_terminal_writer().line(f"tooleffect: cannot write {path}: {exc}", red=True)

    def _judge_info(self) -> dict[str, Any]:
        settings = self.settings
        if not settings.judge_model:
            return {"model": None, "note": "no judge: free-text fields use the deterministic comparator (approximate)"}
        calibration: Any = "not measured"
        path = settings.judge_calibration
        if path is not None and path.is_file():
            try:
                cal = json.loads(path.read_text(encoding="utf-8"))
                if cal.get("model") == settings.judge_model:
                    calibration = {k: cal.get(k) for k in ("n", "agreement", "kappa", "kappa_ci95", "measured_at")}
            except (OSError, ValueError):
                calibration = "not measured (unreadable calibration file)"
        spent = [r["judge"] for r in self.records if r.get("judge")]
        usage = {k: sum(j[k] or 0 for j in spent) for k in ("calls", "cached", "input_tokens", "output_tokens")}
        costs = [j["cost_usd"] for j in spent]
        usage["cost_usd"] = None if any(c is None for c in costs) else sum(costs)
        return {"model": settings.judge_model, "calibration": calibration, "usage": usage}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.report is None or not self.settings.summary or not self.records:
            return
        from .report import render_terminal

        terminalreporter.write_sep("=", "tooleffect report")
        terminalreporter.write(render_terminal(self.report, width=max(120, terminalreporter._tw.fullwidth)))
        judge = self.report.get("judge") or {}
        if judge.get("model"):
            cal = judge["calibration"]
            measured = (f"Cohen's kappa {cal['kappa']:.2f} [{cal['kappa_ci95'][0]:.2f}, {cal['kappa_ci95'][1]:.2f}] "
                        f"on {cal['n']} hand-labelled pairs" if isinstance(cal, dict) else cal)
            u = judge["usage"]
            money = "unknown" if u["cost_usd"] is None else f"${u['cost_usd']:.6f}"
            terminalreporter.write_line(
                f"judge {judge['model']}: last measured agreement {measured}; {u['calls']} calls, "
                f"{u['cached']} cached, {u['input_tokens']} in / {u['output_tokens']} out tokens, {money} "
                "(apart from the agent's cost)")
        if self.settings.rpm is not None or self.settings.tpm is not None:
            terminalreporter.write_line(_rate_line(self.settings, self.records))
        if self.settings.report is not None:
            terminalreporter.write_line(f"tooleffect report written to {self.settings.report}")
        if self.settings.records is not None:
            terminalreporter.write_line(f"tooleffect records written to {self.settings.records}")

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def _rate_line(settings: Settings, records: list[dict[str, Any]]) -> str:
    """One summary line: the limits and the time model turns waited for them."""
    waits = [r.get("rate_wait_ms") or 0.0 for r in records if "rate_wait_ms" in r]
    limits = " and ".join(f"{n} {what}" for n, what in ((settings.rpm, "requests"), (settings.tpm, "tokens"))
                          if n is not None)
    return (f"tooleffect rate limit: {limits} per {settings.rate_window_s:g} s over all workers; "
            f"{sum(1 for w in waits if w > 0)} of {len(waits)} model turns waited for it, "
            f"{sum(waits) / 1000:.1f} s in all (not counted in latency)")


def _family_dirs(config: pytest.Config) -> list[Path]:
    dirs = set()
    for arg in config.args:
        p = Path(arg.split("::")[0])
        p = p if p.is_absolute() else Path(config.invocation_params.dir) / p
        base = p if p.is_dir() else p.parent
        if (base / FAMILY_FILE).is_file():
            dirs.add(base)
        if p.is_dir():
            dirs.update(f.parent for f in p.rglob(FAMILY_FILE))
    return sorted(dirs)


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash.get(settings_key, None)
    if settings is None:
        return None
    live = [p for p in ([settings.model] if settings.model else []) + list(settings.policies)]
    policies = ", ".join(live) if live else "replay (offline)"
    return f"tooleffect: policies {policies}; records {settings.records or 'off'}"


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """Say up front how long a request limit makes the run at the least (when over ten minutes)."""
    settings = config.stash.get(settings_key, None)
    if settings is None or settings.rpm is None:
        return None
    live = sum(1 for it in items if _live(it))
    least_s = max(0, -(-live // settings.rpm) - 1) * settings.rate_window_s
    if least_s < 600:
        return None
    return (f"tooleffect: at {settings.rpm} requests per {settings.rate_window_s:g} s, {live} live model turns "
            f"take at least {least_s / 60:.0f} min (Ctrl-C keeps the finished records)")




@pytest.fixture
def tooleffect_score(request: pytest.FixtureRequest) -> Callable[..., Verdict]:
    """Score one decision inside an ordinary test: ``verdict = tooleffect_score(emitted, label, tools)``.

    The same as :func:`pytest_tooleffect.score`, with the predicates registered through
    ``pytest_tooleffect_predicates`` available to rules.  Extra keyword arguments: ``rules``
    (a :class:`~pytest_tooleffect.oracle.RuleSet`), ``timezone``, ``state``, ``messages``.
    """
    predicates = _predicates(request.config)

    def _score(emitted: Any, label: Any, tools: Any, *, rules: Any = None, timezone: str | None = None,
               state: Mapping[str, Any] | None = None, messages: Any = ()) -> Verdict:
        ctx = CompareContext(timezone=timezone, state=state or {}, messages=messages, predicates=predicates)
        return score(emitted, label, tools, rules, ctx)

    return _score
