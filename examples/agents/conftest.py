"""The hook-shaped way to hand pytest-tooleffect an agent: ``pytest_tooleffect_agent``.

An agent that is an object built from configuration (here a LangChain chain around a
``ChatOpenAI`` client) needs no import path: this hook builds it from a named policy's
``settings`` and returns its ``adecide`` method.  Declare the policy in ``pyproject.toml`` (or a
family file's ``policies:``) with no ``model`` and no ``agent``::

    [tool.tooleffect.policies.langchain]
    settings = {model = "gpt-4o-mini", temperature = 0}

then put this hook in the ``conftest.py`` at your project's root (or load this file as a plugin,
``python -m pytest -p examples.agents.conftest``) and run
``pytest cases/ --tooleffect-policy langchain``.  The plugin asks the hook once per process for
each policy that is not ``replay`` and has no ``model``; answering ``None`` leaves the policy to
its ``agent = "package.module:function"`` or to another hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_tooleffect.formats import Policy

#: The policy name this hook answers (a policy may also say ``settings = {framework = "langchain"}``).
POLICY_NAME = "langchain"


def pytest_tooleffect_agent(policy: Policy, config: pytest.Config) -> Callable[..., Any] | None:
    """Build the LangChain agent for the ``langchain`` policy (or one whose settings name the framework).

    Args:
        policy: the policy being resolved (its ``settings`` configure the agent).
        config: pytest's config.

    Returns:
        The agent's async ``adecide`` (awaited ``--tooleffect-concurrency`` at a time), or ``None``
        for any other policy.
    """
    if policy.name != POLICY_NAME and policy.settings.get("framework") != "langchain":
        return None
    from examples.agents.langchain_agent import LangChainAgent  # imported only when the policy is run

    return LangChainAgent.from_settings(policy.settings).adecide
