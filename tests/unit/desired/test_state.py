"""Desired-state files as people write them: every problem at its exact file:line:column;
each entry checked as it is read (NFC, nothing invisible); ids typed on the command line;
which invites a run plans (--target, --exclude).

The files here are hand-written YAML text (comments, blank lines, flow and block
lists, non-ASCII names), never produced by a YAML dumper, because the traps a
user falls into (unquoted phone numbers, `NO`, `12:30`, duplicate keys) only
exist in hand-written text.
"""

from __future__ import annotations

import gc
import json
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.cli import run_cli
from support.git import git
from support.values import typed

from reconciler.desired import state as desired
from reconciler.desired.rules import Rules
from reconciler.desired.state import (
    DesiredState,
    Selection,
    load_desired_state,
    load_file,
    load_text,
    load_texts,
    refuse_bad_ids,
    select_invites,
)
from reconciler.errors import FileProblem, InputError, ReconcilerError
from reconciler.model.invite import (
    MAX_MARKS_IN_A_ROW,
    DesiredInvite,
    SourceLocation,
    marks_in_a_row,
)
from reconciler.safetext import NOT_IN_TEXT

WriteYaml = Callable[[str, str], Path]


def load(*paths: Path | str) -> DesiredState:
    return load_desired_state([str(p) for p in paths])


def problems_of(*paths: Path | str) -> list[FileProblem]:
    """The problems of one run; the run must fail with an InputError."""
    with pytest.raises(InputError) as info:
        load(*paths)
    return info.value.problems


def only_problem(*paths: Path | str) -> FileProblem:
    problems = problems_of(*paths)
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


def where(problem: FileProblem) -> tuple[str, int, int]:
    return problem.path, problem.line, problem.column


# -- a valid file ---------------------------------------------------------------

VALID = """\
# yaml-language-server: $schema=../schemas/invites.schema.json
# Invites for Europe. Reviewed by compliance before every merge.

invites:
  - id: inv_8f2k1                 # the inviteId
    name: Acme Holdings Ltd
    email: compliance@acme.example
    phone: "+442079460000"        # quoted, as it must be
    primaryContact:
      name: Jane Doe
      email: jane@acme.example
    groups: [emea, enterprise]
    addOns: [edd]
    attachments:
      - certificate-of-incorporation
      - proof-of-address
    resendOnChange: true

  # Only the name is managed here; everything else is left to the platform.
  - id: inv_3m9q7
    name: Müller & Söhne GmbH

  - {id: inv_6p3j9, name: 株式会社サクラ商事, groups: [apac]}

  - id: inv.legacy-01
    resendOnChange: false
    name: 'NO'
    groups: ["12:30", '0755', "2024-01-02"]
"""


