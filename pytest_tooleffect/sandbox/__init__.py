"""Sandboxes: where a decision's tool calls run against a world state (see environment.py).

Providers: ``docker`` (containers from the locally built image, pooled per process) and
``local`` (the same service in-process, for fast tests).  They register here, by being
imported; ``environment`` imports none of them.  Importing this package imports neither the
docker library nor testcontainers; the Docker provider does, when it is used.
"""

from __future__ import annotations

# the providers are imported for their registration (``@register_provider``)
from pytest_tooleffect.sandbox import docker, local  # noqa: F401
from pytest_tooleffect.sandbox.environment import (
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxRefused,
    ToolResult,
    World,
    provider_class,
    register_provider,
    registered_providers,
)

__all__ = [
    "Sandbox",
    "SandboxError",
    "SandboxProvider",
    "SandboxRefused",
    "ToolResult",
    "World",
    "provider_class",
    "register_provider",
    "registered_providers",
]
