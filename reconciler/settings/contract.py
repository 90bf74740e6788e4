"""The platform contract as one deployment speaks it: paths, wire names and scope.

`docs/api-contract.md` fixes what the published interface leaves out;
each of those assumptions is configurable (reconciler.yaml, the environment), and
they travel together as one Contract so that a run against the sandbox, which
speaks the contract as published, swaps all of them at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from reconciler.errors import ConfigError
from reconciler.model.fields import ID_KEY, updatable_fields
from reconciler.safetext import escape

DEFAULT_SCOPE = "kyb:invites:read kyb:invites:write"
INVITE_PATH = "/public-api/v1/kyb/invites/{inviteId}"


class Contract(NamedTuple):
    """How a deployment speaks the platform contract: paths, wire names and scope.

    One record, so a run against the sandbox (which speaks the contract as
    published) swaps all of it at once.
    """

    scope: str = DEFAULT_SCOPE
    token_path: str = "/oauth/token"
    get_invite_path: str = INVITE_PATH
    update_invite_path: str = INVITE_PATH
    resend_invite_path: str = INVITE_PATH + "/resend"
    field_names: Mapping[str, str] = MappingProxyType({})

    def wire_name(self, canonical: str) -> str:
        return self.field_names.get(canonical, canonical)


# Wire names no updatable field may take: the invite's read-only fields (docs/api-contract.md).
READ_ONLY_WIRE_NAMES = (ID_KEY, "status")


def field_name_problems(field_names: Mapping[str, str]) -> list[tuple[str, str]]:
    """(field, why) for each renamed field whose wire name cannot be its own.

    The field names are checked as a whole: ``{phone: email}`` would send the phone
    as the email, and ``{name: status}`` would write a managed value onto a field
    the platform keeps read-only.
    """
    fields = updatable_fields()
    wire = {canonical: field_names.get(canonical, canonical) for canonical in fields}
    problems = []
    for canonical, name in field_names.items():
        shown = escape(name)
        others = [f for f in fields if f != canonical and wire[f] == name]
        if not name.strip():
            why = "a wire name must not be empty"
        elif name in READ_ONLY_WIRE_NAMES:
            why = f"`{shown}` is a read-only field of the invite; no field may be sent as it"
        elif others:
            why = f"`{shown}` is already the wire name of `{others[0]}`; each field needs its own"
        else:
            continue
        problems.append((canonical, why))
    return problems


def check_contract(contract: Contract) -> None:
    """Raise ConfigError when the contract's field names do not make sense together."""
    problems = field_name_problems(contract.field_names)
    if problems:
        raise ConfigError("; ".join(f"field_names.{escape(name)}: {why}" for name, why in problems))