def test_valid_file_yields_one_record_per_entry_with_only_the_fields_written(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml("invites/emea.yaml", VALID)

    state = load(path)

    assert state.files == [str(path)]
    assert [invite.id for invite in state.invites] == [
        "inv_8f2k1",
        "inv_3m9q7",
        "inv_6p3j9",
        "inv.legacy-01",
    ]
    acme, mueller, sakura, legacy = state.invites
    assert acme == DesiredInvite(
        id="inv_8f2k1",
        fields=typed(
            {
                "name": "Acme Holdings Ltd",
                "email": "compliance@acme.example",
                "phone": "+442079460000",
                "primaryContact": {"name": "Jane Doe", "email": "jane@acme.example"},
                "groups": ["emea", "enterprise"],
                "addOns": ["edd"],
                "attachments": ["certificate-of-incorporation", "proof-of-address"],
            }
        ),
        source=acme.source,
        resend_on_change=True,
    )
    # Absent fields are unmanaged: they are absent, not None or empty.
    assert mueller.fields == {"name": "Müller & Söhne GmbH"}
    assert mueller.resend_on_change is False
    assert sakura.fields == {"name": "株式会社サクラ商事", "groups": ["apac"]}
    # Quoted values stay exactly the text the user wrote.
    assert legacy.fields == {"name": "NO", "groups": ["12:30", "0755", "2024-01-02"]}
    assert legacy.resend_on_change is False
    # resendOnChange steers the reconciler; it is never a field sent to the API.
    for invite in state.invites:
        assert "resendOnChange" not in invite.fields
        assert "id" not in invite.fields
    # Each record points at the line of its entry, for plan output and errors.
    assert [str(invite.source) for invite in state.invites] == [
        f"{path}:5",
        f"{path}:20",
        f"{path}:23",
        f"{path}:25",
    ]
    assert acme.name == "Acme Holdings Ltd"


def test_file_with_utf8_byte_order_mark_loads_and_keeps_positions(write_yaml: WriteYaml) -> None:
    # Some Windows editors save UTF-8 with a BOM; that is still a valid UTF-8 file.
    text = "\ufeffinvites:\n  - id: inv_3m9q7\n    name: Müller & Söhne GmbH\n"
    path = write_yaml("bom.yaml", text)

    state = load(path)

    assert [(i.id, i.fields) for i in state.invites] == [
        ("inv_3m9q7", {"name": "Müller & Söhne GmbH"})
    ]
    assert str(state.invites[0].source) == f"{path}:2"


def test_five_hundred_invites_in_one_file_load(write_yaml: WriteYaml) -> None:
    entries = "".join(
        f"  - id: inv_{n:04d}\n"
        f"    name: Business Nº{n} GmbH\n"
        f"    email: kyb{n}@example.com\n"
        f"    groups: [emea, tier-{n % 3}]\n"
        for n in range(500)
    )
    path = write_yaml("many.yaml", "# generated for load testing\ninvites:\n" + entries)

    state = load(path)

    assert len(state.invites) == 500
    assert state.invites[0].id == "inv_0000"
    assert state.invites[499].fields == {
        "name": "Business Nº499 GmbH",
        "email": "kyb499@example.com",
        "groups": ["emea", "tier-1"],
    }
    # Entry n starts on line 3 + 4n.
    assert str(state.invites[499].source) == f"{path}:{3 + 4 * 499}"


# -- a file with one problem: named where it is -------------------------------------

ONE_PROBLEM = [
    pytest.param(
        "invites:\n  - id: inv_8f2k1\n    email: onboarding@acme.example\n\n"
        "    # corrected address, see ticket KYB-123\n    email: compliance@acme.example\n",
        (6, 5),
        ["duplicate key `email`", "line 3"],  # at the second, naming the first
        [],
        id="duplicate-key",
    ),
    *(  # a key written twice, anywhere: at the second, naming the first's line
        pytest.param(text, at, [f"duplicate key `{key}`", f"line {first}"], [], id=f"twice-{key}")
        for text, key, at, first in [
            ("invites:\n  - id: inv_a\ninvites:\n  - id: inv_b\n", "invites", (3, 1), 1),
            (
                "invites:\n  - id: inv_a\n    primaryContact:\n      name: Jane Doe\n"
                "      email: jane@acme.example\n      name: John Doe\n",
                "name",
                (6, 7),
                4,
            ),
            ("invites:\n  - id: inv_a\n    name: Acme\n    id: inv_b\n", "id", (4, 5), 2),
        ]
    ),
    pytest.param(  # Windows line ends: the lines as an editor counts them
        "invites:\r\n  - id: inv_a\r\n\r\n  - id: inv_b\r\n    emial: b@x.example\r\n",
        (5, 5),
        ["did you mean `email`?"],
        [],
        id="crlf",
    ),
    pytest.param(
        "invites:\n  - id: inv_8f2k1\n    name: Acme Holdings Ltd\n\n"
        "  - id: inv_3m9q7\n    name: Müller & Söhne GmbH\n\n"
        "  # copied from above and forgot to change the id\n"
        "  - id: inv_8f2k1\n    name: Acme Holdings (UK) Ltd\n",
        (9, 5),
        ["`inv_8f2k1`", "{path}:2"],  # both entries named
        [],
        id="duplicate-id-in-one-file",
    ),
    pytest.param(
        "invites:\n  - id: inv_8f2k1\n\n  - name: Kiwi Ledger Ltd\n    email: ops@kiwi.example\n",
        (4, 5),
        ["missing required field `id`"],
        [],
        id="entry-without-id",
    ),
    pytest.param(  # an internal class name means nothing to a user
        "invites:\n  id: inv_8f2k1\n  name: Acme\n",
        (2, 3),
        ["`invites` must be a list", "mapping"],
        ["MarkedDict"],
        id="invites-a-mapping",
    ),
    pytest.param(
        "invites: inv_8f2k1\n", (1, 10), ["`invites` must be a list"], [], id="invites-a-text"
    ),
    pytest.param(
        "invites:\n  - id: inv_8f2k1\n---\n# second document\ninvites:\n  - id: inv_3m9q7\n",
        (3, 1),
        ["more than one YAML document"],
        [],
        id="two-documents",
    ),
    *(  # tabs are invisible in most editors: the message says what it is
        pytest.param(f"invites:{nl}\t- id: inv_8f2k1{nl}", (2, 1), ["a tab character"], [], id=name)
        for nl, name in (("\n", "tab-indentation"), ("\r", "tab-after-a-lone-cr"))
    ),
    pytest.param(
        "invites:\n  - id: inv_8f2k1\n    name:Acme: x\n   email: a@b.example\n",
        (4, 4),
        ["(", "indent"],  # a hint
        [],
        id="syntax-error-hint",
    ),
    pytest.param("# nothing yet\ninvites:\n", (2, 9), ["invites: []"], [], id="empty-invites-key"),
    pytest.param(  # quoting nothing gives "", which is no valid name either
        "invites:\n  - id: inv_8f2k1\n    name:\n",
        (3, 10),
        ["`name`", "empty"],
        ['put it in quotes: ""', "reads  as"],
        id="empty-value-is-not-something-to-quote",
    ),
]


# -- duplicate keys -------------------------------------------------------------


def test_key_given_explicitly_overrides_a_merged_key_without_being_a_duplicate(
    write_yaml: WriteYaml,
) -> None:
    # YAML merge keys: "each key/value pair is inserted into the current mapping,
    # unless the key already exists in it", so `id: inv_b` overrides the merged id.
    path = write_yaml(
        "merge.yaml",
        """\
invites:
  - &emea
    id: inv_a
    groups: [emea]
    addOns: [edd]
  - <<: *emea
    id: inv_b
    name: Bolt GmbH
""",
    )

    state = load(path)

    assert [(i.id, i.fields) for i in state.invites] == [
        ("inv_a", {"groups": ["emea"], "addOns": ["edd"]}),
        ("inv_b", {"groups": ["emea"], "addOns": ["edd"], "name": "Bolt GmbH"}),
    ]


# -- duplicate invite ids ---------------------------------------------------------


def test_duplicate_id_across_two_files_names_both_files(write_yaml: WriteYaml) -> None:
    first = write_yaml("invites/a-emea.yaml", "invites:\n  - id: inv_8f2k1\n    name: Acme\n")
    second = write_yaml(
        "invites/b-apac.yaml",
        "invites:\n  - id: inv_6p3j9\n    name: 株式会社サクラ商事\n  - id: inv_8f2k1\n",
    )

    problem = only_problem(first.parent)

    assert where(problem) == (str(second), 4, 5)
    assert "`inv_8f2k1`" in problem.message
    assert f"{first}:2" in problem.message


def test_duplicate_id_is_reported_with_the_other_errors_of_its_file(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        "emea.yaml",
        """\
invites:
  - id: inv_8f2k1
    email: compliance.acme.example   # missing @
  - id: inv_8f2k1
    phone: +442079460000
""",
    )

    problems = problems_of(path)

    assert [where(p) for p in problems] == [
        (str(path), 3, 12),
        (str(path), 4, 5),
        (str(path), 5, 12),
    ]
    assert "not a valid email address" in problems[0].message
    assert "`inv_8f2k1`" in problems[1].message
    assert f"{path}:2" in problems[1].message
    assert "put it in quotes" in problems[2].message


# -- values YAML would silently turn into another type ---------------------------------

_TYPE_TRAPS = [
    # (the entry as written, raw text, its column, a word of what YAML reads it as)
    pytest.param(
        "  - id: inv_8f2k1\n    phone: +442079460000", "+442079460000", 12, "number", id="phone"
    ),
    pytest.param("  - id: inv_8f2k1\n    name: NO", "NO", 11, "boolean", id="name-NO"),
    pytest.param("  - id: inv_8f2k1\n    name: yes", "yes", 11, "boolean", id="name-yes"),
    pytest.param("  - id: inv_8f2k1\n    name: 12:30", "12:30", 11, "750", id="sexagesimal"),
    pytest.param("  - id: inv_8f2k1\n    name: 2024-01-02", "2024-01-02", 11, "date", id="date"),
    pytest.param("  - id: inv_8f2k1\n    name: 0755", "0755", 11, "493", id="octal"),
    pytest.param("  - name: Acme\n    id: 20240102", "20240102", 9, "number", id="id"),
    pytest.param("  - id: inv_8f2k1\n    groups: [emea, NO]", "NO", 20, "boolean", id="flow-list"),
    pytest.param(
        "  - id: inv_8f2k1\n    addOns:\n      - edd\n      - off",
        "off",
        9,
        "boolean",
        id="block-list",
    ),
    pytest.param(
        "  - id: inv_8f2k1\n"
        "    primaryContact:\n"
        "      name: Jane Doe\n"
        "      email: jane@acme.example\n"
        "      phone: +442079460001",
        "+442079460001",
        14,
        "number",
        id="primaryContact-phone",
    ),
    pytest.param(
        "  - id: inv_8f2k1\n    primaryContact: {name: ON, email: jane@acme.example}",
        "ON",
        28,
        "boolean",
        id="primaryContact-flow-name",
    ),
]
TYPE_TRAPS = [  # each says what YAML made of it and shows the quoted form to write
    pytest.param(
        f"# business invites\ninvites:\n{entry}   # a comment\n",
        (3 + str(entry).count("\n"), column),
        ["must be text", read_as, "put it in quotes", f'"{raw}"'],
        [],
        id=p.id,
    )
    for p in _TYPE_TRAPS
    for entry, raw, column, read_as in [p.values]
]


_ENTRY_1 = "invites:\n  - id: inv_8f2k1\n"
EXPLICIT_TAGS = [  # a tag that does not fit its value: said on one line
    pytest.param(_ENTRY_1 + f"    name: {value}\n", (3, 11), [tag], ["\n"], id=f"tag-{value}")
    for value, tag in [
        ("!!int +44 20 7946 0000", "int"),
        ("!!int twelve", "int"),
        ("!!float", "float"),
        ("!!bool maybe", "bool"),
        ("!!timestamp 2024-13-45", "timestamp"),
        ("!!map emea", "map"),
        ("!!seq emea", "seq"),
    ]
]
TYPOS = [  # an unknown field: the field meant suggested
    pytest.param(
        _ENTRY_1 + line + "\n", (3, column),
        [f"unknown field `{typo}`", f"did you mean `{meant}`?"], [], id=f"typo-{typo}-{column}",
    )
    for line, typo, meant, column in [
        ("    emial: compliance@acme.example", "emial", "email", 5),
        ("    phnoe: '+442079460000'", "phnoe", "phone", 5),
        ("    group: [emea]", "group", "groups", 5),
        ("    resendOnchange: true", "resendOnchange", "resendOnChange", 5),
        (
            "    primaryContact: {name: Jane, email: j@acme.example, emial: x@y.example}",
            "emial",
            "email",
            57,
        ),
    ]
]  # fmt: skip
BAD_EMAILS = [  # a bad e-mail: the value named
    pytest.param(
        _ENTRY_1 + line + "\n", (3, column), [repr(value), "not a valid email address"], [],
        id=f"email-{value}",
    )
    for line, column, value in [
        ("    email: compliance.acme.example", 12, "compliance.acme.example"),
        ("    email: jane doe@acme.example", 12, "jane doe@acme.example"),
        ("    email: compliance@acme", 12, "compliance@acme"),
        ("    primaryContact: {name: Jane Doe, email: jane@}", 45, "jane@"),
    ]
]  # fmt: skip
BAD_IDS = [  # an id's characters explained
    pytest.param(
        f"invites:\n  - id: {bad_id}\n    name: Acme\n", (2, 9),
        ["not a valid inviteId", "letters, digits, `_`, `-`, `.`"], [], id=f"id-{bad_id[:5]}",
    )
    for bad_id in ["inv 8f2k1", "inv/8f2k1", "inv_ü", "x" * 129, "''"]
]  # fmt: skip
SYNTAX_ERRORS = [  # a syntax error at its position
    pytest.param(text, at, [], ["\n"], id=name)
    for name, text, at in [
        ("indented-too-far", _ENTRY_1 + "    name: Acme\n      email: a@acme.example\n", (4, 12)),
        ("indented-too-little", _ENTRY_1 + "    name: Acme\n   email: a@acme.example\n", (4, 4)),
        (
            "colon-in-plain-value",
            _ENTRY_1 + "    name: Acme: Holdings Ltd   # needs quotes\n",
            (3, 15),
        ),
    ]
]


@pytest.mark.parametrize(
    ("text", "at", "says", "never"),
    [*ONE_PROBLEM, *TYPE_TRAPS, *EXPLICIT_TAGS, *TYPOS, *BAD_EMAILS, *BAD_IDS, *SYNTAX_ERRORS],
)
def test_a_file_with_one_problem_names_it_at_its_line_and_column(
    write_yaml: WriteYaml, text: str, at: tuple[int, int], says: list[str], never: list[str]
) -> None:
    path = write_yaml("invites.yaml", text)

    problem = only_problem(path)

    assert where(problem) == (str(path), *at)
    assert problem.message.strip()
    for part in says:
        assert part.replace("{path}", str(path)) in problem.message
    for part in never:
        assert part not in problem.message


# -- schema problems ------------------------------------------------------------------


def test_singular_invite_key_at_top_level_is_caught(write_yaml: WriteYaml) -> None:
    path = write_yaml("top.yaml", "# oops\ninvite:\n  - id: inv_8f2k1\n")

    problems = problems_of(path)

    unknown = [p for p in problems if "unknown field `invite`" in p.message]
    assert [where(p) for p in unknown] == [(str(path), 2, 1)]
    assert "did you mean `invites`?" in unknown[0].message
    assert any("`invites`" in p.message and "missing" in p.message for p in problems)


def test_entry_that_is_not_a_mapping_is_described_as_an_invite_entry(
    write_yaml: WriteYaml,
) -> None:
    # A user who lists bare ids, or nests a list, gets told the entry must be a mapping.
    path = write_yaml("bare.yaml", "invites:\n  - inv_8f2k1\n  - [inv_3m9q7]\n")

    problems = problems_of(path)

    assert [where(p) for p in problems] == [(str(path), 2, 5), (str(path), 3, 5)]
    for problem in problems:
        assert "mapping" in problem.message
        # `invites` itself must be a list; it is the entry that must be a mapping.
        assert "`invites` must be a mapping" not in problem.message
        assert "MarkedList" not in problem.message


_EMPTY = "file is empty; expected a mapping with an `invites:` list"
_NOT_A_MAPPING = "top level must be a mapping with an `invites:` list"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("", f"1:1: {_EMPTY}", id="empty"),
        pytest.param(
            "# TODO: add the APAC invites\n\n# owner: kyb\n", f"1:1: {_EMPTY}", id="comments"
        ),
        pytest.param("\n\n   \n", f"1:1: {_EMPTY}", id="blank-lines"),
        pytest.param("- id: inv_8f2k1\n  name: Acme\n", f"1:1: {_NOT_A_MAPPING}", id="list"),
        pytest.param("# invites\n- id: inv_a\n", f"2:1: {_NOT_A_MAPPING}", id="list-commented"),
        pytest.param("# just a name\ninv_8f2k1\n", f"2:1: {_NOT_A_MAPPING}", id="scalar"),
        pytest.param("42\n", f"1:1: {_NOT_A_MAPPING}", id="number"),
    ],
)
def test_a_file_without_a_mapping_at_the_top_is_explained(
    write_yaml: WriteYaml, text: str, said: str
) -> None:
    path = write_yaml("top.yaml", text)
    assert [str(p) for p in problems_of(path)] == [f"{path}:{said}"]


