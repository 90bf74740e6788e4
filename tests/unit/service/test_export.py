"""The export service: what it writes of the invites a server returns.

An export always validates and plans clean against the state it came from: a
server value a file cannot hold is left out with a note saying why, never
rewritten (not redacted, not "None").
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml
from support.cli import run_cli
from support.git import git
from support.helpers import clean_env
from support.values import typed

from reconciler.errors import ConfigError
from reconciler.model.invite import CurrentInvite, kind_of
from reconciler.service.export import export_entry, render_export, schema_ref_for

SCHEMA = "schemas/invites.schema.json"


def _exported(fields: Mapping[str, object]) -> tuple[str, dict[str, object]]:
    invite = CurrentInvite("inv_1", "pending", typed(fields))
    text = render_export([invite], "https://api.example", SCHEMA)
    (entry,) = yaml.safe_load(text)["invites"]
    return text, entry


# From test_untrusted_inputs.py (what an attacker found after the rebuild).
def test_an_export_never_writes_a_secret_the_server_put_in_a_value(registered_secret: str) -> None:
    text, entry = _exported({"name": f"Acme {registered_secret}", "email": "a@acme.example"})
    assert registered_secret not in text and "[redacted]" not in text
    assert entry == {"id": "inv_1", "email": "a@acme.example"}
    assert "`name` left out: the server's value holds the client secret" in text


def test_ordinary_words_are_exported_as_they_are_under_how_a_re_send_is_asked_for() -> None:
    fields = {
        "name": "Flag Bearer Ltd.",
        "primaryContact": {"name": "Torch Bearer 2 Team", "email": "t@b.example"},
    }
    text, entry = _exported(fields)
    assert entry == {"id": "inv_1", **fields}
    header, body = text.split("invites:", 1)
    assert "#" not in body  # nothing left out, no note
    # The platform holds no re-send rule, so no entry carries one: the file says how.
    assert "resendOnChange" not in entry
    assert (
        "# A changed e-mail re-sends an invitation only where its entry says so: add\n"
        "# `resendOnChange: [email, primaryContact]` to the entry (`true`: on any change).\n"
    ) in header


def test_a_contact_with_a_sub_field_a_file_cannot_hold_and_no_phone(tmp_path: Path) -> None:
    fields = {
        "primaryContact": {"name": "Jane", "email": "j@a.example", "phone": None, "title": "CFO"}
    }
    text, entry = _exported(fields)
    assert entry["primaryContact"] == {"name": "Jane", "email": "j@a.example"}
    assert "None" not in text and "title:" not in text
    assert "# `primaryContact` sub-fields `title` left out" in text
    path = tmp_path / "export.yaml"
    path.write_text(text, encoding="utf-8")
    done = run_cli("validate", str(path), cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr


def test_values_the_schema_refuses_are_left_out_each_with_its_reason() -> None:
    fields = {
        "name": "x" * 300,
        "email": "jane\u206f@acme.example",
        "phone": "12",
        "primaryContact": {"name": "J", "email": "j@a.example", "phone": "nope"},
        "groups": ["ok", "zero\u200bwidth"],
        "addOns": ["edd", "edd"],  # repeats mean nothing: written once
    }
    entry, notes = export_entry(CurrentInvite("inv_1", "pending", typed(fields)))
    assert entry == {
        "id": "inv_1",
        "primaryContact": {"name": "J", "email": "j@a.example"},
        "addOns": ["edd"],
    }
    said = "\n".join(notes)
    assert "`name` left out: `name` must be at most 200 characters" in said
    assert (
        "`email` left out: 'jane\\u206f@acme.example' is not a valid email address: it holds U+206F"
        in said
    )
    assert "`phone` left out: '12' is not E.164" in said
    assert "`primaryContact.phone` left out" in said
    assert "`groups` left out: 'zero\\u200bwidth' holds U+200B ZERO WIDTH SPACE, which" in said


def test_a_contact_missing_a_required_sub_field_is_left_out_whole() -> None:
    entry, notes = export_entry(
        CurrentInvite("inv_1", "pending", typed({"primaryContact": {"name": "J", "phone": "x"}}))
    )
    assert entry == {"id": "inv_1"}
    assert any(n.startswith("`primaryContact` left out") for n in notes)


def test_text_is_exported_in_nfc_and_joiners_as_escapes() -> None:
    text, entry = _exported({"name": "Cafe\u0301 علی\u200cرضا"})
    assert entry["name"] == "Caf\u00e9 علی\u200cرضا"
    assert '"Café علی\\u200cرضا"' in text
    assert "\u200c" not in text
    assert kind_of("name").equal(entry["name"], "Cafe\u0301 علی\u200cرضا")


def test_a_note_cannot_end_its_comment_or_hold_control_characters() -> None:
    fields = {"primaryContact": {"name": "J", "email": "j@a.example", "x\nevil: 1\u2028": "v"}}
    text, entry = _exported(fields)
    assert entry == {"id": "inv_1", "primaryContact": {"name": "J", "email": "j@a.example"}}
    assert "\u2028" not in text and "evil: 1" not in text.replace("x\\nevil: 1", "")


def test_schema_ref_of_reconciler_yaml_is_under_the_one_path_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    monkeypatch.chdir(repo)
    # cli.md lists "schema references" among the paths a repository file names; export
    # writes it into the file it makes and stats it wherever it leads: refused, before any
    # request, when it leads out; a URL, or --schema-ref (the user's), is not judged.
    with pytest.raises(ConfigError, match=r"`schema_ref` in reconciler.yaml: \.\./\.\./\.\./"):
        schema_ref_for("invites/a.yaml", None, "../../../../etc/passwd")
    with pytest.raises(ConfigError, match="outside the repository"):
        schema_ref_for(None, None, "../../etc/passwd")
    (repo / "schemas").mkdir()
    (repo / "schemas" / "mine.json").write_text("{}")
    assert schema_ref_for("invites/a.yaml", None, "../schemas/mine.json") == (
        "../schemas/mine.json",
        None,
    )
    assert schema_ref_for(None, None, "https://example.test/s.json")[0].startswith("https://")
    assert schema_ref_for("a.yaml", "../../etc/passwd", "ignored")[0] == "../../etc/passwd"
