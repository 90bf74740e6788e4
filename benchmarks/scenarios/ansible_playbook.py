"""p: 300 invites, every one differing, against a sandbox that allows 20 requests a second
(issue 41), converged from Ansible two ways, each run twice on the same server:

- one `kyb.invites.invites` task (`src:` the invite files): plan, then apply, in-process;
- what a team writes without the collection: a `uri` task for a token, then a `uri` loop
  of one PATCH per invite (no read, no compare), 429s retried with `until:`.

Wall against the floor of each run (the requests the server let through / 20), and the
writes the server received. Skipped, saying so, without ansible-playbook (`pip install
".[ansible]"`).

q (`run_near`): the same 300 invites with the sandbox 20 ms away and no limit (issue 54's
comparison): the task, `reconcile apply` itself, and the `uri` loop, each on a fresh
sandbox; the task's second run too. The collection's figure beside the CLI's and the
loop's, with no target: what a user gains from the task over the loop, and what the task
costs over the command."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

from support.estate import SEED, Dataset
from support.helpers import REPO, sandbox_env

from benchmarks.measure import Measured, RunFailed, _measure
from benchmarks.scenarios.apply_rate_limit import check_applied
from benchmarks.scenarios.common import Context, dataset, describe
from benchmarks.targets import Row, Target
from reconciler.sandbox import Sandbox, SandboxOptions

RATE = 20.0
NEAR = 0.020  # seconds: q, the sandbox as far as a platform in the same region
RATIO = Target(1.2, "×")
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

MODULE_PLAY = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: invites as the files say
      kyb.invites.invites:
        src: {root}
"""

URI_PLAY = """\
- hosts: localhost
  gather_facts: false
  vars_files: [invites.json]
  vars:
    invites_url: "{{{{ lookup('env', 'RECONCILER_BASE_URL') }}}}/public-api/v1/kyb/invites"
  tasks:
    - name: a token
      ansible.builtin.uri:
        url: "{{{{ lookup('env', 'RECONCILER_BASE_URL') }}}}/oauth/token"
        method: POST
        body_format: form-urlencoded
        body:
          grant_type: client_credentials
          scope: kyb:invites:read kyb:invites:write
          client_id: "{{{{ lookup('env', 'RECONCILER_CLIENT_ID') }}}}"
          client_secret: "{{{{ lookup('env', 'RECONCILER_CLIENT_SECRET') }}}}"
        status_code: [200, 201]
      register: token
      no_log: true
    - name: each invite
      ansible.builtin.uri:
        url: "{{{{ invites_url }}}}/{{{{ item.id }}}}"
        method: PATCH
        body_format: json
        body: "{{{{ item | dict2items | rejectattr('key', 'equalto', 'id') | items2dict }}}}"
        headers:
          Authorization: "Bearer {{{{ token.json.data.access_token }}}}"
        status_code: [200, 429]
      loop: "{{{{ invites }}}}"
      loop_control:
        label: "{{{{ item.id }}}}"
      register: patched
      until: patched.status == 200
      retries: 10
      delay: 1
"""


def run(context: Context) -> list[Row]:
    if not ANSIBLE_PLAYBOOK.exists():
        return [Row("p ansible", 'skipped: ansible-core is not installed (".[ansible]")', None)]
    n = context.sizes.ansible_total
    data = dataset(context, "ansible", n, changed=n)
    work = context.work / "ansible-play"
    work.mkdir(parents=True, exist_ok=True)
    (work / "invites.json").write_text(json.dumps({"invites": data.desired}), encoding="utf-8")
    rows: list[Row] = []
    module = f"p one kyb.invites.invites task, {n} invites ({n} differ) @ {RATE:g} r/s"
    rows += _pair(context, module, data, work, MODULE_PLAY.format(root=data.root), ratio=RATIO)
    loop = f"p token + uri loop of PATCHes, {n} invites @ {RATE:g} r/s"
    rows += _pair(context, loop, data, work, URI_PLAY.format(), ratio=None)
    return rows


