"""Typed data at the edges: a policy (an agent configuration under test, from a family file's
``policies:`` or a ``[tool.tooleffect.policies.NAME]`` table), a user price, and the names shown in
test ids.  Part of :mod:`pytest_tooleffect.formats`, which exports them; kept apart for its size.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

__all__ = ["Amount", "Count", "Policy", "PolicyName", "Price", "ShowableName", "policy_identity", "policy_params"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Price:
    """A user price for a model litellm's cost map does not know, in USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


def _no_bool(what: str) -> Any:
    """A before-validator refusing ``true``/``false`` where ``what`` is expected: pydantic's lax mode
    reads a boolean as 1 or 0, so ``quota: {first: true}`` would be a quota of 1.
    """
    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"{what}, not a boolean ({str(value).lower()})")
        return value
    return BeforeValidator(check)


#: a count or a whole-number setting of a file a user writes (a quota, a step, a cap): an integer,
#: never a boolean
Count = Annotated[int, _no_bool("a whole number")]
#: a number of a file a user writes (a share, a delay, a price): never a boolean
Amount = Annotated[float, _no_bool("a number")]


#: characters a name shown in pytest's test ids and on the terminal may not hold: C0 and C1
#: controls (ESC starts ANSI and OSC sequences), bidirectional overrides and isolates, line separators
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _showable(value: str) -> str:
    found = _UNSHOWABLE.search(value)
    if found is not None:
        raise ValueError(f"holds the character U+{ord(found.group()):04X} (a control character or a bidirectional "
                         "override): names are shown in test ids and on the terminal")
    return value


#: a family's or a policy's name: no control character or bidirectional override
ShowableName = Annotated[str, AfterValidator(_showable)]


def _no_variant_separator(value: str) -> str:
    if "+" in value:
        raise ValueError("holds '+', which joins a policy's name to a perturbation variant's (replay+shuffle): "
                         "a policy named so would share record ids with a variant's")
    return value


#: a policy's name: showable, and without ``+`` (a variant's policy is ``POLICY+VARIANT``)
PolicyName = Annotated[str, AfterValidator(_showable), AfterValidator(_no_variant_separator)]


