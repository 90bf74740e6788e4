"""`reconcile applied show|advance`, and `--changed-since-applied` on plan, apply and adopt,
in-process against the mocked platform, in a real git repository with a bare origin."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ci_forge import Forge
from support.fake_platform import INVITE_FILE, INVITES, FakePlatform, reconcile, serve
from support.git import git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SEOUL = "    name: 서울 핀테크 주식회사\n"
RENAMED = "    name: 서울 핀테크 (주)\n"


class Repo:
    """The forge, its checkout the working directory, the platform mocked; the invites
    committed on main as ``invites``, the commit a pull request edits."""

    def __init__(self, forge: Forge, platform: FakePlatform) -> None:
        self.forge, self.platform = forge, platform
        text = INVITE_FILE.format(resend="false")
        self.invites = forge.commit("invites", {"invites/apac-latam.yaml": text})
        forge.push()

    def merge_rename(self, *, record_head: bool = False) -> str:
        text = INVITE_FILE.format(resend="false").replace(SEOUL, RENAMED)
        return self.forge.merge({"invites/apac-latam.yaml": text}, record_head=record_head)

    def reads(self) -> list[str]:
        history = self.platform.mock.request_history
        return sorted(r.url[len(INVITES) :] for r in history if r.method == "GET")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repo]:
    for name in ("RECONCILER_GIT_TOKEN", "RECONCILER_APPLIED_BRANCH", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RECONCILER_MAIN_BRANCH", "main")
    forge = Forge(tmp_path / "forge")
    git(forge.work, "config", "user.name", "T")  # the in-tree reconciler.yaml stays out
    (forge.work / ".git" / "info" / "exclude").write_text("reconciler.yaml\n")
    with serve(monkeypatch, forge.work) as platform:
        yield Repo(forge, platform)


def test_plan_reads_only_what_changed_since_a_trusted_record(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.forge.record(repo.invites)
    repo.merge_rename()
    assert reconcile("plan", "--changed-since-applied") == 0
    err = capsys.readouterr().err
    assert f"the last successful apply is {repo.invites}" in err
    assert "1 invite of 3 added or changed" in err
    assert repo.reads() == ["inv_8d2s4"]


def test_a_pull_requests_head_pushed_as_the_record_plans_every_invite_with_a_warning(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.forge.record(repo.invites)
    merge = repo.merge_rename(record_head=True)
    head = repo.forge.sha(f"{merge}^2")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert reconcile("plan", "--changed-since-applied") == 0
    err = capsys.readouterr().err
    assert f"warning: --changed-since-applied: reconcile/applied of origin is at {head}" in err
    assert "not on main's first-parent history" in err and "every invite is planned" in err
    assert "::warning title=Last successful apply::reconcile/applied of origin is at" in err
    assert repo.reads() == ["inv_2b6n3", "inv_6p3j9", "inv_8d2s4"]  # the reviewed one too


def test_with_no_record_every_invite_is_planned_with_a_notice(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert reconcile("plan", "--changed-since-applied", "--detailed-exitcode") == 2
    err = capsys.readouterr().err
    assert "no successful apply recorded yet (no branch reconcile/applied of origin)" in err
    assert len(repo.reads()) == 3


@pytest.mark.parametrize("command", ["plan", "apply", "adopt"])
def test_a_re_run_of_an_older_push_has_nothing_to_do_and_reads_nothing(
    repo: Repo, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    later = repo.merge_rename()
    repo.forge.record(later)
    git(repo.forge.work, "checkout", "-q", repo.invites)
    extra = ["--auto-approve"] if command == "apply" else []
    assert reconcile(command, "--changed-since-applied", *extra) == 0
    err = capsys.readouterr().err
    assert f"{later}, a later commit of main, is applied already" in err
    assert err.rstrip().endswith(f"nothing to {command}")
    assert repo.platform.mock.request_history == []
    assert git(repo.forge.work, "status", "--porcelain", "--untracked-files=no") == ""


def test_apply_writes_what_changed_since_the_record(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.forge.record(repo.invites)
    repo.merge_rename()
    assert reconcile("apply", "--auto-approve", "--changed-since-applied") == 0
    assert repo.platform.writes() == [("PATCH", "inv_8d2s4")]


def test_adopt_never_writes_back_a_change_merged_since_the_record(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.forge.record(repo.invites)
    repo.merge_rename()
    code = reconcile("adopt", "--changed-since-applied")
    out = capsys.readouterr().out
    assert "inv_8d2s4 name: not applied yet: changed in git since" in out, out
    assert RENAMED in (repo.forge.work / "invites" / "apac-latam.yaml").read_text()
    assert code == 0


def test_adopt_adopts_nothing_when_the_record_is_not_trusted(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    # Which merged changes are pending is unknown: adopting would propose to undo them.
    repo.merge_rename(record_head=True)
    assert reconcile("adopt", "--changed-since-applied") == 1
    err = capsys.readouterr().err
    assert "not trusted, so which merged changes are pending apply is unknown" in err
    assert repo.platform.mock.request_history == []
    assert git(repo.forge.work, "status", "--porcelain", "--untracked-files=no") == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["plan", "--changed-since", "HEAD", "--changed-since-applied"], "not both"),
        (["adopt", "--changed-since", "HEAD", "--changed-since-applied"], "not both"),
        (["apply", "--plan", "p.json", "--changed-since-applied"], "--changed-since-applied"),
    ],
)
def test_the_record_with_another_base_is_refused_before_anything_is_read(
    repo: Repo, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert reconcile(*args) == 1
    assert said in capsys.readouterr().err
    assert repo.platform.mock.request_history == []


def test_show_says_what_is_applied_and_pending_also_in_the_job_summary(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = repo.forge.work.parent / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert reconcile("applied", "show") == 0
    assert "Applied: nothing recorded" in capsys.readouterr().out
    repo.forge.record(repo.invites)
    merge = repo.merge_rename()
    assert reconcile("applied", "show") == 0
    line = f"Applied: {repo.invites[:12]} (reconcile/applied of origin); pending: "
    line += f"{repo.invites[:12]}..{merge[:12]} (1 commit)."
    assert capsys.readouterr().out.strip() == line
    assert summary.read_text().splitlines()[-1] == line
    assert reconcile("applied", "show", "--format", "json") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "trusted" and shown["changed_since"] == repo.invites
    assert shown["head"] == merge


def test_advance_records_and_says_so(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    merge = repo.merge_rename()
    assert reconcile("applied", "advance") == 0
    assert capsys.readouterr().out.startswith(f"Recorded: reconcile/applied (new) -> {merge}")
    assert repo.forge.recorded() == merge
    git(repo.forge.work, "checkout", "-q", repo.invites)
    assert reconcile("applied", "advance") == 0  # a re-run of an older push's record
    said = capsys.readouterr().out
    assert said.strip() == f"reconcile/applied is at {merge}, a later commit of main: left there."
    assert repo.forge.recorded() == merge


def test_advance_refuses_to_move_a_forged_record(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = repo.forge.sha(f"{repo.merge_rename(record_head=True)}^2")
    assert reconcile("applied", "advance") == 1
    assert "it is never moved backwards or sideways" in capsys.readouterr().err
    assert repo.forge.recorded() == head
