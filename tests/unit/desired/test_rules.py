"""The built-in checks: duplicate business names (case, spacing, NFKC), shared e-mails,
text with a space at an end; each a warning, an error or off by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.desired.rules import BUILT_IN, Level, Rules, business_key
from reconciler.desired.state import load_desired_state, load_texts
from reconciler.errors import InputError


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Acme Ltd", "ACME  ltd"),
        ("Acme Ltd", " acme ltd"),
        ("Ａｃｍｅ Ltd", "Acme Ltd"),  # full-width letters: a compatibility form
        ("Straße GmbH", "STRASSE GMBH"),  # casefold, not lower
        ("Acme\u3000Ltd", "Acme Ltd"),  # the ideographic space is a space in NFKC
        ("ACME LİMİTED", "Acme Limited"),  # İ folds to i and a combining dot
        ("Acme Lımıted", "Acme Limited"),  # a Turkish keyboard's lower-case I
        ("Acme\u200d Ltd", "Acme Ltd"),  # a zero-width joiner shows on no screen
        ("Ac\u00adme Ltd", "Acme Ltd"),  # nor does a soft hyphen
        ("Acme\u200e Ltd", "Acme Ltd"),  # nor a left-to-right mark
        ("Acme\ufe0f Ltd", "Acme Ltd"),  # a variation selector is no part of the name
    ],
)
def test_names_that_are_one_business(one: str, other: str) -> None:
    assert business_key(one) == business_key(other)


def test_names_that_differ() -> None:
    assert business_key("Acme Ltd") != business_key("Acme Ltd.")
    assert business_key("Acme Ltd") != business_key("AcmeLtd")


ENTRIES = """\
invites:
  - id: inv_1
    name: Acme Ltd
    email: jane@acme.example
    groups: [emea, " enterprise"]
    primaryContact: {name: "Jane Doe ", email: j@acme.example}
  - id: inv_2
    name: ACME  ltd
    email: JANE@acme.example
"""


FILES = [("invites.yaml", ENTRIES)]  # the checks are the same for files read elsewhere


def test_each_built_in_check_warns_at_its_field() -> None:
    said = [str(w).split("invites.yaml:", 1)[1] for w in load_texts(FILES, Rules()).warnings]
    assert said == [
        "5:20: warning: surrounding-space: `groups`: ' enterprise' starts or ends with a "
        "space, which is sent as is and shows in no UI; remove it",
        "6:28: warning: surrounding-space: `primaryContact.name`: 'Jane Doe ' starts or ends "
        "with a space, which is sent as is and shows in no UI; remove it",
        "8:11: warning: duplicate-name: business name 'ACME  ltd' is the same as the one at "
        "invites.yaml:2 once case, spacing and compatibility forms are ignored "
        "(likely the same business invited twice)",
        "9:12: warning: duplicate-email: 'JANE@acme.example' is also the e-mail of the invite "
        "at invites.yaml:2",
    ]


def test_a_check_raised_to_an_error_fails_and_one_turned_off_says_nothing() -> None:
    levels = {**BUILT_IN, "duplicate-email": "error", "surrounding-space": "off"}
    with pytest.raises(InputError) as caught:
        load_texts(FILES, Rules(levels=levels))
    assert [p.message.split(":")[0] for p in caught.value.errors] == ["duplicate-email"]
    assert [p.message.split(":")[0] for p in caught.value.problems] == [
        "duplicate-name",
        "duplicate-email",
    ]


def test_without_rules_nothing_is_checked_beyond_the_schema() -> None:
    assert load_texts(FILES).warnings == []


CUT = """\
invites:
  - id: inv_1  # the usual comment
    name: Store #12
    email: "store#12@acme.example"
"""


@pytest.mark.parametrize(
    ("level", "said"),
    [
        (
            "warning",
            "3:17: warning: comment-in-value: YAML reads this as 'Store' and a comment from the "
            "`#`; if the `#` is part of the value, quote it whole: 'Store #12'",
        ),
        ("off", None),
    ],
)
def test_a_value_a_comment_cuts_short_is_said_where_the_comment_starts(
    tmp_path: Path, level: Level, said: str | None
) -> None:
    path = tmp_path / "invites.yaml"
    path.write_text(CUT, encoding="utf-8")
    state = load_desired_state([str(path)], Rules(levels={**BUILT_IN, "comment-in-value": level}))
    assert state.invites[0].fields["name"] == "Store"  # what YAML reads, and the plan sends
    assert [str(w).split("invites.yaml:", 1)[1] for w in state.warnings] == ([said] if said else [])


def test_a_value_a_comment_cuts_short_fails_the_run_as_an_error(tmp_path: Path) -> None:
    path = tmp_path / "invites.yaml"
    path.write_text(CUT, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_desired_state([str(path)], Rules(levels={**BUILT_IN, "comment-in-value": "error"}))
    assert [p.message.split(":")[0] for p in caught.value.errors] == ["comment-in-value"]


def test_a_file_that_failed_is_not_read_again_for_values_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "invites.yaml"
    path.write_text(CUT + "    nmae: typo\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_desired_state([str(path)], Rules())
    assert [p.message.split(";")[0] for p in caught.value.problems] == ["unknown field `nmae`"]


def test_duplicates_across_files_name_the_first_file_and_the_value_in_the_second() -> None:
    # Compared once each file is read, against every invite of the files before it.
    first = "invites:\n  - id: inv_1\n    name: Café Ltd\n    email: jane@cafe.example\n"
    second = (
        "# moved here\ninvites:\n"
        "  - id: inv_2\n    email: Jane@Cafe.example\n    name: CAFE\u0301   LTD\n"
        "  - id: inv_3\n    name: Other Ltd\n    email: other@cafe.example\n"
    )
    state = load_texts([("a.yaml", first), ("b.yaml", second)], Rules())
    assert [str(w) for w in state.warnings] == [
        "b.yaml:4:12: warning: duplicate-email: 'Jane@Cafe.example' is also the e-mail of "
        "the invite at a.yaml:2",
        "b.yaml:5:11: warning: duplicate-name: business name 'CAFÉ   LTD' is the same as "
        "the one at a.yaml:2 once case, spacing and compatibility forms are ignored "
        "(likely the same business invited twice)",
    ]


def test_invites_read_before_a_file_stopped_still_count_for_the_files_after_it() -> None:
    # The attack's reproducer: a.yaml stops at a broken entry after a good one.
    first = "invites:\n  - id: a1\n    name: Acme\n    email: x@a.example\n  - id: [unclosed\n"
    second = "invites:\n  - id: b1\n    name: Acme\n    email: x@a.example\n"
    with pytest.raises(InputError) as caught:
        load_texts([("a.yaml", first), ("b.yaml", second)], Rules())
    warned = [str(p) for p in caught.value.problems if not p.is_error]
    assert warned == [
        "b.yaml:3:11: warning: duplicate-name: business name 'Acme' is the same as the one "
        "at a.yaml:2 once case, spacing and compatibility forms are ignored (likely the same "
        "business invited twice)",
        "b.yaml:4:12: warning: duplicate-email: 'x@a.example' is also the e-mail of the "
        "invite at a.yaml:2",
    ]
    assert [p.path for p in caught.value.errors] == ["a.yaml"]
