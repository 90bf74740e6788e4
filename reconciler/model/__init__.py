"""The invite as this tool models it: its fields and their kinds, typed values, the invite
as the files want it and as the server holds it, and what became of a read.

- ``values``: text (``str``), ``Contact``, ``IdentifierSet``; ``nfc``; ``to_json``.
- ``kinds``: ``TextKind``, ``ContactKind``, ``SetKind``, each owning its rules.
- ``fields``: the field list and each field's kind, read from the invite schema.
- ``invite``: ``DesiredInvite``, ``CurrentInvite``, ``SourceLocation``, the id and
  ``resendOnChange`` rules.
- ``outcome``: ``Done``, ``Failed``, ``NotRun``, and ``ReadError``.

One definition of equal, the kinds' own: text in NFC, a set's items as a set, a
contact sub-field by sub-field. What a PATCH carries and what a plan shows
inside a changed field both come from it, with plain set and dict operations.
DeepDiff once computed what a plan shows: a second implementation of that
equality, which had to be tuned (order ignored only at a set's top level, no
pairing of added with removed items, repetitions reported) to agree with it,
and whose import cost more start-up than the rest of the tool's. It is kept in
the tests only, as an independent oracle the kinds' differences are checked
against (``tests/unit/model/test_kinds.py``).

Imported on the loader's path, whose start-up is benchmarked: standard library only.
"""
