"""The invite as this tool models it: one module, ``invite``, read top to bottom.

Its values (text, ``Contact``, ``IdentifierSet``), the field kinds that own their rules
(``TextKind``, ``ContactKind``, ``SetKind``), the fields read from the invite schema, the
invite as the files want it and as the server holds it (``DesiredInvite``,
``CurrentInvite``), and what became of a read (``Done``, ``Failed``, ``NotRun``).

Imported on the loader's path, whose start-up is benchmarked: standard library only.
"""
