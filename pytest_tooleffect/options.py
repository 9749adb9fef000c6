"""Every ``--tooleffect-*`` option and ``tooleffect_*`` ini key, their validators, and the one
frozen :class:`Settings` they resolve into at configure time.

The first stage of the path of one case (``docs/design.md``, "Architecture"): it imports only
the data models, no other stage.  Tests import the option names from here.
"""

from __future__ import annotations

import argparse
import math
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from .models import Policy, Price
from .oracle.rules import UniqueKeyLoader
from .outputs import check_distinct, check_writable
from .redaction import looks_like_key

__all__ = [
    "BASELINE_CHANGED_LABELS",
    "CACHE_MODES",
    "DEFAULT_MIN_CLASS_N",
    "DEFAULT_RECORDS",
    "INI_BASELINE",
    "INI_IMAGE",
    "INI_JUDGE_CACHE",
    "INI_KEEP",
    "INI_MIN_CLASS_N",
    "INI_MODEL_CACHE",
    "INI_POOL",
    "INI_RATE_BACKEND",
    "INI_RATE_FILE",
    "INI_RATE_WINDOW",
    "INI_RECORDS",
    "INI_RPM",
    "INI_SANDBOX",
    "INI_TPM",
    "KEEP_MODES",
    "OPT_AGENT",
    "OPT_API_BASE",
    "OPT_BASELINE",
    "OPT_BASELINE_CHANGED",
    "OPT_CACHE",
    "OPT_CONCURRENCY",
    "OPT_JUDGE",
    "OPT_JUDGE_BASE",
    "OPT_HTML",
    "OPT_JUDGE_CAL",
    "OPT_KEEP",
    "OPT_MIN_CLASS_N",
    "OPT_MODEL",
    "OPT_NO_SUMMARY",
    "OPT_POLICY",
    "OPT_PRICES",
    "OPT_RECORDS",
    "OPT_REPEATS",
    "OPT_REPORT",
    "OPT_RETRIES",
    "OPT_ROLLOUT",
    "OPT_RPM",
    "OPT_SANDBOX",
    "OPT_SHARD",
    "OPT_SUMMARY_MD",
    "OPT_TIMEOUT",
    "OPT_TPM",
    "REPLAY",
    "SandboxSettings",
    "Settings",
    "addoptions",
    "resolve",
    "settings_key",
]

OPT_REPORT = "--tooleffect-report"
OPT_RECORDS = "--tooleffect-records"
OPT_NO_SUMMARY = "--tooleffect-no-summary"
OPT_SUMMARY_MD = "--tooleffect-summary-md"
OPT_HTML = "--tooleffect-html"
OPT_MODEL = "--tooleffect-model"
OPT_API_BASE = "--tooleffect-api-base"
OPT_AGENT = "--tooleffect-agent"
OPT_POLICY = "--tooleffect-policy"
OPT_TIMEOUT = "--tooleffect-timeout"
OPT_PRICES = "--tooleffect-prices"
OPT_JUDGE = "--tooleffect-judge-model"
OPT_JUDGE_BASE = "--tooleffect-judge-api-base"
OPT_JUDGE_CAL = "--tooleffect-judge-calibration"
OPT_REPEATS = "--tooleffect-repeats"
OPT_CACHE = "--tooleffect-cache"
OPT_CONCURRENCY = "--tooleffect-concurrency"
OPT_RETRIES = "--tooleffect-retries"
OPT_RPM = "--tooleffect-rpm"
OPT_TPM = "--tooleffect-tpm"
OPT_SANDBOX = "--tooleffect-sandbox"
OPT_KEEP = "--tooleffect-keep-sandbox"
OPT_ROLLOUT = "--tooleffect-rollout"
OPT_BASELINE = "--tooleffect-baseline"
OPT_BASELINE_CHANGED = "--tooleffect-baseline-changed-labels"
OPT_MIN_CLASS_N = "--tooleffect-min-class-n"
OPT_SHARD = "--tooleffect-shard"

