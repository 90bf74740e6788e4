"""p: `validate` of 20,000 invites (one file) without and with five policies, side by side.

Issue 38: with five policies, within 1.5x of validate without. The policies are of the
kinds docs/policies.md shows: one on the groups (if/then, `contains`), two on text each invite
has its own value of (`pattern`, `not`), one on the e-mail, one on a set's size. They
pass on every invite, so what is measured is the checking, not the printing.
"""

from __future__ import annotations

from benchmarks.scenarios.common import Context, dataset, describe
from benchmarks.targets import Row, Target

RATIO = Target(1.5, "×")
POLICIES = """\
policies:
  - name: us-needs-ein
    message: invites in group `us` must require the EIN confirmation letter
    schema:
      if: {properties: {groups: {contains: {const: us}}}, required: [groups]}
      then: {properties: {attachments: {contains: {const: ein-letter}}}, required: [attachments]}
  - name: no-free-mail
    message: the invitee's e-mail must not be a free-mail address
    schema: {properties: {email: {not: {pattern: "@(gmail|yahoo|outlook|hotmail)\\\\."}}}}
  - name: contact-not-free-mail
    severity: warning
    message: the primary contact's e-mail should not be a free-mail address
    schema:
      properties:
        primaryContact: {properties: {email: {not: {pattern: "@(gmail|yahoo|outlook)\\\\."}}}}
  - name: ids-of-this-platform
    message: an invite id starts with inv_
    schema: {properties: {id: {pattern: "^inv_"}}}
  - name: few-add-ons
    message: at most three add-ons per invite
    schema: {properties: {addOns: {maxItems: 3}}}
"""


def run(context: Context) -> list[Row]:
    n = context.sizes.large
    data = dataset(context, "validate-single", n, "single")
    config = context.work / "policies.yaml"
    config.write_text(POLICIES, encoding="utf-8")
    bare = context.runner.run(
        f"validate-bare-{n}", ["validate", str(data.root)], None, context.work
    )
    ruled = context.runner.run(
        f"validate-policies-{n}",
        ["validate", "--config", str(config), str(data.root)],
        None,
        context.work,
    )
    name = f"p validate {n:,}, one file, five policies"
    context.notes.append(describe(f"p validate {n:,}, no policy", bare))
    context.notes.append(describe(name, ruled))
    return [
        Row(name, "client CPU without policies", bare.cpu, "s"),
        Row(name, "client CPU with five policies", ruled.cpu, "s"),
        Row(name, "  ratio (with / without)", ruled.cpu / bare.cpu, "×", RATIO),
        Row(name, "  peak RSS with", ruled.peak_mb, "MB"),
    ]
