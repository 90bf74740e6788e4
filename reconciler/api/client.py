"""ApiClient: the platform's operations on invites, each attempt bounded in time
and size, retried only when that is safe, failing with errors that say what
happened; and ``read_current``, the server's copy of each desired invite read with
bounded concurrency. The rules live beside it: ``network`` (the session, where
requests may go, network failures), ``auth`` (the token), ``exchange`` (what
ApiClient is built on: one request's turn, attempts, answers and retries),
``capacity`` (the pace and the number in flight), ``concurrency`` (calls in item
order).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import suppress
from typing import NamedTuple, NoReturn

from reconciler.api.capacity import Limiter
from reconciler.api.concurrency import Stop, ordered_map
from reconciler.api.exceptions import ApiError, BadInviteValue, UnexpectedResponse, WrongInvite
from reconciler.api.exchange import Answer, AttemptWatch, Exchange
from reconciler.api.network import invite_path
from reconciler.model.invite import (
    CurrentInvite,
    DesiredInvite,
    Failed,
    FieldValue,
    NotRun,
    Outcome,
    field_kinds,
    fields_from_json,
    fields_json,
)
from reconciler.safetext import escape, redact_and_escape


class Receipt(NamedTuple):
    """The server's acknowledgement of a write."""

    status: int
    request_id: str | None


class Read(NamedTuple):
    """An invite as just read, and the ETag its answer carried (None: none)."""

    invite: CurrentInvite
    etag: str | None


class Written(NamedTuple):
    """A PATCH's answer: its status and requestId, and the invite as the answer says it
    is stored (None: the answer holds no invite, or not every field sent; a GET tells).
    An answer may echo the request: no e-mail is sent on its word (apply's applier)."""

    status: int
    request_id: str | None
    stored: CurrentInvite | None


class ApiClient(Exchange):
    """The platform's operations on invites, over ``Exchange``'s requests."""

    def __repr__(self) -> str:
        return f"ApiClient(base_url={self.base_url!r}, client_id={self.settings.client_id!r})"

    # -- operations ---------------------------------------------------------

    def get_invite(self, invite_id: str) -> CurrentInvite:
        return self.read_invite(invite_id).invite

    def read_invite(self, invite_id: str) -> Read:
        """The invite and the ETag of the answer, for a PATCH's If-Match."""
        answer = self.call("GET", self._read_path(invite_id), idempotent=True)
        return Read(self._current_invite(invite_id, answer), answer.etag)

    def _read_path(self, invite_id: str) -> str:
        return invite_path(self.settings.contract.get_invite_path, invite_id)

    def write_invite(
        self,
        invite_id: str,
        patch: Mapping[str, FieldValue],
        *,
        if_match: str | None = None,
        watch: AttemptWatch | None = None,
    ) -> Written:
        """PATCH ``patch``; with ``if_match``, only while the invite is as it was read (a
        ``PreconditionFailed`` otherwise: nothing written). An answer about another invite
        raises ``WrongInvite`` (the write's outcome unknown)."""
        wire = self.settings.contract.wire_name
        body = {wire(k): v for k, v in fields_json(patch).items()}
        # The same PATCH body twice has the same effect, so it is safe to retry.
        answer = self.call(
            "PATCH",
            invite_path(self.settings.contract.update_invite_path, invite_id),
            json_body=body,
            idempotent=True,
            headers={"If-Match": if_match} if if_match is not None else None,
            watch=watch,
            confirm=self._read_path(invite_id),
        )
        _about_this(invite_id, answer, "PATCH")
        data = answer.data
        stored = None
        # What the answer says is stored, when it holds the invite with every field sent
        # and values the contract allows (else None: a GET tells).
        if isinstance(data, dict) and "id" in data and all(wire(k) in data for k in patch):
            with suppress(BadInviteValue):
                stored = self._current_invite(invite_id, answer)
        return Written(answer.status, answer.request_id, stored)

    def resend_invite(self, invite_id: str, *, watch: AttemptWatch | None = None) -> Receipt:
        # Not idempotent: retried only when the request surely never left, or was refused
        # before it was acted on (a 429, a 503, a gateway's block confirmed by a read).
        answer = self.call(
            "POST",
            invite_path(self.settings.contract.resend_invite_path, invite_id),
            json_body={},
            idempotent=False,
            watch=watch,
            pacer=self.resend_pacer,
            confirm=self._read_path(invite_id),
        )
        if not (isinstance(answer.body, dict) and answer.body.get("success") is True):
            # A 2xx that is not the envelope saying success: it cannot be checked, and
            # the platform may have sent the e-mail (UnexpectedResponse: outcome unknown).
            _refuse(
                UnexpectedResponse,
                answer,
                f"the answer to the re-send of {escape(invite_id)} is not the API's envelope "
                "saying success, so whether the invitation went out cannot be checked",
            )
        # About another invite (a path that led elsewhere): an invitation may have gone,
        # not necessarily this one's. After a 2xx: outcome unknown, never sent again.
        _about_this(invite_id, answer, "POST")
        return Receipt(answer.status, answer.request_id)

    def _current_invite(self, invite_id: str, answer: Answer) -> CurrentInvite:
        data = answer.data
        shown = escape(invite_id)
        if not isinstance(data, dict):
            _refuse(WrongInvite, answer, f"invite {shown}: response has no invite object")
        # Another invite's state taken for this one would be written back over it.
        _about_this(invite_id, answer, "GET")
        raw = {}
        for canonical, kind in field_kinds().items():
            wire = self.settings.contract.wire_name(canonical)
            if wire in data:
                raw[canonical] = data[wire]
                problem = kind.problem(data[wire])
                if problem is not None:
                    _refuse(
                        BadInviteValue,
                        answer,
                        f"invite {shown}: the server's `{escape(canonical)}` {problem}; "
                        "this invite is left alone",
                    )
        status = data.get("status")
        status = redact_and_escape(status) if isinstance(status, str) else None
        # A null is a value held by no one, the same as a field left out.
        return CurrentInvite(invite_id, status, fields_from_json(raw))