INI_RECORDS = "tooleffect_records"
INI_JUDGE_CACHE = "tooleffect_judge_cache"
INI_MODEL_CACHE = "tooleffect_model_cache"
INI_RPM = "tooleffect_rpm"
INI_TPM = "tooleffect_tpm"
INI_RATE_WINDOW = "tooleffect_rate_window"
INI_RATE_FILE = "tooleffect_rate_file"  # a limiter state file shared by every run that names it
INI_RATE_BACKEND = "tooleffect_rate_backend"  # redis://… : one limit over shards on many hosts
INI_SANDBOX = "tooleffect_sandbox"
INI_KEEP = "tooleffect_keep_sandbox"
INI_POOL = "tooleffect_sandbox_pool"
INI_IMAGE = "tooleffect_sandbox_image"
INI_BASELINE = "tooleffect_baseline"
INI_MIN_CLASS_N = "tooleffect_min_class_n"

DEFAULT_RECORDS = "reports/tooleffect-records.jsonl"
#: A class with fewer rows is flagged as small in the report: at 20 rows one row moves its rate by 5
#: points and a Wilson 95 % interval around 90 % spans about 25 points.
DEFAULT_MIN_CLASS_N = 20
CACHE_MODES = ("off", "read", "write", "readwrite")
KEEP_MODES = ("never", "failed", "always")
BASELINE_CHANGED_LABELS = ("skip", "compare")

#: The offline default policy: replay the action the agent actually took (``recorded``).
REPLAY = Policy(name="replay")


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
        policies: the named policies asked for, in order, without repeats.
        agents: the policies ``--tooleffect-agent`` names (each an agent callable).
        timeout_s: the timeout of one model call, in seconds.
        prices: user prices (USD per million tokens) by model name.
        pyproject_policies: ``[tool.tooleffect.policies]`` by name.
        judge_model: the LLM judge for free-text fields, or ``None``.
        judge_api_base: its api base.
        judge_cache: folder of cached judge verdicts, or ``None``.
        judge_calibration: the judge's last calibration file.
        repeats: trials per case × policy.
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
    rate_file: Path | None = None
    sandbox: SandboxSettings | None = None
    baseline: Path | None = None
    baseline_changed_labels: str = "skip"
    summary_md: Path | None = None
    html: Path | None = None
    min_class_n: int = DEFAULT_MIN_CLASS_N
    shard: tuple[int, int] | None = None
    rate_backend: str | None = None

    @property
    def live(self) -> bool:
        """Some policy of the run may not be a replay (a model, an agent, or a named policy)."""
        return bool(self.model or self.policies or self.agents)


settings_key = pytest.StashKey[Settings]()


# ------------------------------------------------------------------------------ validators


def _path_or_none(value: str) -> Path | None:
    return Path(value) if value else None


#: a day, in seconds: the longest model-call timeout and rate window accepted
MAX_SECONDS = 86_400.0


def _positive_float(value: str) -> float:
    try:
        f = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from exc
    if not math.isfinite(f) or f <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be positive")
    if f > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{value!r} must be at most {MAX_SECONDS:g} (a day, in seconds)")
    return f


def _int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=`` for whole numbers from ``minimum`` to ``maximum`` (inclusive)."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from exc
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at least {minimum}")
        if maximum is not None and n > maximum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at most {maximum:,}")
        return n

    return parse


_positive_int = _int_at_least(1)
#: upper bounds of the counts: far past any real run, below what would exhaust memory or time at start
MAX_REPEATS = 1_000
MAX_CONCURRENCY = 1_024
MAX_RPM = 10_000_000
MAX_TPM = 10**12
MAX_MIN_CLASS_N = 1_000_000
MAX_SHARDS = 100_000
MAX_RETRIES = 100
_repeats = _int_at_least(1, MAX_REPEATS)
_concurrency = _int_at_least(1, MAX_CONCURRENCY)
_rpm = _int_at_least(1, MAX_RPM)
_tpm = _int_at_least(1, MAX_TPM)
_class_n = _int_at_least(1, MAX_MIN_CLASS_N)
_retries = _int_at_least(0, MAX_RETRIES)


