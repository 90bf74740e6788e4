"""The record of the last successful apply (reconciler.applied), read and moved in a real
git repository with a bare origin: each state it
can be in, and each move a forge sees (a first apply, a forward move, two records racing,
a re-run of an older push, main force-pushed, a pull request's head pushed as the
record)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.ci_forge import APPLIED, Forge
from support.git import git

from reconciler import git as reconciler_git
from reconciler.applied import (
    TOKEN_ENV,
    AlreadyApplied,
    Missing,
    Record,
    Trusted,
    Untrusted,
    _credentials,
    advance,
    pending_commits,
    read_record,
)
from reconciler.errors import ReconcilerError

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ORIGIN = Record()


@pytest.fixture
def forge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Forge:
    for name in (TOKEN_ENV, "RECONCILER_APPLIED_BRANCH", "RECONCILER_MAIN_BRANCH"):
        monkeypatch.delenv(name, raising=False)
    forge = Forge(tmp_path)
    monkeypatch.chdir(forge.work)
    return forge


def test_a_first_apply_finds_no_record_and_makes_one(forge: Forge) -> None:
    assert read_record(ORIGIN).state == Missing()
    done = advance(ORIGIN)
    assert (done.old, done.now, done.outcome) == (None, forge.first, "moved")
    assert forge.recorded() == forge.first
    assert read_record(ORIGIN).state == Trusted(forge.first)


def test_a_merge_is_planned_since_the_record_and_moves_it_forward(forge: Forge) -> None:
    forge.record(forge.first)
    merge = forge.merge({"invites/a.yaml": "invites: []\n"})
    reading = read_record(ORIGIN)
    assert reading.state == Trusted(forge.first) and reading.head == merge
    assert pending_commits(forge.first, merge) == 1
    assert advance(ORIGIN).outcome == "moved"
    assert forge.moves()[-1] == (forge.first, merge)
    assert advance(ORIGIN).outcome == "there"  # a re-run of the record: nothing to do


def test_a_pull_requests_head_pushed_as_the_record_is_never_trusted_nor_moved(
    forge: Forge,
) -> None:
    # Issue 51 row 6: pushed before the merge, the head is in main's history after it
    # (the merge's second parent), so "an ancestor" trusted it and the merge's apply ran
    # --changed-since the head: the reviewed change not read. main never pointed at it.
    forge.record(forge.first)
    merge = forge.merge({"invites/a.yaml": "invites: []\n"}, record_head=True)
    head = forge.sha(f"{merge}^2")
    assert forge.recorded() == head
    git(forge.work, "merge-base", "--is-ancestor", head, merge)  # the old rule's yes
    state = read_record(ORIGIN).state
    assert isinstance(state, Untrusted) and state.commit == head
    assert "not on main's first-parent history" in state.why
    with pytest.raises(ReconcilerError, match="never moved backwards or sideways"):
        advance(ORIGIN)
    assert forge.recorded() == head


def test_a_re_run_of_an_older_push_has_nothing_to_apply_and_leaves_the_record(
    forge: Forge,
) -> None:
    older = forge.merge({"invites/a.yaml": "invites: []\n"})
    later = forge.merge({"invites/b.yaml": "invites: []\n"})
    forge.record(later)
    git(forge.work, "checkout", "-q", older)
    reading = read_record(ORIGIN)
    assert reading.state == AlreadyApplied(later) and reading.head == older
    done = advance(ORIGIN)
    assert (done.now, done.outcome) == (later, "later")
    assert forge.recorded() == later


def test_after_main_was_force_pushed_the_record_is_not_trusted(forge: Forge) -> None:
    applied = forge.merge({"invites/a.yaml": "invites: []\n"})
    forge.record(applied)
    git(forge.work, "reset", "-q", "--hard", forge.first)
    rewritten = forge.commit("main rewritten", {"invites/c.yaml": "invites: []\n"})
    forge.push(force=True)
    state = read_record(ORIGIN).state
    assert isinstance(state, Untrusted) and state.commit == applied
    assert "force-pushed" in state.why
    with pytest.raises(ReconcilerError, match="Delete it"):
        advance(ORIGIN, rewritten)
    assert forge.recorded() == applied


@pytest.mark.parametrize("where", ["ahead", "sideways"])
def test_a_commit_main_never_pointed_at_is_not_trusted(forge: Forge, where: str) -> None:
    if where == "ahead":  # on top of main, pushed to the record alone
        git(forge.work, "checkout", "-q", "--detach")
        forged = forge.commit("pushed to the record by hand")
    else:  # another history
        git(forge.work, "checkout", "-q", "--orphan", "other")
        forged = forge.commit("another history")
    forge.record(forged)
    git(forge.work, "checkout", "-q", "main")
    state = read_record(ORIGIN).state
    assert isinstance(state, Untrusted) and state.commit == forged
    with pytest.raises(ReconcilerError, match="never moved backwards or sideways"):
        advance(ORIGIN)
    assert forge.recorded() == forged


def test_a_commit_off_mains_first_parent_history_is_never_recorded(forge: Forge) -> None:
    git(forge.work, "checkout", "-q", "-b", "feature")
    feature = forge.commit("not merged")
    with pytest.raises(ReconcilerError, match="would never be trusted"):
        advance(ORIGIN, feature)
    assert forge.recorded() is None


def _racing(monkeypatch: pytest.MonkeyPatch, forge: Forge, moves: list[str]) -> list[str]:
    """Before each of this run's pushes, another job records the next of ``moves``."""
    real = reconciler_git.run
    pushes: list[str] = []

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if "push" in args and moves:
            forge.record(moves.pop(0))
        if "push" in args:
            pushes.append(args[-1])
        return real(args, **kwargs)

    monkeypatch.setattr(reconciler_git, "run", run)
    return pushes