# -- encodings and syntax --------------------------------------------------------------


_ENTRY = "invites:\n  - id: inv_1\n"


def problems(path: Path) -> list[str]:
    return [str(p) for p in load_file(path)[1]]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        pytest.param(  # the ü of Müller
            "invites:\n  - id: inv_3m9q7\n    name: Müller & Söhne GmbH\n".encode("latin-1"),
            "3:12: not valid UTF-8 (byte 0xfc)",
            id="latin-1",
        ),
        pytest.param(  # "    name: Société Générale caf" is 30 characters (34 bytes)
            "invites:\n  - id: inv_7c2d4\n    name: Société Générale ".encode() + b"caf\xe9\n",
            "3:31: not valid UTF-8 (byte 0xe9)",
            id="columns-count-characters",
        ),
        pytest.param(
            _ENTRY.encode() + "    name: Müller Caf".encode() + b"\xe9\n",
            "3:21: not valid UTF-8 (byte 0xe9)",
            id="columns-count-characters-too",
        ),
        pytest.param(
            b"invites:\n  - id: inv_1\n    name: Caf\xe9\n",
            "3:14: not valid UTF-8 (byte 0xe9)",
            id="no-bom",
        ),
        pytest.param(
            b"\xef\xbb\xbfinvites:\n  - id: inv_1\n    name: Caf\xe9\n",
            "3:14: not valid UTF-8 (byte 0xe9)",
            id="bom",
        ),
        pytest.param(_ENTRY.encode("utf-16"), "1:1: not valid UTF-8 (byte 0xff)", id="utf-16"),
    ],
)
def test_a_file_not_in_utf8_is_refused_at_its_first_bad_byte(
    tmp_path: Path, data: bytes, said: str
) -> None:
    path = tmp_path / "team.yaml"
    path.write_bytes(data)
    assert problems(path) == [f"{path}:{said}; save the file as UTF-8"]