def _agent_policy(value: str) -> Policy:
    """``[NAME=]package.module:function`` → an agent policy (named after the function by default)."""
    name, eq, spec = value.partition("=")
    if not eq:
        name, spec = "", value
    module, colon, attr = spec.partition(":")
    if not colon or not module or not attr or not all(p.isidentifier() for p in (*module.split("."),
                                                                                  *attr.split("."))):
        raise argparse.ArgumentTypeError(f"{value!r} is not [NAME=]package.module:function")
    name = name or attr.rsplit(".", 1)[-1]
    if name == REPLAY.name:
        raise argparse.ArgumentTypeError(f"{value!r}: 'replay' is the built-in offline policy; choose another name")
    return Policy(name=name, agent=spec)


def _shard(value: str) -> tuple[int, int]:
    """``I/N`` → ``(I, N)`` with ``1 <= I <= N``."""
    index, slash, count = value.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not I/N (shard I of N, e.g. 2/4)") from None
    if not slash or n < 1 or not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"{value!r}: the shard I/N needs 1 <= I <= N")
    if n > MAX_SHARDS:
        raise argparse.ArgumentTypeError(f"{value!r}: at most {MAX_SHARDS:,} shards")
    return i, n


def _rate_backend(config: pytest.Config) -> str | None:
    """The rate limit's state from ini ``tooleffect_rate_backend``: ``None`` (the SQLite file) or a
    ``redis://`` / ``rediss://`` / ``unix://`` URL.
    """
    raw = str(config.getini(INI_RATE_BACKEND)).strip()
    if not raw:
        return None
    if not raw.startswith(("redis://", "rediss://", "unix://")):
        raise pytest.UsageError(f"ini {INI_RATE_BACKEND} = {raw!r}: expected empty (the SQLite file) or a "
                                "redis://HOST:PORT/DB URL")
    return raw


