"""Sandboxes: where a decision's tool calls run against a world state (see environment.py).

Providers: ``docker`` (containers from the locally built image, pooled per process) and
``local`` (the same service in-process, for fast tests).  Importing this package imports
neither docker nor testcontainers; the Docker provider does, when it is used.
"""

from __future__ import annotations

from .environment import (
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
