"""The `error:` lines every command ends with on stderr when some invites failed.

stderr carries errors and an error is the last thing printed, so the reasons
shown inside a plan or a progress log on stdout are repeated here, bounded.
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.model.invite import SourceLocation
from reconciler.output.color import echo_err
from reconciler.plan.model import FailedInvite
from reconciler.safetext import redact_and_escape

SHOWN = 10  # a run over thousands of invites must not bury the last line


# Whenever an invitation may have gone out: never advice to send it again.
RESEND_UNKNOWN_ADVICE = (
    "re-send unknown: check with the platform or the invitee before sending again"
)


def resend_advice(invite_id: str) -> str:
    """For a re-send that certainly was not made: how to make it."""
    return f"send it with: reconcile resend {redact_and_escape(invite_id)}"


def what_to_do(
    status: int | None, source: SourceLocation | None, request_id: str | None = None
) -> str:
    """Advice for one failed invite, by the HTTP status it failed with; only about what
    exists (no requestId to quote when the answer had none)."""
    entry = f"the entry at {source}" if source is not None else "it from the command"
    if status == 404:
        if source is None:
            return "check the id"
        # A Terraform user expects a missing invite to be created: say that it is not.
        return (
            f"check the id; reconcile only manages invites that already exist on the platform "
            f"(it never creates, deletes or revokes one): create the invite on the platform, "
            f"or remove {entry}, which only stops managing it"
        )
    if status in (400, 422):
        return f"fix {entry} (`reconcile validate`), then try again"
    if status == 409:
        return "the invite changed meanwhile; make a new plan"
    if status in (401, 403):
        return "check the credentials and their scopes"
    if status == 413:
        return "a proxy or gateway in front of the API limits request bodies; ask its operators"
    if request_id:
        return "try again later; if it persists, contact support with the requestId"
    # No requestId: the answer came from something in front of the API, or from nothing.
    return "try again later; if it persists, check the network path to the API (proxy, gateway)"


def error_lines(failures: Iterable[FailedInvite]) -> list[str]:
    failed = list(failures)
    lines = [
        f"error: {redact_and_escape(f.id)}: {redact_and_escape(f.message)}; "
        f"{f.advice or what_to_do(f.status, f.source, f.request_id)}"
        for f in failed[:SHOWN]
    ]
    if len(failed) > SHOWN:
        lines.append(f"error: and {len(failed) - SHOWN} more failed invites (listed above)")
    return lines


def echo_errors(failures: Iterable[FailedInvite]) -> None:
    """Print the `error:` lines on stderr: call it last, after any summary or progress line."""
    for line in error_lines(failures):
        echo_err(line)
