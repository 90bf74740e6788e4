"""invite-reconciler: keep KYB business invites in git, plan and apply changes."""

from __future__ import annotations

__version__ = "0.1.0"
