"""Desired state in: invite files read into `DesiredInvite` records; which ones a run plans."""
