"""A local stand-in of the platform API, for trying the tool and for tests.

The server is imported when first asked for: a run against the real API needs only
the sandbox's credentials (``--sandbox``'s signing secret), not its HTTP server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

SANDBOX_CLIENT_ID = "sandbox-client"
SANDBOX_CLIENT_SECRET = "sandbox-secret"  # fixed and documented: not a secret

if TYPE_CHECKING:
    from reconciler.sandbox.app import Sandbox, SandboxOptions

__all__ = ["SANDBOX_CLIENT_ID", "SANDBOX_CLIENT_SECRET", "Sandbox", "SandboxOptions"]


def __getattr__(name: str) -> Any:
    if name in ("Sandbox", "SandboxOptions"):
        from reconciler.sandbox import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
