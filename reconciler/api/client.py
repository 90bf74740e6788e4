"""ApiClient: the platform's operations on invites, each attempt bounded in time
and size, retried only when that is safe, failing with errors that say what
happened; and ``read_current``, the server's copy of each desired invite read with
bounded concurrency. The rules live beside it: ``network`` (the session, where
requests may go, network failures), ``auth`` (the token), ``exchange`` (one request:
its turn, attempts, answers and retries), ``capacity`` (the pace and the number in
flight), ``concurrency`` (calls in item order).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import NamedTuple

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
        path = invite_path(self.settings.contract.update_invite_path, invite_id)
        contract = self.settings.contract
        body = {contract.wire_name(k): v for k, v in fields_json(patch).items()}
        headers = {"If-Match": if_match} if if_match is not None else None
        # The same PATCH body twice has the same effect, so it is safe to retry.
        answer = self.call(
            "PATCH",
            path,
            json_body=body,
            idempotent=True,
            headers=headers,
            watch=watch,
            confirm=self._read_path(invite_id),
        )
        return Written(answer.status, answer.request_id, self._stored(invite_id, answer, patch))

    def resend_invite(self, invite_id: str, *, watch: AttemptWatch | None = None) -> Receipt:
        path = invite_path(self.settings.contract.resend_invite_path, invite_id)
        # Not idempotent: retried only when the request surely never left, or was refused
        # before it was acted on (a 429, a 503, a gateway's block confirmed by a read).
        answer = self.call(
            "POST",
            path,
            json_body={},
            idempotent=False,
            watch=watch,
            pacer=self.resend_pacer,
            confirm=self._read_path(invite_id),
        )
        if not (isinstance(answer.body, dict) and answer.body.get("success") is True):
            # A 2xx that is not the envelope saying success: it cannot be checked, and
            # the platform may have sent the e-mail (UnexpectedResponse: outcome unknown).
            raise UnexpectedResponse(
                f"the answer to the re-send of {escape(invite_id)} is not the API's envelope "
                "saying success, so whether the invitation went out cannot be checked",
                status=answer.status,
                request_id=answer.request_id,
            )
        data = answer.data
        if isinstance(data, dict) and "id" in data and data["id"] != invite_id:
            # About another invite (a path that led elsewhere): an invitation may have gone,
            # not necessarily this one's. After a 2xx: outcome unknown, never sent again.
            raise WrongInvite(
                f"invite {escape(invite_id)}: the answer to its re-send is about "
                f"{_answered(data)}; which invitation went out is unknown",
                status=answer.status,
                request_id=answer.request_id,
            )
        return Receipt(answer.status, answer.request_id)

    # -- answers ----------------------------------------------------------------

    def _stored(
        self, invite_id: str, answer: Answer, patch: Mapping[str, FieldValue]
    ) -> CurrentInvite | None:
        """What a PATCH's answer says is stored: None when it holds no invite (no ``data``,
        no ``id``) or not every field sent, or a value the contract refuses (a GET tells);
        ``WrongInvite`` when it is about another invite."""
        data = answer.data
        if not isinstance(data, dict) or "id" not in data:
            return None
        if data.get("id") != invite_id:
            raise WrongInvite(
                f"invite {escape(invite_id)}: the answer to its update is about "
                f"{_answered(data)}; whether this invite was updated is unknown",
                status=answer.status,
                request_id=answer.request_id,
            )
        contract = self.settings.contract
        if any(contract.wire_name(name) not in data for name in patch):
            return None
        try:
            return self._current_invite(invite_id, answer)
        except BadInviteValue:
            return None

    def _current_invite(self, invite_id: str, answer: Answer) -> CurrentInvite:
        data = answer.data
        shown = escape(invite_id)
        if not isinstance(data, dict):
            raise WrongInvite(
                f"invite {shown}: response has no invite object",
                status=answer.status,
                request_id=answer.request_id,
            )
        if data.get("id") != invite_id:
            # Another invite's state taken for this one would be written back over it.
            answered = _answered(data) if "id" in data else "no id at all"
            raise WrongInvite(
                f"invite {shown}: the server answered about {answered} instead; "
                "this invite is left alone",
                status=answer.status,
                request_id=answer.request_id,
            )
        raw = {}
        for canonical, kind in field_kinds().items():
            wire = self.settings.contract.wire_name(canonical)
            if wire in data:
                raw[canonical] = data[wire]
                problem = kind.problem(data[wire])
                if problem is not None:
                    raise BadInviteValue(
                        f"invite {shown}: the server's `{escape(canonical)}` {problem}; "
                        "this invite is left alone",
                        status=answer.status,
                        request_id=answer.request_id,
                    )
        status = data.get("status")
        status = redact_and_escape(status) if isinstance(status, str) else None
        # A null is a value held by no one, the same as a field left out.
        return CurrentInvite(invite_id, status, fields_from_json(raw))


def _answered(data: Mapping[str, object]) -> str:
    """The id an answer is about, as shown (the server's text: redacted, escaped, cut)."""
    return redact_and_escape(str(data["id"]))[:140]


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
