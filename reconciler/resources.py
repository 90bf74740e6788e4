"""Files the package reads at run time: the schemas."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# An installed wheel carries copies under _bundled/; a source checkout has the
# originals at the top of the repository.
_ROOTS = (_PACKAGE / "_bundled", _PACKAGE.parent)


def resource_path(relative: str) -> Path:
    for root in _ROOTS:
        candidate = root / relative
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"package resource {relative!r} is missing; reinstall invite-reconciler"
    )


def invite_schema_path() -> Path:
    return resource_path("schemas/invites.schema.json")
