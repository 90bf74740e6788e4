"""The invite schema is a file a team may edit. Whatever its id pattern says, an id
that cannot be put in a URL path is refused where it is written: the loader's
own rule holds too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import schema
from reconciler.desired import load_text
from reconciler.resources import invite_schema_path


@pytest.fixture
def loose_id_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    edited = json.loads(invite_schema_path().read_text(encoding="utf-8"))
    entry = edited["properties"]["invites"]["items"]
    if "$ref" in entry:  # the entry may be a reference into $defs
        entry = edited["$defs"][entry["$ref"].rsplit("/", 1)[1]]
    entry["properties"]["id"].pop("pattern")  # any string will do, says the edit
    path = tmp_path / "invites.schema.json"
    path.write_text(json.dumps(edited), encoding="utf-8")
    monkeypatch.setattr(schema, "invite_schema_path", lambda: path)
    schema.invite_validators.cache_clear()
    yield
    schema.invite_validators.cache_clear()


@pytest.mark.usefixtures("loose_id_schema")
@pytest.mark.parametrize("ident", ["inv 1", "..", "inv/../admin", "x" * 129])
def test_an_id_the_edited_schema_lets_through_is_still_refused_at_the_id(ident: str) -> None:
    text = f"invites:\n  - name: Acme\n    id: {json.dumps(ident)}\n"
    invites, problems = load_text(text, "t.yaml")
    shown = repr(ident) if len(ident) <= 120 else repr(ident[:120])[:-1] + "…'"  # cut at 120
    assert [str(p) for p in problems] == [
        f"t.yaml:3:9: `id`: {shown} is not a valid inviteId "
        "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
    ]
    assert [i.id for i in invites] == [ident]  # kept, so duplicates are still found


@pytest.mark.usefixtures("loose_id_schema")
def test_a_valid_id_under_the_edited_schema_is_read_as_before() -> None:
    invites, problems = load_text("invites:\n  - id: inv_1\n    name: Acme\n", "t.yaml")
    assert problems == [] and [i.id for i in invites] == ["inv_1"]