class Policy(_Model):
    """An agent configuration under test: a litellm model (api base, overrides, sampling
    parameters), or the team's own agent (``agent: "package.module:function"``, or one a
    ``pytest_tooleffect_agent`` hook returns); ``replay`` has neither.

    A policy never holds a key: ``api_key_env`` names the environment variable that does.  A
    policy with an ``api_key`` field, or with a key-shaped value in any field but its prompts
    (:func:`~pytest_tooleffect.util.redaction.looks_like_key`), is refused, and the refusal does not
    repeat the value.  A setting named as a secret (``settings.db_password``) is left out of the
    report and its value is redacted from every output.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: PolicyName
    model: str | None = None
    agent: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None
    """The environment variable that holds this policy's API key (``VLLM_KEY``); ``None``: the
    provider's usual variable, which litellm reads (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
    ``GEMINI_API_KEY``, …), and with an ``api_base`` and no such variable set, a placeholder key
    (local servers want one and accept any)."""
    temperature: Amount | None = None
    max_tokens: Count | None = Field(default=None, ge=1)
    """The cap on output tokens sent with every live request (``None``: the model turn's default,
    ``pytest_tooleffect.decide.model_turn.DEFAULT_MAX_TOKENS``), so a runaway turn ends."""
    timeout_s: Amount | None = Field(default=None, gt=0)
    """This policy's timeout of one model call in seconds (``None``: ``--tooleffect-timeout``); a
    local model on a CPU needs more than a hosted one."""
    system_prompt: str | None = None
    tool_descriptions: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    """Free-form settings an agent reads from its state (``state.policy["settings"]``)."""

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_a_file(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        name = data.get("name")
        for field_name in ("api_key", "key", "api_token", "token", "secret", "password"):
            if field_name in data:
                raise ValueError(f"policy {name!r}: {field_name}: a key is never written into a file; put it in an "
                                 "environment variable and name that with api_key_env: NAME")
        from pytest_tooleffect.util.redaction import looks_like_key

        def strings(value: Any, where: str) -> list[tuple[str, str]]:
            if isinstance(value, str):
                return [(where, value)]
            if isinstance(value, dict):
                return [s for k, v in value.items() for s in strings(v, f"{where}.{k}")]
            if isinstance(value, list):
                return [s for i, v in enumerate(value) for s in strings(v, f"{where}[{i}]")]
            return []

        for key, value in data.items():
            if key in ("system_prompt", "tool_descriptions"):
                continue  # prose: a prompt may well speak of tokens and keys
            for where, text in strings(value, str(key)):
                if looks_like_key(text):
                    raise ValueError(f"policy {name!r}: {where} holds what looks like a key (not shown); a key is "
                                     "never written into a file: put it in an environment variable and name that "
                                     "with api_key_env: NAME")
        return data

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        from pytest_tooleffect.util.redaction import ENV_NAME

        if v is not None and not ENV_NAME.fullmatch(v):
            raise ValueError("api_key_env must be the name of an environment variable (letters, digits, _), "
                             "not a key: the value is not shown")
        return v

    @model_validator(mode="after")
    def _model_or_agent(self) -> Policy:
        if self.model and self.agent:
            raise ValueError(f"policy {self.name!r}: a model or an agent, not both")
        return self

    @model_validator(mode="after")
    def _secret_settings_known(self) -> Policy:
        """The values of its settings named as secrets (``db_password``, at any depth) are secrets the
        process knows from now on (:func:`~pytest_tooleffect.util.redaction.register_secret_settings`),
        wherever the policy was read (a family file, a pyproject table, on every xdist worker): an
        agent that repeats its settings shows them cut out of every output.
        """
        from pytest_tooleffect.util.redaction import register_secret_settings

        register_secret_settings(self.settings)
        return self


def _secret_key(name: str) -> bool:
    from pytest_tooleffect.util.redaction import secret_name

    return secret_name(name)


def _without_secrets(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_secrets(v) for k, v in value.items() if not _secret_key(str(k))}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


def policy_params(policy: Policy) -> dict[str, Any]:
    """A policy's parameters as the report shows them: its name and the fields not at their default,
    with no key that holds a secret at any depth.

    Args:
        policy: the policy.

    Returns:
        Its JSON object (``name``, ``model`` or ``agent``, ``api_base``, sampling parameters,
        overrides, ``settings``).
    """
    data = {"name": policy.name, **policy.model_dump(mode="json", exclude_defaults=True)}
    out = {k: v for k, v in data.items() if not _secret_key(k)}
    if "settings" in out:  # free-form: an agent's own secrets may sit at any depth
        out["settings"] = _without_secrets(out["settings"])
    return out


def policy_identity(policy: Policy, agent_source: str | None = None) -> tuple[str, str]:
    """What a policy IS, beyond its name: two runs under one name are one policy only when these agree.

    Args:
        policy: the policy.
        agent_source: where its agent came from when a ``pytest_tooleffect_agent`` hook (not the
            policy's ``agent``) gave it (``pytest_tooleffect_agent``), else ``None``.

    Returns:
        ``(spec, digest)``: ``spec`` in words (``agent pkg.mod:decide``; ``model openai/gpt-4o at
        http://host/v1``, the api base shown without its password; ``replay``), and ``digest``, the
        SHA-256 (16 hex digits) of the spec without the api base (shards may reach one model through
        gateways of their own) and the policy's parameters as :func:`policy_params` gives them (secrets
        left out) less its name and ``timeout_s`` (how long a call may take is no part of what decides).
    """
    import hashlib
    import json

    from pytest_tooleffect.util.urls import without_password

    if policy.agent or agent_source:
        spec = core = f"agent {policy.agent or agent_source}"
    elif policy.model:
        core = f"model {policy.model}"
        spec = core + (f" at {without_password(policy.api_base)}" if policy.api_base else "")
    else:
        spec = core = "replay"
    params = {k: v for k, v in policy_params(policy).items() if k not in ("name", "timeout_s", "api_base")}
    # the api base is shown, not digested: shards reach one model through their own gateway or port
    text = json.dumps({"spec": core, "params": params}, sort_keys=True, ensure_ascii=False, default=str)
    return spec, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