# What an answer about another invite than the one asked for means, by method: the
# read's invite is left alone, the write's outcome is unknown.
_ABOUT_ANOTHER = {
    "GET": ("the server answered about {} instead", "this invite is left alone"),
    "PATCH": ("the answer to its update is about {}", "whether this invite was updated is unknown"),
    "POST": ("the answer to its re-send is about {}", "which invitation went out is unknown"),
}


def _about_this(invite_id: str, answer: Answer, method: str) -> None:
    """``WrongInvite`` when the answer is about another invite (a read's: or about none)."""
    data = answer.data
    if not isinstance(data, dict) or data.get("id") == invite_id:
        return
    if "id" not in data and method != "GET":
        return  # no invite in the answer: nothing said about another one
    # The server's text: redacted, escaped, cut.
    answered = redact_and_escape(str(data["id"]))[:140] if "id" in data else "no id at all"
    said, meaning = _ABOUT_ANOTHER[method]
    _refuse(WrongInvite, answer, f"invite {escape(invite_id)}: {said.format(answered)}; {meaning}")


def _refuse(kind: type[ApiError], answer: Answer, message: str) -> NoReturn:
    raise kind(message, status=answer.status, request_id=answer.request_id)


# Told of each invite read (True: the read failed), as the answers come, in file order:
# the command shows progress with it.
OnRead = Callable[[bool], None]


def read_current(
    client: ApiClient,
    invites: list[DesiredInvite],
    parallelism: int | Limiter,
    stop: Stop | None = None,
    on_read: OnRead | None = None,
) -> Generator[tuple[DesiredInvite, Outcome[CurrentInvite, ApiError]], None, None]:
    """The server's copy of each desired invite, in file order.

    ``parallelism``: a fixed number in flight, or a limiter (``capacity_for(settings)``).
    """
    for invite, outcome in ordered_map(
        lambda i: client.get_invite(i.id), invites, parallelism, stop
    ):
        if on_read is not None and not isinstance(outcome, NotRun):
            on_read(isinstance(outcome, Failed))  # an invite never read is not counted
        yield invite, outcome
