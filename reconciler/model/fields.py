"""The invite's fields, each with its kind, read from the invite file schema.

``schemas/invites.schema.json`` is what users and their editors see, so it is
the one list: ``$defs/invite/properties`` names the fields in the order an
export writes them (the reconciler's own keys, ``id`` and ``resendOnChange``,
aside), each field's kind follows from its type (text, an object of text, a
list of text), and the bounds on what a server may hold come from its
``serverText``, ``serverSet`` and ``serverContact`` definitions. Read at first
use: the loader's start-up is benchmarked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from reconciler.errors import ReconcilerError
from reconciler.model.kinds import ContactKind, FieldKind, SetKind, TextKind
from reconciler.model.values import Fields
from reconciler.resources import invite_schema_path

# Keys of an invite entry that steer the reconciler and are never sent.
ID_KEY = "id"  # also the invite's field name in the API
RESEND_KEY = "resendOnChange"
RECONCILER_KEYS = (ID_KEY, RESEND_KEY)

# Text of this definition is E.164, which YAML reads as a number unless it is quoted:
# an export always writes it in double quotes.
_ALWAYS_QUOTED = "#/$defs/phone"


@cache
def field_kinds() -> Mapping[str, FieldKind]:
    """Every field an invite file may manage, in the schema's order, with its kind."""
    schema = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    return _Reader(schema).fields()


def updatable_fields() -> tuple[str, ...]:
    """The fields a PATCH may change, in the order an export writes them."""
    return tuple(field_kinds())


def kind_of(name: str) -> FieldKind:
    """The kind of the field ``name`` (KeyError for a name that is not a field)."""
    return field_kinds()[name]


def fields_from_json(raw: Mapping[str, object]) -> Fields:
    """The typed values of a JSON object's fields; a value that is not its field's kind
    (or a name that is not a field) is left out."""
    kinds = field_kinds()
    fields: Fields = {}
    for name, value in raw.items():
        kind = kinds.get(name)
        typed = None if kind is None else kind.from_json(value)
        if typed is not None:
            fields[name] = typed
    return fields


class _Reader:
    """Kinds and bounds from the schema's definitions; a field of no known kind refused."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.definitions: dict[str, Any] = schema["$defs"]
        self.text = TextKind(self.definitions["serverText"]["maxLength"])

    def fields(self) -> dict[str, FieldKind]:
        properties = self.definitions["invite"]["properties"]
        return {
            name: self.kind(name, node)
            for name, node in properties.items()
            if name not in RECONCILER_KEYS
        }

    def kind(self, name: str, node: dict[str, Any]) -> FieldKind:
        ref = node.get("$ref")
        resolved = {**self.definitions[ref.rpartition("/")[2]], **node} if ref else node
        kind = resolved.get("type")
        if kind == "string":
            return TextKind(self.text.max_chars, quoted=ref == _ALWAYS_QUOTED)
        if kind == "array":
            return SetKind(self.definitions["serverSet"]["maxItems"], self.text)
        if kind == "object":
            return self.contact(name, resolved)
        raise ReconcilerError(
            f"{invite_schema_path()}: the invite field `{name}` is of no kind this tool "
            "knows: text (type string), a set (type array) or an object of text"
        )

    def contact(self, name: str, node: dict[str, Any]) -> ContactKind:
        sub_fields = {}
        for sub, sub_node in node.get("properties", {}).items():
            kind = self.kind(f"{name}.{sub}", sub_node)
            if not isinstance(kind, TextKind):
                raise ReconcilerError(
                    f"{invite_schema_path()}: `{name}.{sub}` must be text: an object's "
                    "sub-fields are compared one by one as text"
                )
            sub_fields[sub] = kind
        bounds = self.definitions["serverContact"]
        return ContactKind(
            sub_fields,
            tuple(node.get("required", ())),
            max_keys=bounds["maxProperties"],
            max_key_chars=bounds["propertyNames"]["maxLength"],
            text=self.text,
        )
