"""The invite's fields, read from the invite schema (reconciler.model.fields), and every
other place that names them: each derives them from the schema, or is held equal here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from support.values import typed

from reconciler.model.fields import (
    ID_KEY,
    RECONCILER_KEYS,
    field_kinds,
    fields_from_json,
    kind_of,
    updatable_fields,
)
from reconciler.model.invite import CurrentInvite
from reconciler.model.kinds import ContactKind, SetKind, TextKind
from reconciler.model.values import Contact, IdentifierSet
from reconciler.resources import invite_schema_path, resource_path
from reconciler.sandbox.app import _patch_validator
from reconciler.service.export import export_entry
from reconciler.settings.contract import field_name_problems


def schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(resource_path(f"schemas/{name}").read_text("utf-8"))
    return loaded


INVITE = schema("invites.schema.json")


def test_the_fields_are_the_schemas_invite_properties_in_order() -> None:
    properties = list(INVITE["$defs"]["invite"]["properties"])
    assert updatable_fields() == tuple(p for p in properties if p not in RECONCILER_KEYS)


def test_each_fields_kind_follows_from_its_type() -> None:
    kinds = {name: type(kind) for name, kind in field_kinds().items()}
    assert [kinds[name] for name in ("name", "email", "phone")] == [TextKind] * 3
    assert kinds["primaryContact"] is ContactKind
    assert [kinds[name] for name in ("groups", "addOns", "attachments")] == [SetKind] * 3
    contact = kind_of("primaryContact")
    assert isinstance(contact, ContactKind)
    assert list(contact.sub_fields) == ["name", "email", "phone"]
    assert contact.required == ("name", "email")
    phones = [kind_of("phone"), contact.sub_fields["phone"]]
    assert all(isinstance(k, TextKind) and k.quoted for k in phones)  # E.164: always quoted
    assert not any(
        isinstance(k, TextKind) and k.quoted for k in (kind_of("name"), kind_of("email"))
    )


def test_the_resend_field_list_names_every_field() -> None:
    assert INVITE["$defs"]["resendField"]["enum"] == list(updatable_fields())


def test_the_config_file_may_rename_every_field_and_no_other() -> None:
    field_names = schema("config.schema.json")["properties"]["field_names"]
    assert list(field_names["properties"]) == list(updatable_fields())
    assert field_names["additionalProperties"] is False


def test_a_saved_plan_names_the_fields_by_the_invite_schemas_own_list() -> None:
    fields = schema("plan.schema.json")["$defs"]["fields"]
    assert fields["propertyNames"] == {"$ref": "invites.schema.json#/$defs/resendField"}
    plan = schema("plan.schema.json")
    registry: Registry[Any] = Registry().with_resource(
        INVITE["$id"], Resource.from_contents(INVITE)
    )
    named = Draft202012Validator(
        {"$id": plan["$id"], "$defs": plan["$defs"], "$ref": "#/$defs/fields"}, registry=registry
    )
    for name in updatable_fields():
        named.validate({name: None})
    with pytest.raises(ValidationError, match="'notAField' is not one of"):
        named.validate({"notAField": None})


def test_the_sandbox_takes_a_patch_of_every_field_and_no_other() -> None:
    validator = _patch_validator()
    assert list(validator.schema["properties"]) == list(updatable_fields())
    assert validator.schema["additionalProperties"] is False


def test_settings_check_the_wire_names_of_every_field() -> None:
    # Any two fields sent under one wire name are refused, whichever they are.
    first, *others = updatable_fields()
    for other in others:
        assert field_name_problems({other: first}) != []


def test_an_export_writes_the_fields_in_the_schemas_order() -> None:
    invite = CurrentInvite(
        "inv_1",
        "pending",
        typed(
            {
                "attachments": ["proof-of-address"],
                "addOns": ["edd"],
                "groups": ["emea"],
                "primaryContact": {"phone": "+442079460001", "email": "j@a.example", "name": "J"},
                "phone": "+442079460000",
                "email": "a@acme.example",
                "name": "Acme",
            }
        ),
    )
    entry, notes = export_entry(invite)
    assert notes == []
    assert list(entry) == [ID_KEY, *(f for f in updatable_fields() if f in invite.fields)]
    assert list(entry["primaryContact"]) == ["name", "email", "phone"]


def test_json_values_are_typed_by_their_fields_kind_and_others_left_out() -> None:
    raw = {"name": "Acme", "groups": ["a"], "primaryContact": {"name": "J", "phone": None}}
    assert fields_from_json({**raw, "notAField": "x", "email": 5}) == {
        "name": "Acme",
        "groups": IdentifierSet(["a"]),
        "primaryContact": Contact({"name": "J", "phone": None}),
    }


def test_the_schema_is_read_from_the_package_resources() -> None:
    assert invite_schema_path() == resource_path("schemas/invites.schema.json")


def _kinds_of(
    properties: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, Any]:
    """field_kinds() of the invite schema with ``properties`` set, and the edited file
    (the kinds, or the ReconcilerError raised)."""
    import reconciler.model.fields as fields_module
    from reconciler.errors import ReconcilerError

    schema = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    fields = schema["$defs"]["invite"]["properties"]
    for name, sub in properties.items():
        if name in fields and "properties" in sub:
            fields[name]["properties"].update(sub["properties"])
        else:
            fields[name] = sub
    edited = tmp_path / "invites.schema.json"
    edited.write_text(json.dumps(schema), encoding="utf-8")
    monkeypatch.setattr(fields_module, "invite_schema_path", lambda: edited)
    field_kinds.cache_clear()
    try:
        return field_kinds(), edited
    except ReconcilerError as refused:
        return refused, edited
    finally:
        field_kinds.cache_clear()


def test_a_schema_whose_contact_holds_a_list_is_refused_naming_the_sub_field(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tags = {"tags": {"type": "array", "items": {"type": "string"}}}
    refused, edited = _kinds_of({"primaryContact": {"properties": tags}}, tmp_path, monkeypatch)
    assert str(refused) == (
        f"{edited}: `primaryContact.tags` must be text: an object's sub-fields are compared "
        "one by one as text"
    )


def test_a_schemas_object_field_without_properties_is_a_contact_whose_sub_fields_none_manages(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    kinds, _ = _kinds_of({"billingContact": {"type": "object"}}, tmp_path, monkeypatch)
    billing = kinds["billingContact"]
    assert isinstance(billing, ContactKind)
    assert (billing.sub_fields, billing.required) == ({}, ())


def test_a_schemas_field_of_no_known_kind_is_refused_naming_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused, edited = _kinds_of({"seats": {"type": "integer"}}, tmp_path, monkeypatch)
    assert str(refused) == (
        f"{edited}: the invite field `seats` is of no kind this tool knows: text (type "
        "string), a set (type array) or an object of text"
    )


def test_a_schemas_contact_sub_field_of_no_known_kind_is_refused_naming_it_in_full(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seats = {"seats": {"type": "integer"}}
    refused, edited = _kinds_of({"primaryContact": {"properties": seats}}, tmp_path, monkeypatch)
    assert str(refused) == (
        f"{edited}: the invite field `primaryContact.seats` is of no kind this tool knows: "
        "text (type string), a set (type array) or an object of text"
    )
