"""A local stand-in of the platform API, for trying the tool and for tests."""

from __future__ import annotations

from reconciler.sandbox.server import (
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    Sandbox,
    SandboxOptions,
)

__all__ = ["SANDBOX_CLIENT_ID", "SANDBOX_CLIENT_SECRET", "Sandbox", "SandboxOptions"]
