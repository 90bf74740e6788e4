"""`reconcile sandbox` names the ids it serves when it starts (issue 39, row 2): a first
`reconcile export ID` has something to ask for. Up to 20, then how many more."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.helpers import RECONCILE, clean_env

from reconciler.commands.sandbox import _served_ids

pytestmark = pytest.mark.e2e


def _banner(*args: str) -> list[str]:
    with subprocess.Popen(
        [*RECONCILE, "sandbox", "--port", "0", *args],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stderr is not None
        lines: list[str] = []
        try:
            while not lines or not lines[-1].startswith("Press Ctrl-C"):
                line = server.stderr.readline()
                assert line, f"the sandbox ended: {lines}"
                lines.append(line.rstrip("\n"))
        finally:
            server.terminate()
    return lines


def test_the_bundled_sandbox_names_its_ids() -> None:
    lines = _banner()
    assert lines[1].startswith("Invite ids: inv_8f2k1, inv_3m9q7, ")
    assert lines[1].endswith(", inv_5q5q5.")
    assert lines[3].startswith("  export RECONCILER_BASE_URL=http://127.0.0.1:")


def test_beyond_twenty_ids_it_says_how_many_more(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    invites = [
        {"id": f"inv_{n:02}", "status": "pending", "name": f"B {n}", "email": f"b{n}@x.example"}
        for n in range(25)
    ]
    state.write_text(json.dumps(invites), encoding="utf-8")
    lines = _banner("--state", str(state))
    assert lines[1] == (
        "Invite ids: " + ", ".join(f"inv_{n:02}" for n in range(20)) + ", and 5 more."
    )


def test_an_id_is_shown_escaped_and_an_empty_state_says_none() -> None:
    assert _served_ids({"inv_\x1b[2J": {}}) == "Invite ids: inv_\\x1b[2J."
    assert _served_ids({}) == "Invite ids: none."