def test_a_record_that_lost_the_race_to_a_later_one_leaves_it_there(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = forge.merge({"invites/a.yaml": "invites: []\n"})
    d = forge.merge({"invites/b.yaml": "invites: []\n"})
    forge.record(forge.first)
    git(forge.work, "checkout", "-q", c)
    pushes = _racing(monkeypatch, forge, [d])  # D's record lands between C's read and push
    done = advance(ORIGIN)
    assert (done.now, done.outcome) == (d, "later")
    assert len(pushes) == 1  # refused by the lease, then read again: nothing more to do
    assert forge.recorded() == d


def test_a_record_that_lost_the_race_to_an_earlier_one_moves_past_it(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = forge.merge({"invites/a.yaml": "invites: []\n"})
    d = forge.merge({"invites/b.yaml": "invites: []\n"})
    forge.record(forge.first)
    pushes = _racing(monkeypatch, forge, [c])
    done = advance(ORIGIN)
    assert (done.old, done.now, done.outcome) == (c, d, "moved")
    assert len(pushes) == 2
    assert forge.moves()[-2:] == [(forge.first, c), (c, d)]


def test_a_record_raced_on_every_try_gives_up_unmoved(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    merges = [forge.merge({f"invites/{n}.yaml": "invites: []\n"}) for n in "abcd"]
    forge.record(forge.first)
    git(forge.work, "checkout", "-q", merges[-1])
    _racing(monkeypatch, forge, merges[:3])
    with pytest.raises(ReconcilerError, match="moved during each of 3 tries"):
        advance(ORIGIN)
    assert forge.recorded() == merges[2]


def test_a_branch_whose_name_ends_as_the_records_is_not_read_as_it(forge: Forge) -> None:
    # `git ls-remote origin refs/heads/reconcile/applied` lists evil/refs/heads/... too.
    merge = forge.merge({"invites/a.yaml": "invites: []\n"})
    git(forge.work, "push", "-q", "origin", f"{merge}:refs/heads/evil/refs/heads/{APPLIED}")
    assert read_record(ORIGIN).state == Missing()
    assert advance(ORIGIN).outcome == "moved"
    assert forge.recorded() == merge


def test_a_shallow_clone_says_the_history_it_lacks(forge: Forge, tmp_path: Path) -> None:
    forge.record(forge.first)
    forge.merge({"invites/a.yaml": "invites: []\n"})
    shallow = tmp_path / "shallow"
    url = f"file://{forge.origin}"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "main", url, str(shallow))
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(shallow)
        state = read_record(ORIGIN).state
    assert isinstance(state, Untrusted) and state.commit == forge.first
    assert "shallow" in state.why and "fetch-depth: 0" in state.why


def test_an_unreachable_remote_is_read_from_the_clones_copies(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    forge.record(forge.first)
    git(forge.work, "remote", "set-url", "origin", "https://ci:hunter2-token@127.0.0.1:9/r.git")
    reading = read_record(ORIGIN)
    assert reading.state == Trusted(forge.first)
    assert reading.unreachable and "hunter2" not in reading.unreachable
    with pytest.raises(ReconcilerError, match="cannot read origin") as refused:
        advance(ORIGIN)
    assert "hunter2" not in str(refused.value)


def test_the_token_reaches_git_only_through_the_credential_helper(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "ghs_the-job-token-value-1234"
    monkeypatch.setenv(TOKEN_ENV, token)
    config = _credentials(network=True)
    assert token not in " ".join(config)
    asked = subprocess.run(
        ["git", *config, "credential", "fill"],
        input="protocol=https\nhost=git.example\n\n",
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"password={token}" in asked.stdout.splitlines()
    assert _credentials(network=False) == []  # local questions get none


def test_where_the_record_is_comes_from_options_then_the_environment() -> None:
    env = {"CI_DEFAULT_BRANCH": "trunk", "RECONCILER_APPLIED_BRANCH": "ops/applied"}
    assert Record.from_env(env) == Record("ops/applied", "trunk", "origin")
    env["RECONCILER_MAIN_BRANCH"] = "release"
    assert Record.from_env(env, branch="x/y", remote="up").main == "release"
    assert Record.from_env(env, branch="x/y", remote="up") == Record("x/y", "release", "up")
    assert Record.from_env({}) == Record()


@pytest.mark.parametrize(
    ("given", "refused"),
    [({"branch": "a..b"}, "not a branch name"), ({"main": "bad name"}, "not a branch name"),
     ({"remote": "--upload-pack=touch pwned"}, "not a git remote")],
)  # fmt: skip
def test_names_git_would_refuse_or_read_as_options_are_refused(
    given: dict[str, str], refused: str
) -> None:
    with pytest.raises(ReconcilerError, match=refused):
        Record.from_env({}, **given)


def test_a_commit_git_would_read_as_an_option_is_refused(forge: Forge) -> None:
    with pytest.raises(ReconcilerError, match="no such commit"):
        advance(ORIGIN, "--output=pwned")
    assert forge.recorded() is None and not (forge.work / "pwned").exists()


@pytest.mark.parametrize("options", [False, True])
def test_no_remote_or_no_main_there_is_said_naming_only_settings_that_exist(
    forge: Forge, options: bool
) -> None:
    # plan, apply and adopt have no --main or --remote; `reconcile applied` has both.
    where = Record("reconcile/applied", "trunk", "origin", options=options)
    with pytest.raises(ReconcilerError) as refused:
        read_record(where)
    main = "RECONCILER_MAIN_BRANCH (or --main)" if options else "RECONCILER_MAIN_BRANCH to"
    assert str(refused.value).startswith(f"origin has no branch trunk: set {main}")
    git(forge.work, "remote", "remove", "origin")
    remote = "RECONCILER_GIT_REMOTE (or --remote)" if options else "RECONCILER_GIT_REMOTE to"
    for run in (lambda: read_record(where), lambda: advance(where)):
        with pytest.raises(ReconcilerError) as refused:
            run()
        said = str(refused.value)
        assert said.startswith("this clone has no git remote origin: add it (git remote add")
        assert f"set {remote}" in said and ("--" in said) == options


def test_a_commit_of_main_not_pushed_yet_is_said_so(forge: Forge) -> None:
    local = forge.commit("on main, not pushed")
    with pytest.raises(ReconcilerError) as refused:
        advance(ORIGIN)
    assert str(refused.value) == (
        f"{local[:12]} is on main in this clone but not on origin's main yet: push it first "
        "(git push origin main), then record it; reconcile/applied is not moved"
    )
    assert forge.recorded() is None


def test_a_bad_name_names_the_option_only_where_the_command_has_it() -> None:
    for make, said in ((Record.from_env, "(RECONCILER_MAIN_BRANCH)"),
                       (Record.from_options, "(RECONCILER_MAIN_BRANCH, or --main)")):  # fmt: skip
        with pytest.raises(ReconcilerError) as refused:
            make(main="bad name")
        assert str(refused.value) == f"'bad name' {said}: not a branch name git accepts"
