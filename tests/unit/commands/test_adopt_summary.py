"""adopt's Markdown summary (reconciler.commands.adopt_summary): what was not adopted says
why, in the words the terminal uses."""

from __future__ import annotations

from reconciler.commands.adopt_summary import summary_markdown
from reconciler.desired.rewrite import NO_VALUE, SHARED, Refused, Rewritten
from reconciler.model.values import IdentifierSet

_ODD_LAYOUT = "it is written in a layout adopt does not edit"


def test_each_value_not_adopted_says_what_and_why() -> None:
    rewritten = Rewritten(
        "invites: []\n",
        refused=[
            Refused(3, "inv_zoe", "email", "zoë@café.example", SHARED),
            Refused(9, "inv_ana", "phone", None, NO_VALUE),
            Refused(14, "inv_bo", "groups", IdentifierSet(["emea", "dach"]), _ODD_LAYOUT),
            Refused(20, "inv_old", None, "accepted", SHARED),
        ],
    )
    body = summary_markdown([("invites/emea.yaml", rewritten)], [], None)
    section = body.split("### Not adopted (4)\n\n", 1)[1].splitlines()
    assert section == [
        "- <code>inv&#95;zoe</code> <code>email</code> (<code>invites/emea.yaml</code>:3): "
        'not edited to <code>"zoë&#64;café.example"</code>: ' + SHARED,
        "- <code>inv&#95;ana</code> <code>phone</code> (<code>invites/emea.yaml</code>:9): "
        "not edited to (none): " + NO_VALUE,
        "- <code>inv&#95;bo</code> <code>groups</code> (<code>invites/emea.yaml</code>:14): "
        'not edited to <code>&#91;"emea", "dach"&#93;</code>: ' + _ODD_LAYOUT,
        "- <code>inv&#95;old</code> <code>entry</code> (<code>invites/emea.yaml</code>:20): "
        "not removed: " + SHARED,
    ]
