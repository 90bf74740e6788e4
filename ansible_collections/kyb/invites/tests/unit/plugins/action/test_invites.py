"""The action plugin's own parts: how a file is named, what -v echoes of the files."""

from __future__ import annotations

from ansible_collections.kyb.invites.plugins.action import invites as action


def test_a_file_under_the_playbook_is_named_from_there_and_others_in_full():
    assert action._shown_path("/play/invites/emea.yaml", "/play") == "invites/emea.yaml"
    assert action._shown_path("/elsewhere/emea.yaml", "/play") == "/elsewhere/emea.yaml"


def test_the_files_text_is_not_echoed_back_only_their_paths():
    result = {
        "invocation": {
            "module_args": {
                "src": [{"path": "invites/emea.yaml", "text": "invites:\n  - id: inv_1\n"}],
                "max_resends": 1,
            }
        }
    }
    action._shorten_invocation(result)
    assert result["invocation"]["module_args"] == {"src": ["invites/emea.yaml"], "max_resends": 1}


class _Play:
    def __init__(self, strategy):
        self.strategy = strategy


class _Block:
    def __init__(self, strategy):
        self._play = _Play(strategy)


class _Task:
    def __init__(self, run_once, strategy):
        self.run_once = run_once
        self._parent = _Block(strategy)


def _plugin(run_once, strategy="linear"):
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = _Task(run_once, strategy)
    return plugin


def test_several_hosts_without_run_once_are_refused_naming_the_two_ways_out():
    hosts = [f"web{n}" for n in range(7)]
    assert _plugin(False)._several_hosts({"ansible_play_batch": hosts}) == hosts
    assert _plugin(True)._several_hosts({"ansible_play_batch": hosts}) is None
    assert _plugin(False)._several_hosts({"ansible_play_batch": ["localhost"]}) is None
    message = action._refusal(hosts)
    assert message.startswith(
        "kyb.invites.invites would run for 7 hosts of this play (web0, web1, web2, web3, "
        "web4 and 2 more), each sending the same writes to the platform"
    )
    assert "set run_once: true on the task, or run it in a play of hosts: localhost" in message


def test_run_once_under_a_strategy_that_ignores_it_is_refused_too():
    hosts = ["web0", "web1"]
    for strategy in ("free", "ansible.builtin.host_pinned"):
        assert _plugin(True, strategy)._several_hosts({"ansible_play_batch": hosts}) == hosts
    linear = _plugin(True, "ansible.builtin.linear")
    assert linear._several_hosts({"ansible_play_batch": hosts}) is None
    message = action._refusal(hosts, "free")
    assert "the play's strategy, free, runs even a run_once task for every host" in message


def test_runs_that_apply_take_turns_on_the_controller_and_check_mode_does_not_wait(
    tmp_path, monkeypatch
):
    import threading
    import time

    monkeypatch.setattr(action.C, "ANSIBLE_HOME", str(tmp_path), raising=False)
    order = []
    holding = threading.Event()

    def first():
        with action._controller_lock(applies=True):
            holding.set()
            time.sleep(0.5)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    with action._controller_lock(applies=False):
        order.append("check mode")  # reads only: never waits
    with action._controller_lock(applies=True):
        order.append("second")
    thread.join(5)
    assert order == ["check mode", "first done", "second"]
    assert (tmp_path / "tmp" / "kyb.invites.lock").exists()


def test_the_lock_is_a_private_regular_file_never_a_link_a_fifo_or_a_directory(
    tmp_path, monkeypatch
):
    import os
    import stat

    import pytest

    monkeypatch.setattr(action.C, "ANSIBLE_HOME", str(tmp_path), raising=False)
    lock = tmp_path / "tmp" / "kyb.invites.lock"
    with action._controller_lock(applies=True):
        pass
    assert stat.S_ISREG(lock.lstat().st_mode) and stat.S_IMODE(lock.stat().st_mode) == 0o600
    victim = tmp_path / "elsewhere" / "created-by-the-lock"
    victim.parent.mkdir()
    kinds = {
        "a symbolic link": lambda: os.symlink(victim, lock),
        "a FIFO (named pipe)": lambda: os.mkfifo(lock),
        "a directory": lambda: os.mkdir(lock),
    }
    for kind, make in kinds.items():
        if lock.is_dir() and not lock.is_symlink():
            lock.rmdir()
        elif os.path.lexists(lock):
            lock.unlink()
        make()
        # pytest.raises first: the lock's refusal is raised on entering (never waits on a FIFO).
        with pytest.raises(action.LockNotTaken) as refused, action._controller_lock(applies=True):
            raise AssertionError(f"the lock was taken on {kind}")
        assert str(refused.value) == (
            f"kyb.invites.invites: the lock {lock} is {kind}, not a regular file: it is "
            "neither followed nor used (a link could make its target, a FIFO would hang the "
            "run); remove it, and the next run makes the lock again; nothing was sent"
        )
        assert not victim.exists()
