"""The plan: what apply would change, made of per-invite changes and failed invites.

Computing a plan is separate from showing it (reconciler.output), from saving
it (reconciler.plan.saved: the plan file, written and read) and from carrying it
out (reconciler.apply.applier).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Self

from reconciler.errors import ReconcilerError
from reconciler.model.invite import (
    NO_DELTA,
    Contact,
    FieldDelta,
    Fields,
    FieldValue,
    HeldFields,
    SourceLocation,
    differences,
    kind_of,
    utc_now,
)
from reconciler.safetext import plural, redact

# -- the records ---------------------------------------------------------------------------
# The records a plan is made of: one per invite that changes, cannot change, or failed.
#
# Values are typed (``reconciler.model.invite``); a record's JSON form is the saved
# plan's business (``reconciler.plan.saved``).


class FieldChange(NamedTuple):
    field: str
    before: FieldValue | None
    after: FieldValue
    delta: FieldDelta  # what differs inside the field: a set's items, a contact's sub-fields


def field_changes(before: HeldFields, after: Fields) -> list[FieldChange]:
    """Each field of ``after`` beside its value in ``before``, with what differs inside it
    (DeepDiff's: ``differences``)."""
    inside = differences(before, after)
    return [
        FieldChange(name, before.get(name), value, inside.get(name, NO_DELTA))
        for name, value in after.items()
    ]


def redacted_fields(fields: HeldFields) -> HeldFields:
    """What the server said, as every output shows it: any secret of this run redacted."""
    return {
        name: None if value is None else kind_of(name).redacted(value)
        for name, value in fields.items()
    }


@dataclass(frozen=True)
class InviteChange:
    id: str
    source: SourceLocation
    name: str | None
    before: HeldFields  # the server's values of exactly the patched fields
    patch: Fields
    resend: bool  # after the update, the invitation is e-mailed again
    # Where that e-mail goes: the invite's address once updated (None: not known).
    recipient: str | None = None
    # A plan of a change (--changed-since REF): each patched field the platform changed
    # since REF, with its value at REF. apply leaves the invite alone unless
    # --force-conflicts.
    conflicts: Fields = field(default_factory=dict)
    # Of an object field the PATCH replaces whole: the sub-fields it carries from the
    # platform because the files do not manage them (a contact's phone). Shown in every
    # plan format, checked before the write like the rest.
    kept: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The fields whose update, stored as sent, re-sends the invitation (resendOnChange's
    # list form); None: any of them (`true`).
    resend_on: tuple[str, ...] | None = None

    def triggers_resend(self, stored_as_sent: Iterable[str]) -> bool:
        """Whether an update whose fields ``stored_as_sent`` were stored as sent re-sends:
        a field stored otherwise (or not written) never triggers it."""
        if not self.resend:
            return False
        return any(self.resend_on is None or name in self.resend_on for name in stored_as_sent)

    def kept_values(self, name: str) -> list[tuple[str, str | None]]:
        """(sub-field, value) of each sub-field the PATCH of ``name`` carries from the platform."""
        value = self.patch.get(name)
        if not isinstance(value, Contact):
            return []
        return [(sub, value.get(sub)) for sub in self.kept.get(name, ())]

    @property
    def kept_riding_along(self) -> dict[str, tuple[str, ...]]:
        """The sub-fields of each field kept from the platform while the contact's name or
        e-mail changes: the new contact keeps the previous one's value of them."""
        riding = {}
        for name, subs in self.kept.items():
            before, after = self.before.get(name), self.patch.get(name)
            if not subs or not isinstance(after, Contact):
                continue
            held = before if isinstance(before, Contact) else Contact()
            if any(held.get(key) != after.get(key) for key in ("name", "email")):
                riding[name] = subs
        return riding

    @property
    def after(self) -> Fields:
        return self.patch

    @property
    def address_changes_silently(self) -> bool:
        """The invite's e-mail address changes and no invitation goes to the new one."""
        return not self.resend and "email" in self.patch

    @property
    def field_changes(self) -> list[FieldChange]:
        return field_changes(self.before, self.patch)

    def redacted(self) -> InviteChange:
        """This change as every output shows it: what the server said redacted, nothing else.

        ``before`` is the server's. In ``patch``, an object field keeps the server's
        sub-fields the files leave unmanaged (the API replaces an object whole): those,
        and any sub-field the files set to what the server holds, are the server's too.
        What the files say is kept as written: it is what apply sends. The recipient
        may be the server's address (when the update leaves the e-mail alone).
        """
        patch = {
            name: kind_of(name).server_parts_redacted(value, self.before.get(name))
            for name, value in self.patch.items()
        }
        recipient = None if self.recipient is None else redact(self.recipient)
        kept = {name: tuple(map(redact, subs)) for name, subs in self.kept.items()}
        return replace(
            self, before=redacted_fields(self.before), patch=patch, recipient=recipient, kept=kept
        )


@dataclass(frozen=True)
class SetApart:
    """An invite that differs from the files and that apply leaves alone."""

    id: str
    source: SourceLocation
    name: str | None
    before: HeldFields  # the part of the server's values of the differing fields the files manage
    after: Fields  # what the files say

    @property
    def field_changes(self) -> list[FieldChange]:
        return field_changes(self.before, self.after)

    def redacted(self) -> Self:
        """As every output shows it: the server's values redacted, the files' as written."""
        return replace(self, before=redacted_fields(self.before))


@dataclass(frozen=True)
class OutsideChange(SetApart):
    """Fields that differ on the platform but that the change planned did not touch: a full
    plan (no --changed-since) shows and fixes them."""


@dataclass(frozen=True)
class NotUpdatable(SetApart):
    """An invite that differs from git but is no longer pending: never patched."""

    status: str

    def redacted(self) -> Self:
        """Its status redacted too: the server's."""
        return replace(super().redacted(), status=redact(self.status))


@dataclass(frozen=True)
class FailedInvite:
    """An invite the run could not read, update or re-send: the plan's ``errors``."""

    id: str
    source: SourceLocation | None  # the entry; None when the entry is not what to fix
    message: str  # HTTP status, the server's message and requestId, as ApiError says them
    status: int | None = None
    request_id: str | None = None
    # What to do about it, when the HTTP status alone would advise wrongly (a re-send
    # that may have gone out must never be advised to be tried again). Never saved.
    advice: str | None = field(default=None, compare=False)

    def redacted(self) -> FailedInvite:
        """As every output shows it: the server's message and requestId redacted."""
        request_id = None if self.request_id is None else redact(self.request_id)
        return replace(self, message=redact(self.message), request_id=request_id)


# -- the plan ------------------------------------------------------------------------------


FORMAT_VERSION = 2  # 2: signed, with `not_updatable`


# What each limit's refusal says: what the plan does, and the advice.
_LIMITS = {
    "max-changes": ("updates {}", "invite", "Split the change or raise the limit"),
    "max-resends": ("e-mails {} again", "invitation", "Split the change or raise the limit"),
}
# Said too when an invite that re-sends has `resendOnChange: true`: a list makes an
# update of an unlisted field send none. Never when each one already has a list.
_LIST_FORM = "Split the change, use resendOnChange's list form, or raise the limit"


class TooMuchChange(ReconcilerError):
    """The plan updates more invites than max_changes allows (octoDNS's TooMuchChange), or
    e-mails more invitations than max_resends (``TooManyResends``): the irreversible part."""

    OPTION = "max-changes"

    def __init__(
        self, count: int, limit: int, *, saved_limit: bool = False, any_true: bool = False
    ) -> None:
        does, noun, advice = _LIMITS[self.OPTION]
        if any_true and self.OPTION == "max-resends":
            advice = _LIST_FORM
        if saved_limit:  # a saved plan's own limit wins over a looser one: say where it came from
            advice = f"This plan was made with --{self.OPTION} {limit}; make a new plan with a "
            advice += "higher limit"
        what = self.OPTION.replace("-", "_")
        self.reason = (
            f"the plan {does.format(plural(count, noun))}, more than {what} ({limit}). {advice}."
        )
        super().__init__(f"refusing to apply, nothing was changed: {self.reason}")


class TooManyResends(TooMuchChange):
    OPTION = "max-resends"


class Summary(NamedTuple):
    update: int  # changes apply writes: conflicts are counted apart, never as updates
    unchanged: int
    failed: int
    resend: int = 0  # of the updates, those that e-mail the invitation again
    conflict: int = 0  # changes in conflict: apply writes nothing to them


@dataclass
class Plan:
    base_url: str
    changes: list[InviteChange] = field(default_factory=list)
    failed: list[FailedInvite] = field(default_factory=list)  # saved as `errors`
    unchanged: int = 0
    created_at: str = field(default_factory=utc_now)
    max_changes: int | None = None
    max_resends: int | None = None
    not_updatable: list[NotUpdatable] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    signature: str | None = None  # "hmac-sha256:<hex>", set by reconciler.plan.saved
    # Loaded from a file: its own max_changes is the limit it was reviewed under.
    saved: bool = field(default=False, compare=False)
    # Of a change (--changed-since REF): the REF, fields the platform differs in that the
    # change did not touch, and the invites not read because it did not touch them.
    changed_since: str | None = None
    outside_change: list[OutsideChange] = field(default_factory=list)
    not_read: int | None = None
    # Where invites are read, updated and re-sent (`read`, `update`, `resend`: URLs with
    # `{inviteId}`) when reconciler.yaml sets the paths; None at the contract's own.
    invite_urls: dict[str, str] | None = None

    @property
    def conflicts(self) -> list[InviteChange]:
        """Changes to fields the platform changed since REF: apply leaves them alone."""
        return [change for change in self.changes if change.conflicts]

    def without_conflicts(self) -> Plan:
        """The plan apply carries out unless --force-conflicts: no invite in conflict."""
        kept = [change for change in self.changes if not change.conflicts]
        return replace(self, changes=kept)

    @property
    def summary(self) -> Summary:
        conflicts = len(self.conflicts)
        changes, failed = len(self.changes), len(self.failed)
        return Summary(changes - conflicts, self.unchanged, failed, self.resends, conflicts)

    @property
    def resends(self) -> int:
        """How many invitations applying this plan e-mails again (conflicts left alone)."""
        return sum(1 for change in self.changes if change.resend and not change.conflicts)

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def too_much_change(
        self, limit: int | None = None, resend_limit: int | None = None
    ) -> TooMuchChange | None:
        """Why apply would refuse this plan under max_changes or max_resends.

        Each limit is the plan's own or the one given, whichever is lower: a saved plan
        keeps the limits it was reviewed under; a run may add stricter ones.
        """
        for refusal, own, given, count in (
            (TooMuchChange, self.max_changes, limit, len(self.changes)),
            (TooManyResends, self.max_resends, resend_limit, self.resends),
        ):
            limits = [n for n in (own, given) if n is not None]
            if limits and count > min(limits):
                binding = min(limits)
                any_true = any(
                    c.resend and not c.conflicts and c.resend_on is None for c in self.changes
                )
                saved_limit = self.saved and binding == own
                return refusal(count, binding, saved_limit=saved_limit, any_true=any_true)
        return None

    def raise_if_unsafe(self, limit: int | None = None, resend_limit: int | None = None) -> None:
        """The one home of the max_changes and max_resends rules; raises their refusal."""
        problem = self.too_much_change(limit, resend_limit)
        if problem is not None:
            raise problem
