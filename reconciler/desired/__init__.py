"""Desired state in: invite files read into `DesiredInvite` records, and which of them a run plans."""
