"""--target and --exclude: an id not in the files is refused, with the nearest ids of the
files when one was likely meant (issue 39, row 6)."""

from __future__ import annotations

import pytest

from reconciler.desired.selection import Selection, select_invites
from reconciler.errors import ReconcilerError
from reconciler.model.invite import DesiredInvite, SourceLocation

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
