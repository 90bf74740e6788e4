"""What the ansible-playbook end-to-end tests share: the tools' place, a play of one task of
the collection, its run and result, and what the server received."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from reconciler.sandbox import Sandbox
from support.helpers import REPO

ANSIBLE_BIN = Path(sys.executable).parent


def ansible_env(env: dict[str, str], home: Path, **more: str) -> dict[str, str]:
    """``env`` with Ansible's own state under ``home`` and the collection from this checkout."""
    return dict(
        env,
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_HOME=str(home / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(home / "ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_RETRY_FILES_ENABLED="false",
        **more,
    )


def require_ansible() -> None:
    """Skip without ansible-core, except under CI, which installs it."""
    if (ANSIBLE_BIN / "ansible-playbook").exists():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("ansible-playbook is not installed, and CI=true: .ci/run installs it")
    pytest.skip('ansible-core is not installed (pip install ".[ansible]"); CI runs these')


class Played:
    """One ansible-playbook run: its exit code, output, and the result the play saved."""

    def __init__(self, process: subprocess.CompletedProcess[str], folder: Path) -> None:
        self.code = process.returncode
        self.stdout = process.stdout
        self.stderr = process.stderr
        saved = folder / "result.json"
        self.result: dict[str, Any] = json.loads(saved.read_text()) if saved.exists() else {}
        saved.unlink(missing_ok=True)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def recap(self, **counts: int) -> bool:
        line = next(x for x in self.stdout.splitlines() if x.startswith("localhost "))
        return all(f"{name}={count} " in line + " " for name, count in counts.items())


def playbook(folder: Path, *args: str, env: dict[str, str]) -> Played:
    """ansible-playbook run in ``folder`` with ``args``, as an operator would."""
    process = subprocess.run(
        [str(ANSIBLE_BIN / "ansible-playbook"), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return Played(process, folder)


def play_text(
    options: str,
    hosts: str = "localhost",
    keywords: str = "",
    keep: bool = True,
    module: str = "kyb.invites.invites",
) -> str:
    """A play of one ``module`` task with ``options`` (and task ``keywords``), its result kept
    in result.json by the first host (a task that writes even in check mode, and shows no
    diff of its own)."""
    extra = textwrap.indent(textwrap.dedent(keywords).strip(), " " * 6)
    task = f"""\
    - name: converge
      {module}:
{textwrap.indent(textwrap.dedent(options).strip(), " " * 8)}
      register: converged
      ignore_errors: true
{extra + chr(10) if extra else ""}"""
    kept = """\
    - name: keep the result
      ansible.builtin.copy:
        content: "{{ converged | to_nice_json }}"
        dest: "{{ playbook_dir }}/result.json"
        mode: "0600"
      check_mode: false
      diff: false
      changed_when: false
      run_once: true
      no_log: false
"""
    head = f"- hosts: {hosts}\n  gather_facts: false\n  tasks:\n"
    return head + task + (kept if keep else "")


def patches(server: Sandbox) -> int:
    return len(server.stats.calls("PATCH"))


def resends(server: Sandbox) -> int:
    return sum(server.store.resends.values())
