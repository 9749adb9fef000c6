"""Every ``--tooleffect-*`` option and ``tooleffect_*`` ini key and their parse-time validators
(argparse ``type=`` callables).

The first stage of the path of one case (``docs/design.md``, "Architecture"): it imports only
the data models, no other stage.  Tests import the option names from here; what the options
resolve into at configure time, one frozen ``Settings``, is :mod:`pytest_tooleffect.settings`'s.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pytest_tooleffect.formats import Policy
from pytest_tooleffect.formats.perturb import PerturbationSpec
from pytest_tooleffect.formats.policy import PolicyName, ShowableName
from pytest_tooleffect.util.arguments import output_file, seconds, whole_number

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
    "OPT_PERTURB",
    "OPT_REPEATS",
    "OPT_REPORT",
    "OPT_RETRIES",
    "OPT_ROLLOUT",
    "OPT_RPM",
    "OPT_SANDBOX",
    "OPT_SETTLE_KEY",
    "OPT_SETTLE_RESET",
    "OPT_SHARD",
    "OPT_SUMMARY_MD",
    "OPT_TIMEOUT",
    "OPT_TPM",
    "REPEATS_ADAPTIVE",
    "REPLAY",
    "addoptions",
    "parse_min_class_n",
    "parse_positive_float",
    "parse_rpm",
    "parse_tpm",
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
OPT_PERTURB = "--tooleffect-perturb"
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
OPT_SETTLE_KEY = "--tooleffect-settle-key"
OPT_SETTLE_RESET = "--tooleffect-settle-reset"

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


# ------------------------------------------------------------------------------ validators


def _path_or_none(value: str) -> Path | None:
    return Path(value) if value else None


def _records_path(value: str) -> str:
    """``--tooleffect-records``: the path as given (empty: no record log), not one naming a folder."""
    return output_file(value) if value else value


def _output_path(value: str) -> Path | None:
    """A file the run writes (``None``: empty, not written); a path ending in a separator names a
    folder and is refused (:func:`~pytest_tooleffect.util.arguments.output_file`).
    """
    return Path(output_file(value)) if value else None




#: an argparse ``type=`` for seconds (a finite number above 0, at most a day): the commands' one parser
parse_positive_float = seconds


#: an argparse ``type=`` for whole numbers from a minimum to a maximum (inclusive): one parser for every command
_int_at_least = whole_number


_positive_int = _int_at_least(1)
#: upper bounds of the counts: far past any real run, below what would exhaust memory or time at start
MAX_REPEATS = 1_000
MAX_CONCURRENCY = 1_024
MAX_RPM = 10_000_000
MAX_TPM = 10**12
MAX_MIN_CLASS_N = 1_000_000
MAX_SHARDS = 100_000
MAX_RETRIES = 100
#: ``--tooleffect-repeats``'s value for adaptive repeats (``ci/adaptive_run.py``)
REPEATS_ADAPTIVE = "adaptive"
_fixed_repeats = _int_at_least(1, MAX_REPEATS)


def _repeats(value: str) -> int | str:
    """``--tooleffect-repeats``: a whole number of trials (1 to :data:`MAX_REPEATS`), or :data:`REPEATS_ADAPTIVE`."""
    if value.strip().lower() == REPEATS_ADAPTIVE:
        return REPEATS_ADAPTIVE
    try:
        return _fixed_repeats(value)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or '{REPEATS_ADAPTIVE}')") from None


_concurrency = _int_at_least(1, MAX_CONCURRENCY)
#: ``--tooleffect-rpm`` and ini ``tooleffect_rpm``: requests per rate window, 1 to :data:`MAX_RPM`
parse_rpm = _int_at_least(1, MAX_RPM)
#: ``--tooleffect-tpm`` and ini ``tooleffect_tpm``: tokens per rate window, 1 to :data:`MAX_TPM`
parse_tpm = _int_at_least(1, MAX_TPM)
#: ``--tooleffect-min-class-n`` and ini ``tooleffect_min_class_n``: 1 to :data:`MAX_MIN_CLASS_N`
parse_min_class_n = _int_at_least(1, MAX_MIN_CLASS_N)
_retries = _int_at_least(0, MAX_RETRIES)


def _perturbation(text: str) -> PerturbationSpec:
    """``--tooleffect-perturb``'s value as a perturbation (its short form, ``KIND[:ARG]``).

    Raises:
        argparse.ArgumentTypeError: an unknown kind or an argument it does not take.
    """
    from pydantic import ValidationError

    try:
        return PerturbationSpec.model_validate(text)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError("; ".join(str(e["msg"]) for e in exc.errors())) from None


def _showable_name(name: str, value: str, what: str, policy: bool = False) -> str:
    """``name`` when it may be shown in test ids and on the terminal (as a family's or a policy's
    name: :data:`~pytest_tooleffect.formats.policy.ShowableName`; with ``policy``, a
    :data:`~pytest_tooleffect.formats.policy.PolicyName`, which holds no ``+`` either).

    Raises:
        argparse.ArgumentTypeError: it holds a control character or a bidirectional override (the
            message names the character by its code point; the value is shown escaped); a policy's
            name holds ``+``.
    """
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(PolicyName if policy else ShowableName).validate_python(name)
    except ValidationError as exc:
        why = exc.errors()[0].get("ctx", {}).get("error", exc.errors()[0]["msg"])
        named = what if name == value else f"{what} {name!r}"
        raise argparse.ArgumentTypeError(f"{value!r}: {named} {why}") from None
    return name


def _agent_policy(value: str) -> Policy:
    """``[NAME=]package.module:function`` → an agent policy (named after the function by default).

    Raises:
        argparse.ArgumentTypeError: not of that shape; the name ``replay``; a name holding a
            control character or a bidirectional override (names are shown in test ids).
    """
    name, eq, spec = value.partition("=")
    if not eq:
        name, spec = "", value
    module, colon, attr = spec.partition(":")
    if not colon or not module or not attr or not all(p.isidentifier() for p in (*module.split("."),
                                                                                  *attr.split("."))):
        raise argparse.ArgumentTypeError(f"{value!r} is not [NAME=]package.module:function")
    name = _showable_name(name or attr.rsplit(".", 1)[-1], value, "the policy name", policy=True)
    if name == REPLAY.name:
        raise argparse.ArgumentTypeError(f"{value!r}: 'replay' is the built-in offline policy; choose another name")
    return Policy(name=name, agent=spec)


def _model_name(value: str) -> str:
    """``--tooleffect-model``: a litellm model name, also the policy's name (shown in test ids).

    Raises:
        argparse.ArgumentTypeError: it holds a control character or a bidirectional override, or ``+``
            (a variant's policy is ``POLICY+VARIANT``).
    """
    return _showable_name(value, value, "the model name (the policy's name, shown in test ids)", policy=True)


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


def _settle_key(value: str) -> str:
    """``--tooleffect-settle-key``: 1-200 characters of letters, digits and ``._:-``."""
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,200}", value):
        raise argparse.ArgumentTypeError(f"{value!r}: 1 to 200 letters, digits, '.', '_', ':' or '-'")
    return value


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
    group.addoption(OPT_REPORT, metavar="PATH", type=_output_path, default=None,
                    help="write the per-class report as JSON to PATH")
    group.addoption(OPT_RECORDS, metavar="PATH", type=_records_path, default=None,
                    help=f"write one JSON record per scored sample to PATH as it completes, a new file each run "
                         f"(default: ini {INI_RECORDS} = {DEFAULT_RECORDS}; empty string disables)")
    group.addoption(OPT_NO_SUMMARY, action="store_true", default=False,
                    help="do not print the per-class report at the end of the run")
    group.addoption(OPT_SUMMARY_MD, metavar="PATH", type=_output_path, default=None,
                    help="write a short Markdown summary (gates, per-class table, regressions, errors) to PATH, "
                         "for a CI job summary such as $GITHUB_STEP_SUMMARY")
    group.addoption(OPT_HTML, metavar="PATH", type=_output_path, default=None,
                    help="write the report and a browser of every decision as one self-contained HTML file to PATH")
    group.addoption(OPT_MODEL, metavar="PROVIDER/MODEL", type=_model_name, default=None,
                    help="ask this litellm model for the decision at every labelled state (a policy of that name)")
    group.addoption(OPT_API_BASE, metavar="URL", default=None,
                    help="api base for --tooleffect-model (a local vLLM, Ollama or llama.cpp server)")
    group.addoption(OPT_AGENT, metavar="[NAME=]MODULE:FUNCTION", action="append", type=_agent_policy, default=[],
                    help="run your own agent as a policy: a callable that gets the state and returns its decision "
                         "(sync or async; named after the function unless NAME= is given); repeatable")
    group.addoption(OPT_POLICY, metavar="NAME", action="append", default=[],
                    help="run a named policy (from the family file or [tool.tooleffect.policies] in "
                         "pyproject.toml; 'replay' replays recorded decisions); repeatable")
    group.addoption(OPT_TIMEOUT, metavar="SECONDS", type=parse_positive_float, default=60.0,
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
    group.addoption(OPT_REPEATS, metavar="K|adaptive", type=_repeats, default=1,
                    help="run each case x policy K times (trials); the report adds pass^k and the share of cases "
                         "whose verdict flips between trials. 'adaptive': another trial only while the case is "
                         "neither stable nor flaky (design in [tool.tooleffect.repeats]: alpha, tolerance, "
                         "max_trials; docs/repeats.md)")
    group.addoption(OPT_PERTURB, metavar="KIND[:ARG]", type=_perturbation, action="append", default=[],
                    help="add a perturbed-catalog variant of every case, paired with it in the report's robustness "
                         "section: shuffle, rename, distractors[:N], remove-valid, describe[:RULE], scale[:1/8/32]; "
                         "repeatable, beside the family's own perturbations (docs/robustness.md)")
    group.addoption(OPT_CONCURRENCY, metavar="N", type=_concurrency, default=8,
                    help="model turns in flight at once in each process (default 8); with -n W up to W x N in all")
    group.addoption(OPT_RETRIES, metavar="N", type=_retries, default=2,
                    help="retries of a model request on 408, 429, 5xx, timeouts and lost connections, never on "
                         "other 4xx: at most N+1 requests per turn, after Retry-After or a backoff (default 2)")
    group.addoption(OPT_RPM, metavar="N", type=parse_rpm, default=None,
                    help=f"run-wide limit of model requests per minute, over all xdist workers (ini {INI_RPM})")
    group.addoption(OPT_TPM, metavar="N", type=parse_tpm, default=None,
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
                    help="on-disk cache of model answers keyed by policy, state and trial: read (answers from the "
                         "cache alone, no model asked: a decision it holds none for is the item's CacheMiss error), "
                         "write (always ask the model, store its answer), readwrite (ask and store on a miss); "
                         "default off")
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
                    help=f"classify outcomes against a baseline (the first made by tooleffect baseline init, a later "
                         f"accepted run's by tooleffect baseline save): a decision that failed in it is xfail, one "
                         f"that passed and fails now is a regression (ini {INI_BASELINE})")
    group.addoption(OPT_SHARD, metavar="I/N", type=_shard, default=None,
                    help="run shard I of N: the items whose record id hashes to it (stable as cases are added); "
                         "merge the shards' record logs with tooleffect report")
    group.addoption(OPT_SETTLE_KEY, metavar="KEY", type=_settle_key, default=None,
                    help="the name every shard of one run gives, so that its sequential gates share one tally in "
                         f"the Redis of ini {INI_RATE_BACKEND} (one per CI run: e.g. the CI's run id and attempt); "
                         "needed by a sharded run with sequential gates and that backend")
    group.addoption(OPT_SETTLE_RESET, action="store_true", default=False,
                    help=f"a {OPT_SETTLE_KEY} that holds an earlier run's tally is refused before any item; with this "
                         "the earlier tally is deleted and this run claims the key (the shards of this run that "
                         "start later join it)")
    group.addoption(OPT_BASELINE_CHANGED, choices=BASELINE_CHANGED_LABELS, default="skip",
                    help="decisions whose label changed since the baseline: skip (default: left out and counted) "
                         "or compare")
    parser.addini(INI_BASELINE, "baseline file, relative to the rootdir (empty: none)", default="")
    group.addoption(OPT_MIN_CLASS_N, metavar="N", type=parse_min_class_n, default=None,
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