def run_near(context: Context) -> list[Row]:
    if not ANSIBLE_PLAYBOOK.exists():
        return [Row("q ansible", 'skipped: ansible-core is not installed (".[ansible]")', None)]
    n = context.sizes.ansible_total
    data = dataset(context, "ansible-near", n, changed=n)
    work = context.work / "ansible-near-play"
    work.mkdir(parents=True, exist_ok=True)
    (work / "invites.json").write_text(json.dumps({"invites": data.desired}), encoding="utf-8")
    name = f"q {n} invites ({n} differ), the sandbox {NEAR * 1000:g} ms away"
    options = SandboxOptions(seed=SEED, latency=NEAR)
    rows: list[Row] = []
    with Sandbox(data.server, options=options) as sandbox:
        task = _near_play(context, name, "one kyb.invites.invites task", work, sandbox, data)
        rows.append(task.row)
        again = _near_play(context, name, "  the same task, second run", work, sandbox, data)
        rows.append(again.row)
    with Sandbox(data.server, options=options) as sandbox:
        args = ["apply", "--auto-approve", str(data.root)]
        cli = context.runner.run("ansible-near-cli", args, sandbox, context.work)
        check_applied(name, data, sandbox)
        detail = _writes(sandbox, 0, "changed")
        rows.append(Row(name, "reconcile apply", cli.wall, "s", detail=detail))
        context.notes.append(describe(f"{name}, reconcile apply", cli, sandbox))
    with Sandbox(data.server, options=options) as sandbox:
        (work / "play.yml").write_text(URI_PLAY.format(), encoding="utf-8")
        loop = _play(work, sandbox)
        changed = "changed" if "changed=1" in loop.stdout else "ok"
        detail = _writes(sandbox, 0, changed)
        rows.append(Row(name, "token + uri loop of PATCHes", loop.wall, "s", detail=detail))
        context.notes.append(describe(f"{name}, uri loop", loop, sandbox))
    rows.append(Row(name, "  the task against reconcile apply", task.wall / cli.wall, "×"))
    rows.append(Row(name, "  the uri loop against the task", loop.wall / task.wall, "×"))
    return rows


class _NearRun(NamedTuple):
    wall: float
    row: Row


def _near_play(
    context: Context, name: str, figure: str, work: Path, sandbox: Sandbox, data: Dataset
) -> _NearRun:
    """The task's play against ``sandbox``, every invite as its file says afterwards."""
    (work / "play.yml").write_text(MODULE_PLAY.format(root=data.root), encoding="utf-8")
    patches_before = _done_patches(sandbox)
    measured = _play(work, sandbox)
    check_applied(name, data, sandbox)
    changed = "changed" if "changed=1" in measured.stdout else "ok"
    detail = _writes(sandbox, patches_before, changed)
    context.notes.append(describe(f"{name}, {figure.strip()}", measured, sandbox))
    return _NearRun(measured.wall, Row(name, figure, measured.wall, "s", detail=detail))


def _done_patches(sandbox: Sandbox) -> int:
    return len([r for r in sandbox.stats.calls("PATCH") if r.status == 200])


def _writes(sandbox: Sandbox, patches_before: int, changed: str) -> str:
    patches = _done_patches(sandbox) - patches_before
    return f"{patches} PATCHes; {changed}"


def _pair(
    context: Context, name: str, data: Dataset, work: Path, play: str, ratio: Target | None
) -> list[Row]:
    """The playbook run twice against one sandbox: the first run, then a second one."""
    (work / "play.yml").write_text(play, encoding="utf-8")
    rows = []
    with Sandbox(data.server, options=SandboxOptions(seed=SEED, rate_limit=RATE)) as sandbox:
        patches_before = 0
        for which in ("first run", "second run"):
            before = _statuses(sandbox)
            measured = _play(work, sandbox)
            after = _statuses(sandbox)
            let_through = sum(after[s] - before.get(s, 0) for s in after if s != 429)
            # Writes made: a PATCH refused with 429 and sent again is one write.
            done = [r for r in sandbox.stats.calls("PATCH") if r.status == 200]
            patches = len(done) - patches_before
            patches_before += patches
            if which == "first run" and ratio is not None:
                check_applied(name, data, sandbox)
            floor = let_through / RATE
            changed = "changed" if "changed=1" in measured.stdout else "ok"
            detail = f"floor {floor:.1f} s: {let_through} requests; {patches} PATCHes; {changed}"
            rows.append(Row(name, f"{which}: wall", measured.wall, "s", detail=detail))
            rows.append(Row(name, "  ratio to floor", measured.wall / floor, "×", ratio))
            context.notes.append(describe(f"{name}, {which}", measured, sandbox))
    return rows


def _statuses(sandbox: Sandbox) -> dict[int, int]:
    """Requests answered so far, by status."""
    with sandbox.stats.lock:
        return dict(sandbox.stats.statuses)


def _play(work: Path, sandbox: Sandbox) -> Measured:
    env = sandbox_env(
        sandbox,
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_NOCOLOR="1",
    )
    command = [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", "play.yml"]
    measured = _measure(command, env, work)
    arrivals = [t for t in sandbox.stats.arrivals() if t >= measured.started]
    if arrivals:
        measured.first_request = arrivals[0] - measured.started
        measured.last_request = arrivals[-1] - measured.started
    if measured.returncode != 0:
        tail = "\n".join(measured.stdout.strip().splitlines()[-15:])
        raise RunFailed(f"ansible-playbook exited {measured.returncode}:\n{tail}")
    return measured
