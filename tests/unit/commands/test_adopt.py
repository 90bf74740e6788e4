"""adopt's Markdown summary (reconciler.commands.adopt): what was not adopted says
why, in the words the terminal uses."""

from __future__ import annotations

from reconciler.commands.adopt import summary_markdown
from reconciler.desired.rewrite import NO_VALUE, SHARED, Refused, Rewritten
from reconciler.desired.state import CANNOT_HOLD
from reconciler.model.invite import IdentifierSet
from reconciler.safetext import quote_value

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


def test_a_reason_quoting_the_platform_s_value_is_escaped_like_the_value() -> None:
    # A value no file can hold is named in the reason: it must not become a link or a
    # mention in the pull request's body.
    value = "[x](https://evil.example) @team\u00a0<b>"
    reason = f"{CANNOT_HOLD}: {quote_value(value)} holds U+00A0 NO-BREAK SPACE"
    rewritten = Rewritten("invites: []\n", refused=[Refused(3, "inv_a", "name", value, reason)])
    body = summary_markdown([("invites/emea.yaml", rewritten)], [], None)
    line = body.split("### Not adopted (1)\n\n", 1)[1].splitlines()[0]
    said = line.split("</code>: ", 3)[-1]
    assert said.startswith("validate would refuse it: ") and "U+00A0 NO-BREAK SPACE" in said
    assert not any(sign in said for sign in "[]@<>")
