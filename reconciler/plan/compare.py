"""Compare one desired invite with the server's copy, field by managed field.

Equal is the field's kind's equal (``reconciler.model.kinds``), and it alone
decides which fields a PATCH carries: a field goes when the value the files
want and the part of the server's value they manage are not the same to the
platform. What a plan shows inside such a field comes from the same kind
(``FieldKind.delta``), so the plan cannot show a change the PATCH would not make.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.model.fields import field_kinds
from reconciler.model.values import Fields, FieldValue


def compare_invite(desired: Mapping[str, FieldValue], current: Mapping[str, FieldValue]) -> Fields:
    """The PATCH body that brings ``current`` to ``desired``: only fields that differ.

    ``desired`` holds only managed fields; anything else on the server is never
    compared or sent.
    """
    kinds = field_kinds()
    patch: Fields = {}
    for name, want in desired.items():
        kind = kinds[name]
        have = current.get(name)
        if kind.differs(want, have):
            patch[name] = kind.patch_value(want, have)
    return patch
