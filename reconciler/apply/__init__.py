"""A plan carried out: the writes, the audit log, and stopping on Ctrl-C."""