def _rollout_steps(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise pytest.UsageError(f"{OPT_ROLLOUT}: expected a whole number of steps, got {value!r}") from None
    if not 1 <= n <= 100:
        raise pytest.UsageError(f"{OPT_ROLLOUT}: steps must be from 1 to 100, got {n}")
    return n


# --------------------------------------------------------------------------------- options


def addoptions(parser: pytest.Parser, sandbox_providers: list[str]) -> None:
    """Add the ``tooleffect`` option group and the ini keys.

    Args:
        parser: pytest's parser.
        sandbox_providers: the registered sandbox providers' names (``off`` is added).
    """
    group = parser.getgroup("tooleffect", "tool-selection scoring (pytest-tooleffect)")
    group.addoption(OPT_REPORT, metavar="PATH", type=_path_or_none, default=None,
                    help="write the per-class report as JSON to PATH")
    group.addoption(OPT_RECORDS, metavar="PATH", type=str, default=None,
                    help=f"write one JSON record per scored sample to PATH as it completes, a new file each run "
                         f"(default: ini {INI_RECORDS} = {DEFAULT_RECORDS}; empty string disables)")
    group.addoption(OPT_NO_SUMMARY, action="store_true", default=False,
                    help="do not print the per-class report at the end of the run")
    group.addoption(OPT_SUMMARY_MD, metavar="PATH", type=_path_or_none, default=None,
                    help="write a short Markdown summary (gates, per-class table, regressions, errors) to PATH, "
                         "for a CI job summary such as $GITHUB_STEP_SUMMARY")
    group.addoption(OPT_HTML, metavar="PATH", type=_path_or_none, default=None,
                    help="write the report and a browser of every decision as one self-contained HTML file to PATH")
    group.addoption(OPT_MODEL, metavar="PROVIDER/MODEL", default=None,
                    help="ask this litellm model for the decision at every labelled state (a policy of that name)")
    group.addoption(OPT_API_BASE, metavar="URL", default=None,
                    help="api base for --tooleffect-model (a local vLLM, Ollama or llama.cpp server)")
    group.addoption(OPT_AGENT, metavar="[NAME=]MODULE:FUNCTION", action="append", type=_agent_policy, default=[],
                    help="run your own agent as a policy: a callable that gets the state and returns its decision "
                         "(sync or async; named after the function unless NAME= is given); repeatable")
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
    group.addoption(OPT_REPEATS, metavar="K", type=_repeats, default=1,
                    help="run each case x policy K times (trials); the report adds pass^k and the share of cases "
                         "whose verdict flips between trials")
    group.addoption(OPT_CONCURRENCY, metavar="N", type=_concurrency, default=8,
                    help="model turns in flight at once in each process (default 8); with -n W up to W x N in all")
    group.addoption(OPT_RETRIES, metavar="N", type=_retries, default=2,
                    help="retries of a model request on 408, 429, 5xx, timeouts and lost connections, never on "
                         "other 4xx: at most N+1 requests per turn, after Retry-After or a backoff (default 2)")
    group.addoption(OPT_RPM, metavar="N", type=_rpm, default=None,
                    help=f"run-wide limit of model requests per minute, over all xdist workers (ini {INI_RPM})")
    group.addoption(OPT_TPM, metavar="N", type=_tpm, default=None,
                    help=f"run-wide limit of model tokens (input + output) per minute, over all xdist workers "
                         f"(ini {INI_TPM})")
    parser.addini(INI_RPM, "run-wide model requests per minute (empty: no limit)", default="")
    parser.addini(INI_TPM, "run-wide model tokens per minute (empty: no limit)", default="")
    parser.addini(INI_RATE_WINDOW, "seconds the rate limits count over (default 60: per minute)", default="60")
    parser.addini(INI_RATE_BACKEND, "the run-wide rate limit's state: empty for a SQLite file on this host, or "
                  "redis://HOST:PORT/DB[#NAME] for one limit over every shard and worker on any host", default="")
    parser.addini(INI_RATE_FILE, "limiter state file shared by all runs that name it, relative to the rootdir "
                  "(empty: one private file per run, shared by its xdist workers only)", default="")
    group.addoption(OPT_CACHE, choices=CACHE_MODES, default="off",
                    help="on-disk cache of model answers keyed by policy, state and trial (default off)")
    group.addoption(OPT_SANDBOX, choices=[*sandbox_providers, "off"], default=None,
                    help=f"where cases that declare a world run their tool calls: docker (default; containers "
                         f"from the locally built image), local (in-process, no isolation: for tests) or off "
                         f"(score decisions only); ini {INI_SANDBOX}")
    group.addoption(OPT_KEEP, choices=KEEP_MODES, default=None,
                    help=f"keep an item's sandbox container for inspection: never (default), failed, always; "
                         f"ini {INI_KEEP}")
    group.addoption(OPT_ROLLOUT, metavar="N", type=_rollout_steps, default=1,
                    help="let a live policy run up to N steps from each world case's state against its sandbox, "
                         "on its own outputs, until it calls no tool; the end state is judged (default 1: the "
                         "single decision)")
    group.addoption(OPT_BASELINE, metavar="PATH", type=_path_or_none, default=None,
                    help=f"classify outcomes against a baseline (tooleffect baseline save): a decision that failed "
                         f"in it is xfail, one that passed and fails now is a regression (ini {INI_BASELINE})")
    group.addoption(OPT_SHARD, metavar="I/N", type=_shard, default=None,
                    help="run shard I of N: the items whose record id hashes to it (stable as cases are added); "
                         "merge the shards' record logs with tooleffect report")
    group.addoption(OPT_BASELINE_CHANGED, choices=BASELINE_CHANGED_LABELS, default="skip",
                    help="decisions whose label changed since the baseline: skip (default: left out and counted) "
                         "or compare")
    parser.addini(INI_BASELINE, "baseline file, relative to the rootdir (empty: none)", default="")
    group.addoption(OPT_MIN_CLASS_N, metavar="N", type=_class_n, default=None,
                    help=f"flag a class with fewer than N scored rows as small in the report (default "
                         f"{DEFAULT_MIN_CLASS_N}; ini {INI_MIN_CLASS_N})")
    parser.addini(INI_MIN_CLASS_N, f"a class with fewer scored rows is flagged as small (default "
                  f"{DEFAULT_MIN_CLASS_N})", default=str(DEFAULT_MIN_CLASS_N))
    parser.addini(INI_SANDBOX, "sandbox provider for world cases: docker | local | off", default="docker")
    parser.addini(INI_KEEP, "keep sandboxes for inspection: never | failed | always", default="never")
    parser.addini(INI_POOL, "reuse warm sandbox containers within a process, reset between items", type="bool",
                  default=True)
    parser.addini(INI_IMAGE, "sandbox image tag (default: tooleffect-sandbox:<hash of the sandbox/ build context>)",
                  default="")
    parser.addini(INI_MODEL_CACHE, "folder of cached model answers, relative to the rootdir",
                  default=".tooleffect-cache/model")
    parser.addini(INI_RECORDS, "record log path, relative to the rootdir", default=DEFAULT_RECORDS)
    parser.addini(INI_JUDGE_CACHE, "folder of cached judge verdicts, relative to the rootdir (empty: no cache)",
                  default=".tooleffect-cache/judge")


# --------------------------------------------------------------------------------- resolve


def resolve(config: pytest.Config, sandbox_providers: list[str]) -> Settings:
    """Resolve every option and ini key into one :class:`Settings`.

    Args:
        config: pytest's config (on an xdist worker, ``workerinput`` carries the run id and owner).
        sandbox_providers: the registered sandbox providers' names.

    Returns:
        The run's settings.

    Raises:
        pytest.UsageError: an ini value, the prices file, ``[tool.tooleffect.policies]`` or an
            output path is invalid, or an api base URL holds a key (checked before any test runs).
    """
    records_opt = config.getoption(OPT_RECORDS)
    records = records_opt if records_opt is not None else config.getini(INI_RECORDS)
    for opt in (OPT_API_BASE, OPT_JUDGE_BASE):
        base = config.getoption(opt)
        if base and looks_like_key(base):
            raise pytest.UsageError(f"{opt}: the URL holds what looks like a key (not shown); give the key through "
                                    "the provider's variable (OPENAI_API_KEY, …) or a policy's api_key_env: NAME")
    settings = Settings(
        report=config.getoption(OPT_REPORT),
        records=(Path(config.rootpath) / records) if records else None,
        summary=not config.getoption(OPT_NO_SUMMARY),
        model=config.getoption(OPT_MODEL),
        api_base=config.getoption(OPT_API_BASE),
        policies=tuple(dict.fromkeys(config.getoption(OPT_POLICY))),
        agents=tuple(config.getoption(OPT_AGENT)),
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
        rate_file=_rooted(config, config.getini(INI_RATE_FILE)),
        sandbox=_sandbox_settings(config, sandbox_providers),
        baseline=_baseline_path(config),
        baseline_changed_labels=config.getoption(OPT_BASELINE_CHANGED),
        summary_md=config.getoption(OPT_SUMMARY_MD),
        html=config.getoption(OPT_HTML),
        min_class_n=_min_class_n(config),
        shard=config.getoption(OPT_SHARD),
        rate_backend=_rate_backend(config),
        **_rate_settings(config),
    )
    for base, needs, opt in ((settings.api_base, settings.model, OPT_MODEL),
                             (settings.judge_api_base, settings.judge_model, OPT_JUDGE)):
        if base and not needs:
            api_opt, hint = ((OPT_API_BASE, " (a named policy sets its own api_base in [tool.tooleffect.policies])")
                             if opt == OPT_MODEL else (OPT_JUDGE_BASE, ""))
            raise pytest.UsageError(f"{api_opt} {base}: an api base is for {opt}, which is not given{hint}")
    if not hasattr(config, "workerinput"):
        outputs = [(OPT_RECORDS, settings.records), (OPT_REPORT, settings.report),
                   (OPT_SUMMARY_MD, settings.summary_md), (OPT_HTML, settings.html), *_other_outputs(config)]
        for opt, out in outputs:
            if out is not None:
                check_writable(opt, out)
        check_distinct(outputs, inputs=[(OPT_BASELINE, settings.baseline), (OPT_PRICES, config.getoption(OPT_PRICES)),
                                        (OPT_JUDGE_CAL, settings.judge_calibration)])
    return settings


def _sandbox_settings(config: pytest.Config, providers: list[str]) -> SandboxSettings:
    provider = config.getoption(OPT_SANDBOX) or config.getini(INI_SANDBOX)
    if provider not in [*providers, "off"]:
        raise pytest.UsageError(f"ini {INI_SANDBOX}: unknown provider {provider!r}")
    keep = config.getoption(OPT_KEEP) or config.getini(INI_KEEP)
    if keep not in KEEP_MODES:
        raise pytest.UsageError(f"ini {INI_KEEP}: expected one of {', '.join(KEEP_MODES)}, got {keep!r}")
    rollout = config.getoption(OPT_ROLLOUT)
    if rollout > 1 and not (config.getoption(OPT_MODEL) or config.getoption(OPT_POLICY)
                            or config.getoption(OPT_AGENT)):
        raise pytest.UsageError(f"{OPT_ROLLOUT} {rollout}: a rollout needs a live policy ({OPT_MODEL}, {OPT_AGENT} "
                                f"or {OPT_POLICY}); a replay is one recorded decision")
    if rollout > 1 and provider == "off":
        raise pytest.UsageError(f"{OPT_ROLLOUT} {rollout}: a rollout runs the policy's calls in a sandbox and "
                                f"{OPT_SANDBOX} off runs none (choose one of: {', '.join(providers)})")
    workerinput = getattr(config, "workerinput", None)
    return SandboxSettings(
        provider=provider, keep=keep, pool=bool(config.getini(INI_POOL)), image=config.getini(INI_IMAGE) or None,
        rollout=rollout,
        run_id=workerinput["tooleffect_run_id"] if workerinput else uuid.uuid4().hex,
        owner_pid=int(workerinput["tooleffect_owner_pid"]) if workerinput else os.getpid(),
        worker=workerinput["workerid"] if workerinput else "main",
    )


def _min_class_n(config: pytest.Config) -> int:
    """``--tooleffect-min-class-n``, else the ini key, else the default."""
    value = config.getoption(OPT_MIN_CLASS_N)
    if value is not None:
        return int(value)
    raw = str(config.getini(INI_MIN_CLASS_N)).strip() or str(DEFAULT_MIN_CLASS_N)
    try:
        return _class_n(raw)
    except Exception as exc:
        raise pytest.UsageError(f"ini {INI_MIN_CLASS_N} = {raw!r}: {exc}") from None


def _rate_settings(config: pytest.Config) -> dict[str, Any]:
    """``rpm``, ``tpm`` and ``rate_window_s`` from the options, else the ini keys."""
    out: dict[str, Any] = {}
    for key, opt, ini, parse in (("rpm", OPT_RPM, INI_RPM, _rpm), ("tpm", OPT_TPM, INI_TPM, _tpm)):
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
        out["rate_window_s"] = _positive_float(raw)
    except Exception as exc:
        raise pytest.UsageError(f"ini {INI_RATE_WINDOW} = {raw!r}: {exc}") from None
    return out


def _load_prices(path: Path | None) -> dict[str, Price]:
    if path is None:
        return {}
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
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


def _other_outputs(config: pytest.Config) -> list[tuple[str, Path | None]]:
    """The run's other output files: pytest's JUnit XML and pytest-json-report's file, when asked for."""
    out: list[tuple[str, Path | None]] = []
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        out.append(("--junitxml", Path(config.invocation_params.dir) / os.path.expanduser(xml)))
    if getattr(config.option, "json_report", False) and getattr(config.option, "json_report_file", None):
        if config.option.json_report_file != "none":
            out.append(("--json-report-file", Path(config.invocation_params.dir) / config.option.json_report_file))
    return out


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
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.{name}] must be a table (model = ... or "
                                    "agent = ...)")
        try:
            out[name] = Policy.model_validate({**spec, "name": name})
        except ValidationError as exc:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.{name}]: {exc}") from exc
        if name == REPLAY.name:
            raise pytest.UsageError(f"{path}: [tool.tooleffect.policies.replay]: 'replay' is the built-in offline "
                                    "policy; choose another name")
    return out
