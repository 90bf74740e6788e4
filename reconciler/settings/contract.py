"""The platform contract as one deployment speaks it: paths, wire names and scope.

`docs/api-contract.md` fixes what the published interface leaves out;
each of those assumptions is configurable (reconciler.yaml, the environment), and
they travel together as one Contract so that a run against the sandbox, which
speaks the contract as published, swaps all of them at once.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from reconciler.errors import ConfigError
from reconciler.model.invite import ID_KEY, updatable_fields
from reconciler.safetext import escape, quote_value

DEFAULT_SCOPE = "kyb:invites:read kyb:invites:write"
# RFC 6749 §3.3: scope-token = 1*NQCHAR, NQCHAR = %x21 / %x23-5B / %x5D-7E.
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
BASE_URL_VARIABLE = "RECONCILER_BASE_URL"
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

    def invite_urls(self, base_url: str) -> dict[str, str] | None:
        """Where an invite is read, updated and re-sent under ``base_url``, `{inviteId}` kept;
        None at the contract's own paths. A plan names them (issue 51)."""
        paths = {kind: getattr(self, key) for kind, key in _URL_KINDS.items()}
        if all(paths[kind] == self._field_defaults[key] for kind, key in _URL_KINDS.items()):
            return None
        return {kind: base_url + path for kind, path in paths.items()}


# What each of a plan's invite_urls is: the part of the contract it comes from.
_URL_KINDS = {
    "read": "get_invite_path",
    "update": "update_invite_path",
    "resend": "resend_invite_path",
}


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


# The paths a deployment may set, each joined under base_url as written (api/network.py).
PATH_KEYS = ("token_path", "get_invite_path", "update_invite_path", "resend_invite_path")
ID_SEGMENT = "{inviteId}"
_NOT_PATH = {"?": "a query (`?`)", "#": "a fragment (`#`)", "\\": "a backslash"}
# RFC 3986 pchar: unreserved, sub-delims, ":" and "@", or a percent-encoded octet.
_PCHAR = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2}")
# Encoded, what a server or proxy may decode into another path: . / \ %, ? and # (a
# query, a fragment once decoded), controls, and bytes past ASCII (an overlong `%c0%ae`
# is a dot to some decoders).
_HIDDEN = re.compile(r"%(?:2[EeFf53]|3[Ff]|5[Cc]|[01][0-9A-Fa-f]|7[Ff]|[89A-Fa-f][0-9A-Fa-f])")


def path_problem(key: str, template: str) -> str | None:
    """Why the path ``key`` is not a plain path, None when it is. An invite's path holds
    `{inviteId}` once, as a whole segment; the token's never. The request goes exactly
    where the text says: no query, fragment, dot segment or encoded separator that a
    client, proxy or server would resolve to another resource (issue 51)."""
    if not template.startswith("/"):
        return "must start with `/`"
    for mark, what in _NOT_PATH.items():
        if mark in template:
            return f"holds {what}; a path template is a path only"
    wanted = 0 if key == "token_path" else 1
    if template.count(ID_SEGMENT) != wanted:
        return f"must hold `{ID_SEGMENT}` once" if wanted else f"must not hold `{ID_SEGMENT}`"
    for segment in template[1:].split("/"):
        why = _segment_problem(segment)
        if why:
            return why
    return None


def _segment_problem(segment: str) -> str | None:
    if segment == ID_SEGMENT:
        return None
    if ID_SEGMENT in segment:
        return f"must hold `{ID_SEGMENT}` as a whole segment, as in `{INVITE_PATH}/resend`"
    if not segment:
        return "has an empty segment (`//`, or `/` at the end)"
    if not segment.partition(";")[0].strip("."):
        # Dots alone, or nothing, before any `;` parameters (`..;x`): servers that drop
        # path parameters (Tomcat, Spring) resolve it as `..` or `//`.
        return f"has a `{escape(segment)}` segment, which would be resolved to another path"
    hidden = _HIDDEN.search(segment)
    if hidden:
        return (
            f"percent-encodes `{hidden.group()}` (`.`, `/`, `\\`, `%`, `?`, `#`, a control "
            "character or a byte past ASCII), which a server may decode into another path"
        )
    left = _PCHAR.sub("", segment)
    if left:
        return (
            f"holds {quote_value(left[0])}, which a path segment cannot hold as it is "
            "(RFC 3986: letters, digits, `-._~!$&'()*+,;=:@` and `%XX`)"
        )
    return None


def contract_problems(values: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """(where, message) for each part of the contract that cannot be used as it is set:
    a path that is not a plain path, field names that cannot be their own."""
    problems: list[tuple[tuple[str, ...], str]] = [
        ((key,), f"`{key}`: {quote_value(values[key])} {why}")
        for key in PATH_KEYS
        if isinstance(values.get(key), str) and (why := path_problem(key, values[key]))
    ]
    problems += [
        (("field_names", name), f"`field_names.{escape(name)}`: {why}")
        for name, why in field_name_problems(values.get("field_names", {}))
    ]
    scope = values.get("scope")
    # Spaces, tabs and line breaks between and around them are the user's layout (a YAML
    # block scalar ends in one): the token request sends the scopes one space apart.
    if isinstance(scope, str) and not all(map(SCOPE_TOKEN.fullmatch, scope.split())):
        problems.append(
            (
                ("scope",),
                f"`scope`: {quote_value(scope)} is not scopes separated by spaces, "
                'each of printable ASCII without `"` or `\\` (RFC 6749)',
            )
        )
    return problems


def check_contract(contract: Contract) -> None:
    """Raise ConfigError when a part of the contract cannot be used (contract_problems)."""
    problems = contract_problems(contract._asdict())
    if problems:
        raise ConfigError("; ".join(message for _, message in problems))


def no_scheme(written: str) -> str | None:
    """What to say of a base URL written without its scheme (`api.example.com`,
    `localhost:8787`), wherever it was written: quoted as written, with the URL meant,
    never read as a scheme (`localhost://8787`); None when no URL meant can be told."""
    try:
        meant = urlsplit(f"https://{written}")
        port = meant.port
    except ValueError:
        return None
    host = meant.hostname
    if not host or any(c.isspace() for c in written):
        return None
    # Only host, port and path are shown: user info or a query may hold a credential.
    shown = (f"[{host}]" if ":" in host else host) + ("" if port is None else f":{port}")
    shown += meant.path
    scheme = "http" if is_loopback_host(host) else "https"
    return (
        f"{quote_value(shown, limit=None)} has no scheme; "
        f"did you mean {quote_value(f'{scheme}://{shown}', limit=None)}?"
    )


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback address: the hosts plain http is spoken to."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