@pytest.mark.parametrize(
    ("data", "at"),
    [
        # A stray control character pasted from a PDF or a terminal.
        (b"invites:\n  - id: inv_8f2k1\n    name: Acme\x07 Holdings Ltd\n", "3:15"),
        (_ENTRY.encode() + b"    name: A\x07B\n", "3:12"),
    ],
)
def test_a_control_character_is_named_where_it_is(tmp_path: Path, data: bytes, at: str) -> None:
    path = tmp_path / "team.yaml"
    path.write_bytes(data)
    assert problems(path) == [
        f"{path}:{at}: control character U+0007 is not allowed in YAML; remove it"
    ]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "invites:\n"
            "  - id: inv_8f2k1\n"
            "    groups: [emea, enterprise\n"
            "  - id: inv_3m9q7\n"
            "    name: Müller & Söhne GmbH\n",
            id="mid-file",
        ),
        pytest.param(
            "invites:\n  - id: inv_8f2k1\n    groups: [emea, enterprise\n",
            id="end-of-file",
        ),
    ],
)
def test_unclosed_bracket_points_at_the_line_that_opened_it(
    write_yaml: WriteYaml, text: str
) -> None:
    path = write_yaml("bracket.yaml", text)

    problem = only_problem(path)

    assert problem.path == str(path)
    assert "flow sequence" in problem.message
    assert "']'" in problem.message
    # The `[` opened on line 3, column 13: that is where the fix goes.
    assert problem.line == 3 or "line 3, column 13" in problem.message, str(problem)


# -- a whole run -------------------------------------------------------------------------


