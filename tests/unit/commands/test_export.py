"""`reconcile export`: what it writes of the invites a server returns."""

from __future__ import annotations


# From test_untrusted_inputs.py (what an attacker found after the rebuild).
def test_an_export_never_writes_a_secret_the_server_put_in_a_value(registered_secret: str) -> None:
    from reconciler.api.client import CurrentInvite
    from reconciler.commands.export import render_export

    invite = CurrentInvite("inv_1", "pending", {"name": f"Acme {registered_secret}"})
    text = render_export([invite], "https://api.example", "schemas/invites.schema.json")
    assert registered_secret not in text and "Acme [redacted]" in text
