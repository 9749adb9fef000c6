"""The run's options resolved once, at configure time, into the frozen :class:`Settings` (the
sandbox's :class:`SandboxSettings` included), kept in the config's stash under :data:`settings_key`.

:func:`resolve` reads every ``--tooleffect-*`` option and ``tooleffect_*`` ini key that
:mod:`pytest_tooleffect.options` declares, checks what parse time cannot (ini values, the prices
file, ``[tool.tooleffect.policies]`` and ``default_policies``, api base URLs) and raises
:class:`pytest.UsageError` before any test runs.  The output paths are checked next, against every file the run reads
(:func:`pytest_tooleffect.report.outputs.check_run_outputs`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_tooleffect import wire
from pytest_tooleffect.formats import Policy, Price
from pytest_tooleffect.options import (
    DEFAULT_MIN_CLASS_N,
    INI_BASELINE,
    INI_IMAGE,
    INI_JUDGE_CACHE,
    INI_KEEP,
    INI_MIN_CLASS_N,
    INI_MODEL_CACHE,
    INI_POOL,
    INI_RATE_BACKEND,
    INI_RATE_FILE,
    INI_RATE_WINDOW,
    INI_RECORDS,
    INI_RPM,
    INI_SANDBOX,
    INI_TPM,
    KEEP_MODES,
    OPT_AGENT,
    OPT_API_BASE,
    OPT_BASELINE,
    OPT_BASELINE_CHANGED,
    OPT_CACHE,
    OPT_CONCURRENCY,
    OPT_HTML,
    OPT_JUDGE,
    OPT_JUDGE_BASE,
    OPT_JUDGE_CAL,
    OPT_KEEP,
    OPT_MIN_CLASS_N,
    OPT_MODEL,
    OPT_NO_SUMMARY,
    OPT_POLICY,
    OPT_PRICES,
    OPT_RECORDS,
    OPT_REPEATS,
    OPT_REPORT,
    OPT_RETRIES,
    OPT_ROLLOUT,
    OPT_RPM,
    OPT_SANDBOX,
    OPT_SETTLE_KEY,
    OPT_SETTLE_RESET,
    OPT_SHARD,
    OPT_SUMMARY_MD,
    OPT_TIMEOUT,
    OPT_TPM,
    REPEATS_ADAPTIVE,
    REPLAY,
    parse_min_class_n,
    parse_positive_float,
    parse_rpm,
    parse_tpm,
)
from pytest_tooleffect.outcomes import PolicyShadowWarning
from pytest_tooleffect.price_file import load_prices
from pytest_tooleffect.util.arguments import ends_in_separator
from pytest_tooleffect.util.display import shown
from pytest_tooleffect.util.extras import MissingExtra, require
from pytest_tooleffect.util.input_files import read_input_text
from pytest_tooleffect.util.redaction import looks_like_key, register
from pytest_tooleffect.util.urls import url_secrets, without_password

__all__ = ["DEFAULT_POLICIES", "PYPROJECT", "PYPROJECT_KEYS", "SandboxSettings", "Settings", "is_live",
           "read_config_file", "read_pyproject", "resolve", "settings_key", "shadowed_policies"]

#: the file ``[tool.tooleffect.*]`` tables are read from, in pytest's rootdir
PYPROJECT = "pyproject.toml"
#: the key of ``[tool.tooleffect]`` naming the policies a run that names none runs
DEFAULT_POLICIES = "default_policies"


@dataclass(frozen=True)
class SandboxSettings:
    """The sandbox's options, resolved once at configure time.

    Attributes:
        provider: ``docker``, ``local`` or ``off``.
        keep: ``never``, ``failed`` or ``always``: which items' containers are kept for inspection.
        pool: reuse warm sandboxes within a process, reset between items.
        image: the image tag, or ``None`` for the tag of the ``sandbox/`` build context.
        rollout: steps a live policy may take (1 = the single teacher-forced decision).
        run_id: the run's id (the xdist controller's, on workers), labelled on every container.
        owner_pid: the process that owns the run (the controller's under xdist).
        worker: the xdist worker id, or ``main``.
    """

    provider: str
    keep: str
    pool: bool
    image: str | None
    rollout: int
    run_id: str
    owner_pid: int
    worker: str


@dataclass(frozen=True)
class Settings:
    """Every option of a run, resolved once at configure time (see :func:`resolve`).

    Attributes:
        report: the JSON report's path, or ``None``.
        records: the record log's path, or ``None`` (disabled).
        summary: print the per-class report at the end.
        model: ``--tooleffect-model``, a litellm model name run as a policy of that name.
        api_base: its api base.
        policies: the named policies the run runs, in order, without repeats: the
            ``--tooleffect-policy`` names, or, when no policy option is given, the ``default_policies``
            of ``[tool.tooleffect]``.
        agents: the policies ``--tooleffect-agent`` names (each an agent callable).
        timeout_s: the timeout of one model call, in seconds.
        prices: user prices (USD per million tokens) by model name.
        pyproject_policies: ``[tool.tooleffect.policies]`` by name.
        default_policies: ``default_policies`` of ``[tool.tooleffect]``: the policies a run that
            names none runs (``()``: replay), each in :attr:`pyproject_policies` or ``replay``.
        policies_by_default: :attr:`policies` are the :attr:`default_policies` (no policy option was given).
        pyproject: the rootdir's ``pyproject.toml`` (read once, by :func:`read_pyproject`; it may not exist).
        gates_table: its ``[tool.tooleffect.gates]`` as TOML reads it (unchecked: the gate keeper
            validates it), or ``None`` when the file or the table is absent.
        judge_model: the LLM judge for free-text fields, or ``None``.
        judge_api_base: its api base.
        judge_cache: folder of cached judge verdicts, or ``None``.
        judge_calibration: the judge's last calibration file.
        repeats: trials per case × policy (the items collected per case; under adaptive repeats the
            most one case may need, ``min(k*, max_trials)``, set by ``ci/adaptive_run.py``).
        adaptive_repeats: ``--tooleffect-repeats adaptive``: another trial only while a case is
            neither stable nor flaky.
        repeats_table: ``[tool.tooleffect.repeats]`` as TOML reads it (unchecked: the adaptive
            repeats' design validates it), or ``None``.
        cache_mode: ``off``, ``read``, ``write`` or ``readwrite`` (the model-answer cache).
        cache_dir: folder of cached model answers.
        concurrency: model turns in flight at once per process.
        retries: retries of a model request on 408, 429, 5xx, timeouts and lost connections (at
            most ``retries + 1`` requests per turn).
        rpm: run-wide requests per rate window, or ``None``.
        tpm: run-wide tokens per rate window, or ``None``.
        rate_window_s: the rate limits' window, in seconds.
        rate_file: a limiter state file shared by every run that names it, or ``None``.
        sandbox: the sandbox's settings.
        baseline: the baseline file a run's outcomes are classified against, or ``None``.
        baseline_changed_labels: ``skip`` or ``compare`` decisions whose label changed since the baseline.
        summary_md: the Markdown summary's path (``--tooleffect-summary-md``), or ``None``.
        html: the HTML page's path (``--tooleffect-html``), or ``None``.
        min_class_n: a class with fewer scored rows is flagged as small in the report.
        shard: ``(index, count)`` of ``--tooleffect-shard I/N`` (1-based), or ``None``.
        settle_key: ``--tooleffect-settle-key``: the sequential gates' shared tally's name in Redis, or ``None``.
        settle_reset: ``--tooleffect-settle-reset``: a settle key holding an earlier run's tally is taken over.
        rate_backend: ``redis://…`` URL of the shared rate limit (``tooleffect_rate_backend``), or
            ``None`` for the SQLite file.
    """

    report: Path | None
    records: Path | None
    summary: bool
    model: str | None = None
    api_base: str | None = None
    policies: tuple[str, ...] = ()
    agents: tuple[Policy, ...] = ()
    timeout_s: float = 60.0
    prices: Mapping[str, Price] = field(default_factory=dict)
    pyproject_policies: Mapping[str, Policy] = field(default_factory=dict)
    default_policies: tuple[str, ...] = ()
    policies_by_default: bool = False
    pyproject: Path = Path(PYPROJECT)
    gates_table: Any = None
    judge_model: str | None = None
    judge_api_base: str | None = None
    judge_cache: Path | None = None
    judge_calibration: Path | None = None
    repeats: int = 1
    adaptive_repeats: bool = False
    repeats_table: Any = None
    cache_mode: str = "off"
    cache_dir: Path | None = None
    concurrency: int = 8
    retries: int = 2
    rpm: int | None = None
    tpm: int | None = None
    rate_window_s: float = 60.0
    rate_file: Path | None = None
    sandbox: SandboxSettings | None = None
    baseline: Path | None = None
    baseline_changed_labels: str = "skip"
    summary_md: Path | None = None
    html: Path | None = None
    min_class_n: int = DEFAULT_MIN_CLASS_N
    shard: tuple[int, int] | None = None
    settle_key: str | None = None
    settle_reset: bool = False
    rate_backend: str | None = None

    @property
    def live(self) -> bool:
        """Some policy of the run may not be a replay (:func:`is_live` of its policy options)."""
        return is_live(self.model, self.policies, self.agents)

    @property
    def model_turns(self) -> bool:
        """Some policy of the run may make model turns through litellm: ``--tooleffect-model``, or a
        named policy with a model or not known here (the family's, read later).  Narrower than
        :attr:`live`: an agent policy is live and makes no model turn of the plugin's.
        """
        named = (self.pyproject_policies.get(name) for name in self.policies if name != "replay")
        return bool(self.model) or any(p is None or p.model for p in named)  # None: the family's, unknown yet


def is_live(model: str | None, policies: Sequence[str], agents: Sequence[Policy]) -> bool:
    """The one definition of a live run: some policy of it may not be a replay.

    A run is live when it names a policy at all: ``--tooleffect-model``, ``--tooleffect-agent`` or
    ``--tooleffect-policy`` (a named policy may have a model or an agent); with none, every item
    replays its recorded decision.  Whether one *item* is live is
    :attr:`~pytest_tooleffect.collect.items.CaseItem.live`.

    Args:
        model: ``--tooleffect-model``, or ``None``.
        policies: the ``--tooleffect-policy`` names.
        agents: the ``--tooleffect-agent`` policies.
    """
    return bool(model or policies or agents)


settings_key = pytest.StashKey[Settings]()


def _rate_backend(config: pytest.Config) -> str | None:
    """The rate limit's state from ini ``tooleffect_rate_backend``: ``None`` (the SQLite file) or a
    ``redis://`` / ``rediss://`` / ``unix://`` URL.
    """
    raw = str(config.getini(INI_RATE_BACKEND)).strip()
    if not raw:
        return None
    for secret in url_secrets(raw):  # a password in the URL is redacted from everything the run writes
        register(secret)
    if not raw.startswith(("redis://", "rediss://", "unix://")):
        raise pytest.UsageError(f"ini {INI_RATE_BACKEND} = {without_password(raw)!r}: expected empty (the SQLite "
                                "file) or a redis://HOST:PORT/DB URL")
    try:
        require("redis", f"ini {INI_RATE_BACKEND} (a rate limit kept in Redis)")
    except MissingExtra as exc:
        raise pytest.UsageError(str(exc)) from None
    return raw


# --------------------------------------------------------------------------------- resolve


def resolve(config: pytest.Config, sandbox_providers: list[str]) -> Settings:
    """Resolve every option and ini key into one :class:`Settings`.

    Args:
        config: pytest's config (on an xdist worker, ``workerinput`` carries the run id and owner).
        sandbox_providers: the registered sandbox providers' names.

    Returns:
        The run's settings.

    Raises:
        pytest.UsageError: an ini value, the prices file, ``[tool.tooleffect.policies]`` or its
            ``default_policies`` is invalid, or an api base URL holds a key (checked before any test runs).
    """
    records_opt = config.getoption(OPT_RECORDS)
    records = records_opt if records_opt is not None else config.getini(INI_RECORDS)
    if records_opt is None and records and ends_in_separator(records):
        raise pytest.UsageError(f"ini {INI_RECORDS} = {records!r}: ends in {records[-1]!r}, so it names a folder; the "
                                "record log is one file: give its name (e.g. reports/tooleffect-records.jsonl)")
    for opt in (OPT_API_BASE, OPT_JUDGE_BASE):
        base = config.getoption(opt)
        if base and looks_like_key(base):
            raise pytest.UsageError(f"{opt}: the URL holds what looks like a key (not shown); give the key through "
                                    "the provider's variable (OPENAI_API_KEY, …) or a policy's api_key_env: NAME")
    pyproject = read_pyproject(Path(config.rootpath))
    pyproject_policies = _pyproject_policies(pyproject)
    default_policies = _default_policies(pyproject, pyproject_policies)
    model, agents = config.getoption(OPT_MODEL), tuple(config.getoption(OPT_AGENT))
    policies = tuple(dict.fromkeys(config.getoption(OPT_POLICY)))
    by_default = bool(default_policies) and not is_live(model, policies, agents)  # an option overrides them
    if by_default:
        policies = default_policies
    repeats = config.getoption(OPT_REPEATS)
    settings = Settings(
        report=config.getoption(OPT_REPORT),
        records=(Path(config.rootpath) / records) if records else None,
        summary=not config.getoption(OPT_NO_SUMMARY),
        model=model,
        api_base=config.getoption(OPT_API_BASE),
        policies=policies,
        agents=agents,
        timeout_s=config.getoption(OPT_TIMEOUT),
        prices=load_prices(config.getoption(OPT_PRICES)),
        pyproject_policies=pyproject_policies,
        default_policies=default_policies,
        policies_by_default=by_default,
        pyproject=pyproject[0],
        gates_table=_table(pyproject[1], "tool", "tooleffect", "gates"),
        judge_model=config.getoption(OPT_JUDGE),
        judge_api_base=config.getoption(OPT_JUDGE_BASE),
        judge_cache=_rooted(config, config.getini(INI_JUDGE_CACHE)),
        judge_calibration=config.getoption(OPT_JUDGE_CAL),
        repeats=repeats if isinstance(repeats, int) else 1,
        adaptive_repeats=repeats == REPEATS_ADAPTIVE,
        repeats_table=_table(pyproject[1], "tool", "tooleffect", "repeats"),
        cache_mode=config.getoption(OPT_CACHE),
        cache_dir=_rooted(config, config.getini(INI_MODEL_CACHE)),
        concurrency=config.getoption(OPT_CONCURRENCY),
        retries=config.getoption(OPT_RETRIES),
        rate_file=_rooted(config, config.getini(INI_RATE_FILE)),
        sandbox=_sandbox_settings(config, sandbox_providers, is_live(model, policies, agents)),
        baseline=_baseline_path(config),
        baseline_changed_labels=config.getoption(OPT_BASELINE_CHANGED),
        summary_md=config.getoption(OPT_SUMMARY_MD),
        html=config.getoption(OPT_HTML),
        min_class_n=_min_class_n(config),
        shard=config.getoption(OPT_SHARD),
        settle_key=config.getoption(OPT_SETTLE_KEY),
        settle_reset=bool(config.getoption(OPT_SETTLE_RESET)),
        rate_backend=_rate_backend(config),
        **_rate_settings(config),
    )
    if not hasattr(config, "workerinput"):  # said once, by the controller
        for text in shadowed_policies(settings):
            config.issue_config_time_warning(PolicyShadowWarning(text), stacklevel=2)
    for base, needs, opt in ((settings.api_base, settings.model, OPT_MODEL),
                             (settings.judge_api_base, settings.judge_model, OPT_JUDGE)):
        if base and not needs:
            api_opt, hint = ((OPT_API_BASE, " (a named policy sets its own api_base in [tool.tooleffect.policies])")
                             if opt == OPT_MODEL else (OPT_JUDGE_BASE, ""))
            raise pytest.UsageError(f"{api_opt} {base}: an api base is for {opt}, which is not given{hint}")
    return settings


def shadowed_policies(settings: Settings) -> list[str]:
    """What each ``--tooleffect-agent NAME=…`` does to a ``[tool.tooleffect.policies.NAME]`` of the same
    name, in words: it runs under the name in its place (its records, baseline decisions and gates are
    the agent's) and the pyproject policy's settings go unused.  A warning rather than an error: keeping
    a policy's name for a variant is how the variant's decisions pair with a baseline saved under it.

    Args:
        settings: the run's settings (its agents and its pyproject policies).

    Returns:
        One message per shadowed policy, naming both, the pyproject file, the settings not used (their
        names, never their values) and how to run both.
    """
    out = []
    for agent in settings.agents:
        policy = settings.pyproject_policies.get(agent.name)
        if policy is None or policy == agent:
            continue
        unused = sorted(policy.model_dump(exclude_defaults=True, exclude={"name"}))
        name, agent_ref = shown(agent.name), shown(agent.agent)
        out.append(f"{OPT_AGENT} {name}={agent_ref} runs as policy {name!r} in place of "
                   f"[tool.tooleffect.policies.{name}] in {settings.pyproject} (not used: {', '.join(unused)}); "
                   f"its records and baseline decisions under {name!r} are this agent's. To run both, give the "
                   f"command line's agent another name ({OPT_AGENT} {name}-variant={agent_ref})")
    return out


def _sandbox_settings(config: pytest.Config, providers: list[str], live: bool) -> SandboxSettings:
    provider = config.getoption(OPT_SANDBOX) or config.getini(INI_SANDBOX)
    if provider not in [*providers, "off"]:
        raise pytest.UsageError(f"ini {INI_SANDBOX}: unknown provider {provider!r}")
    keep = config.getoption(OPT_KEEP) or config.getini(INI_KEEP)
    if keep not in KEEP_MODES:
        raise pytest.UsageError(f"ini {INI_KEEP}: expected one of {', '.join(KEEP_MODES)}, got {keep!r}")
    rollout = config.getoption(OPT_ROLLOUT)
    if rollout > 1 and not live:
        raise pytest.UsageError(f"{OPT_ROLLOUT} {rollout}: a rollout needs a live policy ({OPT_MODEL}, {OPT_AGENT}, "
                                f"{OPT_POLICY} or default_policies in [tool.tooleffect]); a replay is one recorded "
                                "decision")
    if rollout > 1 and provider == "off":
        raise pytest.UsageError(f"{OPT_ROLLOUT} {rollout}: a rollout runs the policy's calls in a sandbox and "
                                f"{OPT_SANDBOX} off runs none (choose one of: {', '.join(providers)})")
    workerinput = getattr(config, "workerinput", None)
    return SandboxSettings(
        provider=provider, keep=keep, pool=bool(config.getini(INI_POOL)), image=config.getini(INI_IMAGE) or None,
        rollout=rollout,
        run_id=workerinput[wire.WORKER_RUN_ID] if workerinput else uuid.uuid4().hex,
        owner_pid=int(workerinput[wire.WORKER_OWNER_PID]) if workerinput else os.getpid(),
        worker=workerinput[wire.WORKER_ID] if workerinput else "main",
    )


def _min_class_n(config: pytest.Config) -> int:
    """``--tooleffect-min-class-n``, else the ini key, else the default."""
    value = config.getoption(OPT_MIN_CLASS_N)
    if value is not None:
        return int(value)
    raw = str(config.getini(INI_MIN_CLASS_N)).strip() or str(DEFAULT_MIN_CLASS_N)
    try:
        return parse_min_class_n(raw)
    except Exception as exc:
        raise pytest.UsageError(f"ini {INI_MIN_CLASS_N} = {raw!r}: {exc}") from None


def _rate_settings(config: pytest.Config) -> dict[str, Any]:
    """``rpm``, ``tpm`` and ``rate_window_s`` from the options, else the ini keys."""
    out: dict[str, Any] = {}
    for key, opt, ini, parse in (("rpm", OPT_RPM, INI_RPM, parse_rpm), ("tpm", OPT_TPM, INI_TPM, parse_tpm)):
        value = config.getoption(opt)
        raw = str(config.getini(ini)).strip()
        if value is None and raw:
            try:
                value = parse(raw)
            except Exception as exc:
                raise pytest.UsageError(f"ini {ini} = {raw!r}: {exc}") from None
        out[key] = value
    raw = str(config.getini(INI_RATE_WINDOW)).strip() or "60"
    try:
        out["rate_window_s"] = parse_positive_float(raw)
    except Exception as exc:
        raise pytest.UsageError(f"ini {INI_RATE_WINDOW} = {raw!r}: {exc}") from None
    return out


def _baseline_path(config: pytest.Config) -> Path | None:
    """``--tooleffect-baseline`` (relative to the invocation folder), else ini ``tooleffect_baseline`` (relative
    to the rootdir); ``None`` when neither is given.
    """
    path: Path | None = config.getoption(OPT_BASELINE)
    if path is not None:
        return Path(config.invocation_params.dir) / path
    return _rooted(config, str(config.getini(INI_BASELINE)).strip())


def _rooted(config: pytest.Config, value: str) -> Path | None:
    return Path(config.rootpath) / value if value else None


#: the keys of ``[tool.tooleffect]`` in ``pyproject.toml`` (three tables and a list); any other key is refused
PYPROJECT_KEYS = frozenset({"gates", "policies", "repeats", DEFAULT_POLICIES})


def read_pyproject(rootpath: Path) -> tuple[Path, dict[str, Any]]:
    """Read ``rootpath/pyproject.toml``: the one reading of the file in a run (its policies and its
    gates are both taken from :class:`Settings`).

    Args:
        rootpath: pytest's rootdir.

    Returns:
        ``(path, document)``: the file's path and its TOML document (``{}`` when there is no file).

    Raises:
        pytest.UsageError: the file cannot be read, is not UTF-8 or is not TOML, or its
            ``[tool.tooleffect]`` holds a key other than :data:`PYPROJECT_KEYS` (the message names it).
    """
    path = Path(rootpath) / PYPROJECT
    if not path.is_file():
        return path, {}
    return path, read_config_file(path)


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a ``pyproject.toml`` (or another TOML file shaped like one) and check its ``[tool.tooleffect]``.

    Args:
        path: the file (a regular file or a pipe).

    Returns:
        The TOML document.

    Raises:
        pytest.UsageError: as :func:`read_pyproject`; also for a path that is missing, a folder or
            a device (one line naming the file).
    """
    import tomllib

    try:
        doc = tomllib.loads(read_input_text(path))
    except OSError as exc:
        raise pytest.UsageError(f"{path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"{path}: not TOML ({exc})") from exc
    section = _table(doc, "tool", "tooleffect")
    if isinstance(section, Mapping):  # a misspelt table ([tool.tooleffect.gate]) would be read as no table at all
        unknown = sorted(set(section) - PYPROJECT_KEYS)
        if unknown:
            named = ", ".join(shown(repr(k)) for k in unknown)
            raise pytest.UsageError(f"{path}: [tool.tooleffect] has {named}, which it does "
                                    f"not know (its keys: {', '.join(sorted(PYPROJECT_KEYS))}); a misspelt "
                                    "key would be read as none")
    return doc


def _table(doc: Mapping[str, Any], *keys: str) -> Any:
    """The value at ``keys`` in a TOML document, or ``None`` where a key is missing or a value on
    the way is not a table.
    """
    value: Any = doc
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _pyproject_policies(pyproject: tuple[Path, dict[str, Any]]) -> dict[str, Policy]:
    path, doc = pyproject
    tool = doc.get("tool", {})
    section = tool.get("tooleffect", {}) if isinstance(tool, dict) else {}
    table = section.get("policies", {}) if isinstance(section, dict) else None
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{path}: [tool.tooleffect.policies] must be a table of policy tables")
    out = {}
    for name, spec in table.items():
        where = f"{path}: [tool.tooleffect.policies.{shown(name)}]"
        if not isinstance(spec, dict):
            raise pytest.UsageError(f"{where} must be a table (model = ... or "
                                    "agent = ...)")
        try:
            out[name] = Policy.model_validate({**spec, "name": name})
        except ValidationError as exc:
            raise pytest.UsageError(f"{where}: {validation_errors(exc)}") from None
        if name == REPLAY.name:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.replay]: 'replay' is the built-in offline "
                                    "policy; choose another name")
    return out


def validation_errors(exc: ValidationError) -> str:
    """A pydantic error in one line for a usage error: each error's field path and message, joined
    by ``; ``, without pydantic's "For further information visit" tails, every part shown through
    :func:`~pytest_tooleffect.util.display.shown` (a field path may be a key the file holds).
    """
    parts = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(x) for x in error["loc"])  # empty: the table as a whole (a model validator)
        msg = shown(str(error["msg"]).removeprefix("Value error, "))
        parts.append(f"{shown(loc)}: {msg}" if loc else msg)
    return "; ".join(parts) or "invalid"


def _default_policies(pyproject: tuple[Path, dict[str, Any]], policies: Mapping[str, Policy]) -> tuple[str, ...]:
    """``default_policies`` of ``[tool.tooleffect]``: ``()`` when absent.

    Raises:
        pytest.UsageError: it is not a non-empty list of distinct names, each a policy of
            ``[tool.tooleffect.policies]`` or ``replay`` (the message names the file and the name).
    """
    path, doc = pyproject
    value = _table(doc, "tool", "tooleffect", DEFAULT_POLICIES)
    if value is None:
        return ()
    where = f"{path}: [tool.tooleffect] {DEFAULT_POLICIES}"
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise pytest.UsageError(f'{where}: expected a list of policy names such as ["my-agent"], '
                                f'got {shown(repr(value))}')
    known = sorted({REPLAY.name, *policies})
    for name in value:
        if name != REPLAY.name and name not in policies:
            raise pytest.UsageError(f"{where}: {shown(repr(name))} is not a policy of [tool.tooleffect.policies] "
                                    f"(known: {', '.join(map(shown, known))}); a family's own policies are named "
                                    f"with {OPT_POLICY}")
    twice = sorted({n for n in value if value.count(n) > 1})
    if twice:
        raise pytest.UsageError(f"{where}: {', '.join(shown(repr(n)) for n in twice)} named twice")
    return tuple(value)