def test_every_problem_of_a_run_is_reported_together_in_order(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    a = write_yaml(
        "invites/a.yaml",
        "invites:\n  - id: inv_8f2k1\n    phone: +442079460000\n    emial: x@acme.example\n",
    )
    b = write_yaml(
        "invites/b.yaml", "invites:\n  - id: inv_3m9q7\n    name: B\n      email: b@b.example\n"
    )
    c = write_yaml("invites/sub/c.yml", "invites:\n  - id: inv_8f2k1\n    name: NO\n")
    write_yaml("invites/sub/d.yaml", "invites:\n  - id: inv_fine\n")
    missing = tmp_path / "elsewhere"

    with pytest.raises(InputError) as info:
        load(tmp_path / "invites", missing)

    problems = info.value.problems
    assert [(p.path, p.line) for p in problems] == [
        (str(missing), 0),  # about the path itself; "elsewhere" sorts before "invites/..."
        (str(a), 3),
        (str(a), 4),
        (str(b), 4),
        (str(c), 2),
        (str(c), 3),
    ]
    assert problems == sorted(problems)
    # The error's text is the list a user sees: one `path:line:column: message` per line.
    assert str(info.value).splitlines() == [str(p) for p in problems]
    assert str(problems[0]) == f"{missing}: no such file or directory"  # no made-up position
    assert "already defined" in problems[4].message
    assert f"{a}:2" in problems[4].message


# -- finding files ------------------------------------------------------------------------


def test_directory_is_read_recursively_in_sorted_order_yaml_and_yml_only(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    write_yaml("invites/zeta.yaml", "invites:\n  - id: inv_z\n")
    write_yaml("invites/beta.yml", "invites:\n  - id: inv_b\n")
    write_yaml("invites/apac/korea.yaml", "invites:\n  - id: inv_k\n")
    write_yaml("invites/alpha.yaml", "invites:\n  - id: inv_a\n")
    # Neighbours that are not desired state; each would fail if it were read as YAML.
    write_yaml("invites/README.md", "# Invites\n\n- id: [unclosed\n")
    write_yaml("invites/notes.txt", "invites: {broken\n")
    write_yaml("invites/alpha.yaml.bak", "invites:\n  - id: inv_a\n")
    write_yaml("invites/apac/draft.json", '{"invites": 1}')
    root = tmp_path / "invites"

    state = load(root)

    assert state.files == [
        str(root / "alpha.yaml"),
        str(root / "apac" / "korea.yaml"),
        str(root / "beta.yml"),
        str(root / "zeta.yaml"),
    ]
    assert [i.id for i in state.invites] == ["inv_a", "inv_k", "inv_b", "inv_z"]


def test_file_named_directly_and_through_its_directory_is_read_once(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    path = write_yaml("invites/a.yaml", "invites:\n  - id: inv_a\n")

    state = load(tmp_path / "invites", path)

    assert [i.id for i in state.invites] == ["inv_a"]


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("    name: 2024-01-02", 'YAML reads 2024-01-02 as a date; put it in quotes: "2024-01-02"'),
        ("    name: 2024-01-02 10:30:00", "YAML reads 2024-01-02 10:30:00 as a date and time;"),
        ("    name: NO", "YAML reads NO as a boolean (false);"),
        ("    name: 1.5e+3", "YAML reads 1.5e+3 as a number (1500.0);"),
        ("    yes: x", 'YAML reads the key yes as a boolean (true); put it in quotes: "yes"'),
        ("    2024-01-02: x", "YAML reads the key 2024-01-02 as a date;"),
        ("    12:30: x", "YAML reads the key 12:30 as a number (750);"),
        ("    ~: x", "YAML reads the key ~ as empty;"),
        ("    null: x", "YAML reads the key null as empty;"),
    ],
)
def test_messages_say_values_as_written_never_as_python_reprs(
    write_yaml: WriteYaml, line: str, shown: str
) -> None:
    path = write_yaml("reprs.yaml", "invites:\n  - id: inv_8f2k1\n" + line + "\n")

    messages = [p.message for p in problems_of(path)]

    assert any(shown in message for message in messages), messages
    for python in ("datetime", "True", "False", "None", "NoneType", "bool "):
        assert not any(python in message for message in messages), messages


# From test_invite_files_found_and_read.py:
# Which files a run reads, and where it says their invites and problems are.
#
# A user fixes a file at the line:column a message names: an invite list that
# came in through a YAML merge key must still point at the lines it was written on.


def problem_lines_of(paths: list[str]) -> list[str]:
    return [str(problem) for problem in problems_of(*paths)]


def placed(text: str) -> tuple[list[tuple[str, int, int]], list[str]]:
    invites, problems = load_text(text, "f.yaml")
    return [(i.id, i.source.line, i.source.column) for i in invites], [str(p) for p in problems]


TO_QUOTE = '`name` must be text, but YAML reads 12:30 as a number (750); put it in quotes: "12:30"'


@pytest.mark.parametrize(
    ("text", "invites", "problems"),
    [
        pytest.param(
            "<<: {invites: [{id: inv_a, name: Acme}, {id: inv_b, name: 12:30}, 12:30]}\n",
            [("inv_a", 1, 16), ("inv_b", 1, 41)],
            [
                f"f.yaml:1:59: {TO_QUOTE}",
                "f.yaml:1:67: each invite entry must be a mapping, not a number "
                "(start each entry with `- id: ...`)",
            ],
            id="on-one-line",
        ),
        pytest.param(
            "<<:\n  invites:\n    - id: inv_a\n      name: Acme\n"
            "    - id: inv_b\n      name: 12:30\n",
            [("inv_a", 3, 7), ("inv_b", 5, 7)],
            [f"f.yaml:6:13: {TO_QUOTE}"],
            id="as-a-block",
        ),
        pytest.param(
            "<<: {invites: [{id: 'bad id'}]}\n",
            [("bad id", 1, 16)],
            [
                "f.yaml:1:21: `id`: 'bad id' is not a valid inviteId "
                "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
            ],
            id="an-invalid-id-at-the-id",
        ),
    ],
)
def test_invites_merged_in_are_placed_where_written(
    text: str, invites: list[tuple[str, int, int]], problems: list[str]
) -> None:
    assert placed(text) == (invites, problems)


def test_a_directory_named_like_a_yaml_file_is_not_read_as_one(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    write_yaml("invites/a.yaml", "invites:\n  - id: inv_a\n")
    write_yaml("invites/archive.yaml/b.yaml", "invites:\n  - id: inv_b\n")

    state = load_desired_state([str(tmp_path / "invites")])

    assert state.files == [
        str(tmp_path / "invites" / "a.yaml"),
        str(tmp_path / "invites" / "archive.yaml" / "b.yaml"),
    ]


def test_a_missing_default_directory_says_how_to_name_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reconciler.yaml").write_text("max_changes: 5\n", encoding="utf-8")

    assert problem_lines_of(["invites"]) == [
        "invites: no such file or directory (read when no PATH is given and reconciler.yaml "
        "sets no `paths`; pass a PATH, or set `paths:` in reconciler.yaml)"
    ]
    assert problem_lines_of(["invitse"]) == ["invitse: no such file or directory"]


def test_with_no_reconciler_yaml_the_message_names_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 39, row 6: from inside a repository's subdirectory, every directory up to the top.
    git(tmp_path, "init", "--quiet")
    (tmp_path / "invites").mkdir()
    monkeypatch.chdir(tmp_path / "invites")
    assert problem_lines_of(["invites"]) == [
        "invites: no such file or directory (read when no PATH is given and no "
        f"reconciler.yaml sets `paths`; looked for reconciler.yaml in {tmp_path / 'invites'}, "
        f"{tmp_path} (the repository's top), and found none; pass a PATH, or run from the "
        "directory of your reconciler.yaml or below it)"
    ]


def test_a_directory_without_invite_files_is_named_without_a_position(
    write_yaml: WriteYaml, tmp_path: Path
) -> None:
    write_yaml("empty/README.md", "Put invite files here.\n")
    write_yaml("empty/old/invites.json", "{}")

    (problem,) = problem_lines_of([str(tmp_path / "empty")])

    assert problem == (
        f"{tmp_path / 'empty'}: no *.yaml or *.yml files in this directory (reconciler.yaml, "
        "files and directories whose names start with a dot, and what git ignores are not "
        "invite files)"
    )


def test_a_file_over_the_size_bound_is_refused_and_one_at_it_is_read(
    write_yaml: WriteYaml, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "invites:\n  - id: inv_a\n"
    path = write_yaml("sized.yaml", text)

    monkeypatch.setattr(desired, "MAX_FILE_BYTES", len(text))
    invites, problems = load_file(path)
    assert [i.id for i in invites] == ["inv_a"] and problems == []

    monkeypatch.setattr(desired, "MAX_FILE_BYTES", len(text) - 1)
    invites, problems = load_file(path)
    assert invites == []
    assert problems == [
        FileProblem(str(path), 1, 1, "larger than 256 MiB; split it into several files")
    ]


def test_a_path_that_cannot_be_read_is_a_problem_at_its_start(tmp_path: Path) -> None:
    invites, problems = load_file(tmp_path)

    assert invites == []
    assert problems == [
        FileProblem(str(tmp_path), 1, 1, "cannot read: it is a directory, not a regular file")
    ]


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_leaves_the_garbage_collector_as_it_was(
    write_yaml: WriteYaml, enabled: bool
) -> None:
    path = write_yaml("gc.yaml", "invites:\n  - id: inv_a\n")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        load_file(path)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    # No writer: opening it the ordinary way would block for ever.
    path = tmp_path / "team.yaml"
    os.mkfifo(path)
    assert problems(path) == [
        f"{path}:1:1: cannot read: it is a FIFO (named pipe), not a regular file"
    ]


# From test_values_on_one_line.py:
# Text values are one line: a `|` block's line break never reaches the platform.
#
# `name: |` followed by the name on the next line reads as "Acme Holdings Ltd\n";
# before the schema's `line` rule it was planned and sent with the line break.


BLOCKS = """\
invites:
  - id: inv_8f2k1
    name: |
      Acme Holdings Ltd
    primaryContact:
      name: >
        Jane Doe
      email: jane@acme.example
    groups: [emea, "enterprise\\tEU", "vip\\u0085"]
"""


def test_a_block_scalar_name_is_refused_where_it_was_written(write_yaml: WriteYaml) -> None:
    path = write_yaml("invites.yaml", BLOCKS)

    found = [(p.line, p.column, p.message) for p in problems_of(path)]

    assert found == [
        (
            3,
            11,
            "`name`: 'Acme Holdings Ltd\\n' holds a line break; write the value on one "
            "line, plain or quoted",
        ),
        (
            6,
            13,
            "`primaryContact.name`: 'Jane Doe\\n' holds a line break; write the value on "
            "one line, plain or quoted",
        ),
        (9, 20, "`groups`: 'enterprise\\tEU' holds a tab; use spaces"),
        (9, 38, "`groups`: 'vip\\x85' holds control character U+0085; remove it"),
    ]


def test_names_in_any_script_are_one_line_text(write_yaml: WriteYaml) -> None:
    path = write_yaml(
        "invites.yaml",
        "invites:\n"
        "  - id: inv_1\n"
        "    name: Müller & Søn GmbH — Zürich\n"
        "  - id: inv_2\n"
        "    name: 株式会社サンプル 🚀\n"
        "  - id: inv_3\n"
        "    name: شركة المثال\n"
        "    primaryContact: {name: Zoë O'Brien-Ñúñez, email: zoe@example.com}\n",
    )

    assert len(load(path).invites) == 3  # no problem: the run would stop


def test_validate_exits_1_and_plan_sends_nothing(write_yaml: WriteYaml, tmp_path: Path) -> None:
    write_yaml("invites/a.yaml", BLOCKS)

    # validate never sends anything, so it never says "nothing was sent" (issue 39, row 7).
    closing = {"validate": "Found 4 problems.", "plan": "Found 4 problems; nothing was sent."}
    for args in (("validate",), ("plan", "--sandbox")):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines()[0].startswith("invites/a.yaml:3:11: `name`:")
        assert result.stderr.splitlines()[-1] == closing[args[0]]
        assert "Acme Holdings Ltd" not in result.stdout


# -- files read elsewhere (Ansible's controller) ------------------------------------


def test_files_read_elsewhere_get_every_check_with_their_own_paths() -> None:
    first = "invites:\n  - id: inv_1\n    phone: +442079460000\n"
    second = "invites:\n  - id: inv_2\n  - id: inv_1\n"
    with pytest.raises(InputError) as info:
        load_texts([("files/a.yaml", first), ("files/b.yaml", second)])
    shown = [str(p) for p in info.value.problems]
    assert shown[0].startswith("files/a.yaml:3:12: ")
    assert shown[1] == "files/b.yaml:3:5: invite id `inv_1` is already defined at files/a.yaml:2"
    state = load_texts([("a.yaml", "invites:\n  - id: inv_1\n    name: Acme\n")])
    assert [i.id for i in state.invites] == ["inv_1"] and state.files == ["a.yaml"]


# -- each entry as it is read: ids typed on the command line, fields as written, one normal
# form, nothing invisible ------------------------------------------------------------------

RULE = "1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone"


def test_good_ids_pass() -> None:
    refuse_bad_ids(["inv_1", "INV-2.a", "x" * 128], "--target")


def test_bad_ids_are_named_once_each_in_the_order_given() -> None:
    with pytest.raises(ReconcilerError) as refused:
        refuse_bad_ids(["inv_1", "inv 2", "..", "inv 2", "a/b"], "--target")
    assert str(refused.value) == (
        f"--target 'inv 2', '..', 'a/b': not a valid invite id ({RULE}); nothing was read"
    )


@pytest.mark.parametrize(("count", "tail"), [(10, ""), (11, " and 1 more"), (25, " and 15 more")])
def test_ten_bad_ids_are_shown_and_the_rest_counted(count: int, tail: str) -> None:
    bad = [f"bad id {n}" for n in range(count)]
    with pytest.raises(ReconcilerError) as refused:
        refuse_bad_ids(bad, "--target")
    shown = ", ".join(repr(b) for b in bad[:10])
    assert str(refused.value) == (
        f"--target {shown}{tail}: not a valid invite id ({RULE}); nothing was read"
    )


def test_an_entry_keeps_its_fields_in_the_order_written_and_drops_the_reconciler_keys() -> None:
    text = (
        "invites:\n"
        "  - id: inv_1\n    attachments: [deed]\n    resendOnChange: true\n"
        "    phone: '+442079460000'\n"
        "  - phone: '+442079460001'\n    id: inv_2\n    attachments: [deed]\n"
    )
    invites, problems = load_text(text, "t.yaml")
    assert problems == []
    assert [(i.id, list(i.fields.items()), i.resend_on_change) for i in invites] == [
        ("inv_1", [("attachments", ["deed"]), ("phone", "+442079460000")], True),
        ("inv_2", [("phone", "+442079460001"), ("attachments", ["deed"])], False),
    ]


# One normal form, nothing invisible.
def test_text_from_the_files_is_taken_in_nfc() -> None:
    text = (
        "invites:\n  - id: inv_1\n    name: Cafe\u0301 Ltd\n"
        "    primaryContact: {name: Zoe\u0308, email: z@x.example}\n    groups: [e\u0301]\n"
    )
    (invite,), problems = load_text(text, "a.yaml")
    assert problems == []
    assert invite.fields == {
        "name": "Caf\u00e9 Ltd",
        "primaryContact": {"name": "Zo\u00eb", "email": "z@x.example"},
        "groups": ["\u00e9"],
    }


@pytest.mark.parametrize(
    ("char", "said"),
    [
        ("\\u200B", "holds U+200B ZERO WIDTH SPACE, which does not show on screen"),
        ("\\u00A0", "holds U+00A0 NO-BREAK SPACE, which looks like a space but is not one"),
        ("\\u2029", "holds U+2029 PARAGRAPH SEPARATOR, a line break; write the value on one line"),
        ("\\u034F", "holds U+034F COMBINING GRAPHEME JOINER, which does not show"),
        ("\\U000E0041", "holds U+E0041 TAG LATIN CAPITAL LETTER A, which does not show"),
    ],
)
def test_an_invisible_character_is_refused_at_its_place_with_the_fix(char: str, said: str) -> None:
    text = f'invites:\n  - id: inv_1\n    groups: [emea, "a{char}b"]\n'
    _, problems = load_text(text, "a.yaml")
    (problem,) = problems
    assert (problem.line, problem.column) == (3, 20)
    assert problem.message.startswith("`groups`: 'a\\") and said in problem.message


def test_every_kind_of_invisible_character_in_a_value_is_said_at_once() -> None:
    text = 'invites:\n  - id: inv_1\n    name: "Acme\u00a0Holdings\u200b Ltd\u00a0plc"\n'
    _, problems = load_text(text, "a.yaml")
    assert [(p.line, p.message.partition("' holds ")[2][:27]) for p in problems] == [
        (3, "U+00A0 NO-BREAK SPACE, whic"),
        (3, "U+200B ZERO WIDTH SPACE, wh"),
    ]


def test_joiners_may_be_written_and_a_control_character_is_reported_once() -> None:
    text = (
        'invites:\n  - id: inv_1\n    name: "علی\\u200cرضا"\n    email: "a\\u200b\\x07@b.example"\n'
    )
    _, problems = load_text(text, "a.yaml")
    (problem,) = problems  # the schema's refusal of the email; not a second one for U+200B
    assert problem.line == 4 and "email" in problem.message


def test_the_schema_judges_the_nfc_form_that_is_sent() -> None:
    # Two spellings of one group are one group; U+0958 is two characters in NFC.
    devanagari_qa = "\\u0958" * 150
    text = (
        'invites:\n  - id: inv_1\n    groups: ["\\u00e9", "e\\u0301"]\n'
        f'  - id: inv_2\n    name: "{devanagari_qa}"\n'
    )
    _, problems = load_text(text, "a.yaml")
    assert [(p.line, p.message) for p in problems] == [
        (3, "`groups` lists the same item twice; it is a set"),
        (5, "`name` must be at most 200 characters"),
    ]


def test_a_long_run_of_combining_marks_is_refused_without_normalising_it() -> None:
    # NFC reorders a run of combining marks in quadratic time: 100,000 of them, alternating
    # two classes, took seconds for one value, minutes for a file of such names.
    many = "\\u0301\\u0316" * 50_000
    few = "\\u0316\\u0301" * 16
    sorted_run = "\\u0316" * 31
    text = (
        f'invites:\n  - id: inv_1\n    name: "a{many}"\n'
        f'  - id: inv_2\n    groups: ["a{many}"]\n'
        '  - id: inv_3\n    name: "Zalgo\\u0301\\u0316\\u0301\\u0316"\n'
        f'  - id: inv_4\n    name: "Z{few}"\n'
        f'  - id: inv_5\n    name: "Z{sorted_run}"\n'  # in NFC already: refused alike
    )
    real = unicodedata.normalize, unicodedata.is_normalized
    asked: list[tuple[str, int]] = []

    def counted(function: Any) -> Any:
        def call(form: str, value: str) -> Any:
            asked.append((function.__name__, len(value)))
            return function(form, value)

        return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(unicodedata, "normalize", counted(real[0]))
        patch.setattr(unicodedata, "is_normalized", counted(real[1]))
        _, problems = load_text(text, "a.yaml")
    # NFC itself is never asked of the long runs (is_normalized's quick check is linear).
    assert max(n for name, n in asked if name == "normalize") < 1000
    assert [(p.line, p.column) for p in problems] == [(3, 11), (5, 14), (9, 11), (11, 11)]
    assert problems[0].message == "`name` must be at most 200 characters"
    assert problems[1].message.startswith("`groups`: 'a\u0301")
    assert problems[1].message.endswith(
        " holds 100,000 combining marks in a row (at most 30); no text needs so many"
    )
    assert problems[2].message.startswith("`name`: 'Z\u0316\u0301")
    assert problems[2].message.endswith(
        " holds 32 combining marks in a row (at most 30); no text needs so many"
    )
    assert " holds 31 combining marks in a row" in problems[3].message


def test_a_refused_value_shared_through_an_alias_is_reported_once() -> None:
    text = 'invites:\n  - id: inv_1\n    groups: &g ["a\\u202eb"]\n  - id: inv_2\n    groups: *g\n'
    _, problems = load_text(text, "a.yaml")
    assert len(problems) == 1 and "U+202E" in problems[0].message


# Sixteen marks: two in a row are more than MAX_MARKS_IN_A_ROW, one alone is not.
_TEXT = st.lists(
    st.sampled_from([" ", "a", "\u00e9", "e\u0301", "\u200b", "\u00a0", "\u0301" * 16]),
    min_size=1,
    max_size=6,
).map("".join)


@given(
    name=_TEXT,
    groups=st.lists(_TEXT, max_size=3, unique_by=lambda t: unicodedata.normalize("NFC", t)),
    contact=_TEXT,
)
def test_what_is_found_of_an_entry_is_what_each_of_its_values_holds(
    name: str, groups: list[str], contact: str
) -> None:
    # A space at an end, NFC, an invisible character, too many marks in a row.
    entry: dict[str, object] = {"id": "inv_1", "name": name, "groups": groups}
    entry["primaryContact"] = {"name": contact, "email": "z@x.example"}
    text = "invites:\n  - " + json.dumps(entry) + "\n"
    values = [name, *groups, contact]
    try:
        state = load_texts([("a.yaml", text)], Rules())
    except InputError as error:
        invisible = [v for v in values if NOT_IN_TEXT.search(v)]
        marked = [v for v in values if marks_in_a_row(v) > MAX_MARKS_IN_A_ROW]
        assert invisible or marked, str(error)
        said = str(error)
        assert ("does not show on screen" in said or "looks like a space" in said) == bool(
            invisible
        )
        assert ("combining marks in a row" in said) == bool(marked)
        return
    assert not any(NOT_IN_TEXT.search(v) for v in values)
    assert not any(marks_in_a_row(v) > MAX_MARKS_IN_A_ROW for v in values)
    spaced = {w for w in map(str, state.warnings) if "surrounding-space" in w}
    assert len(spaced) == sum(v[:1] == " " or v[-1:] == " " for v in values)
    (invite,) = state.invites
    assert invite.fields["name"] == unicodedata.normalize("NFC", name)
    assert list(invite.fields["groups"]) == [unicodedata.normalize("NFC", g) for g in groups]


# -- which invites a run plans: --target, --exclude (issue 39, row 6) ------------------------

IDS = ["inv_8f2k1", "inv_3m9q7", "inv_7c2d4"]


def _invites() -> list[DesiredInvite]:
    return [
        DesiredInvite(id=i, fields={}, source=SourceLocation("invites/a.yaml", n + 2))
        for n, i in enumerate(IDS)
    ]


@pytest.mark.parametrize(
    ("selection", "said"),
    [
        (
            Selection(targets=("inv_8f2k2",)),
            "--target inv_8f2k2: no invite with this id in the files read (invites); "
            "did you mean inv_8f2k1?",
        ),
        (
            Selection(excludes=("inv_3m9q8", "nothing_like_it", "inv_7c2d5")),
            "--exclude inv_3m9q8, nothing_like_it, inv_7c2d5: no invite with these ids in the "
            "files read (invites); did you mean inv_3m9q7 for inv_3m9q8, inv_7c2d4 for "
            "inv_7c2d5?",
        ),
        (
            Selection(targets=("zzz",)),
            "--target zzz: no invite with this id in the files read (invites)",
        ),
        (
            Selection(targets=("inv_8f2k\x1b[2J",)),
            "--target inv_8f2k\\x1b[2J: no invite with this id in the files read (invites); "
            "did you mean inv_8f2k1?",
        ),
    ],
    ids=["typo", "several", "nothing-near", "escaped"],
)
def test_an_unknown_id_is_refused_with_the_id_meant(selection: Selection, said: str) -> None:
    with pytest.raises(ReconcilerError) as refused:
        select_invites(_invites(), selection, "invites")
    assert str(refused.value) == said


def test_known_ids_select_in_file_order() -> None:
    chosen = select_invites(_invites(), Selection(targets=("inv_7c2d4", "inv_8f2k1")), "x")
    assert [i.id for i in chosen] == ["inv_8f2k1", "inv_7c2d4"]
