"""`--changed-since REF`: a pull request that edits 3 of 2,000 invites reads 3 of them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import CliResult, run_cli
from support.git import commit_repository, git
from support.helpers import clean_env, sandbox_env
from support.invites import ACME

from reconciler.desired.changed_since import changed_entries
from reconciler.desired.state import load_desired_state
from reconciler.sandbox import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

FILES = 20
PER_FILE = 100  # 2,000 invites: what is read is the point, not how many are not


def server_invite(n: int) -> dict[str, Any]:
    return {
        "id": f"inv_{n:05d}",
        "status": "pending",
        "name": f"Société Nº{n} — Ünïcødé Holdings Ltd",
        "email": f"ops{n}@example.com",
        "groups": ["emea", "enterprise"],
    }


def invite_lines(invite: dict[str, Any]) -> str:
    return (
        f"  - id: {invite['id']}\n"
        f'    name: "{invite["name"]}"\n'
        f"    email: {invite['email']}\n"
        f"    groups: [{', '.join(invite['groups'])}]\n"
    )


def write_repo(repo: Path, invites: list[dict[str, Any]]) -> None:
    (repo / "invites").mkdir(parents=True, exist_ok=True)
    for f in range(FILES):
        chunk = invites[f * PER_FILE : (f + 1) * PER_FILE]
        text = "invites:\n" + "".join(invite_lines(i) for i in chunk)
        (repo / "invites" / f"region-{f:02d}.yaml").write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    repo = tmp_path_factory.mktemp("big") / "repo"
    invites = [server_invite(n) for n in range(FILES * PER_FILE)]
    write_repo(repo, invites)
    return commit_repository(repo, {}, "2,000 invites"), invites


def run_in(repo: Path, env: dict[str, str], *args: str) -> CliResult:
    """The CLI run in ``repo`` with ``env``'s RECONCILER_ settings (the rest: this process's)."""
    ours = {k: v for k, v in env.items() if k.startswith("RECONCILER_")}
    return run_cli(*args, cwd=repo, env=clean_env(**ours))


def test_a_three_invite_change_in_2000_reads_three_invites(
    big_repo: tuple[Path, list[dict[str, Any]]],
    start_sandbox: Callable[..., Sandbox],
) -> None:
    repo, invites = big_repo
    server = start_sandbox(invites)
    edited = repo / "invites" / "region-07.yaml"
    original = edited.read_text(encoding="utf-8")
    # One edit, one re-formatting that means the same, one key order change that
    # means the same, in other files; one new entry and one moved entry.
    text = original.replace("ops701@example.com", "new701@example.com")
    text = text.replace(
        "groups: [emea, enterprise]\n", "groups:\n      - emea\n      - enterprise\n", 1
    )
    new = dict(server_invite(99_999), name="Neue Firma GmbH")
    server.store.put(new)
    text += invite_lines(dict(new, name="Neueste Firma GmbH"))
    edited.write_text(text, encoding="utf-8")
    other = repo / "invites" / "region-12.yaml"
    other_text = other.read_text(encoding="utf-8")
    other.write_text(other_text.replace("ops1250@", "changed1250@"), encoding="utf-8")
    try:
        result = run_in(repo, sandbox_env(server), "plan", "--changed-since", "main")
    finally:
        edited.write_text(original, encoding="utf-8")
        other.write_text(other_text, encoding="utf-8")
    code, out, err = result.returncode, result.stdout, result.stderr
    reads = server.stats.calls("GET")
    assert sorted(r.path.rsplit("/", 1)[1] for r in reads) == [
        "inv_00701",
        "inv_01250",
        "inv_99999",
    ]
    assert len(server.stats.calls("POST", "/oauth/token")) == 1
    assert code == 0, err
    assert "3 invites of 2,001 added or changed" in err
    assert "3 to update" in out


def test_nothing_changed_reads_nothing(small_repo: Path, sandbox: Sandbox) -> None:
    result = run_in(small_repo, sandbox_env(sandbox), "plan", "--changed-since", "HEAD")
    assert result.returncode == 0
    assert sandbox.stats.calls("GET") == []
    assert "0 invites of 1 added or changed" in result.stderr


ALPHA = "invites:\n  - id: inv_a\n    name: Alpha Ltd\n"


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    return commit_repository(tmp_path / "repo", {"invites/a.yaml": ALPHA}, "one invite")


def write_invites_text(repo: Path, text: str) -> None:
    (repo / "invites").mkdir(parents=True, exist_ok=True)
    (repo / "invites" / "a.yaml").write_text(text, encoding="utf-8")


NO_COMMIT = (
    ": no such commit in this repository. Fetch it first (in CI: a full clone, e.g. "
    "actions/checkout with fetch-depth: 0, or GIT_DEPTH: 0), or plan everything by leaving "
    "out --changed-since"
)
REFUSED = {
    "an unknown branch": ("no-such-branch", [], "--changed-since no-such-branch" + NO_COMMIT),
    "an unknown commit": ("1" * 40, [], f"--changed-since {'1' * 40}{NO_COMMIT}"),
    "a ref git would read as an option": (
        "--output=x",
        [],
        "--changed-since '--output=x': not a git revision",
    ),
    "a path outside the repository": (
        "HEAD",
        ["../elsewhere"],
        "--changed-since: ../elsewhere is outside the git repository {top}",
    ),
}


@pytest.mark.parametrize(("ref", "paths", "said"), REFUSED.values(), ids=REFUSED.keys())
def test_a_ref_or_path_refused_is_said_in_full(
    small_repo: Path, ref: str, paths: list[str], said: str, sandbox: Sandbox
) -> None:
    write_invites_text(small_repo.parent / "elsewhere", ALPHA)
    args = ("plan", f"--changed-since={ref}", *paths)
    result = run_in(small_repo, sandbox_env(sandbox), *args)
    err = result.stderr
    assert result.returncode == 1
    assert f"error: {said.format(top=small_repo.resolve())}" in err.splitlines(), err
    assert sandbox.stats.calls("GET") == [] and sandbox.stats.calls("POST") == []
    assert not (small_repo / "x").exists()


@pytest.mark.parametrize(
    "ref", ["x\n::error::forged", "HEAD\r\n##[error]forged", "-\n::warning::x"]
)
def test_a_ref_holding_a_line_break_starts_no_line_of_output(
    small_repo: Path,
    ref: str,
    monkeypatch: pytest.MonkeyPatch,
    sandbox: Sandbox,
) -> None:
    # Under GITHUB_ACTIONS=true a runner reads any line starting with `::` or `##[` as a
    # workflow command: the ref's line break is shown as an escape, never kept.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = run_in(small_repo, sandbox_env(sandbox), "plan", f"--changed-since={ref}")
    assert result.returncode == 1
    lines = (result.stdout + result.stderr).splitlines()
    assert lines and all(
        not line.startswith(("::warning::", "::error::forged", "##[")) for line in lines
    )
    assert sandbox.stats.calls("GET") == [] and sandbox.stats.calls("POST") == []


@pytest.mark.parametrize(
    ("outside", "said"),
    [
        (True, "not in a git repository"),
        (False, "--changed-since needs git, which is not installed or not on PATH"),
    ],
    ids=["outside-a-repository", "no-git-on-path"],
)
def test_without_a_repository_or_git_it_is_a_clear_error(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch, outside: bool, said: str
) -> None:
    if outside:  # git finds no repository above this one
        where = small_repo.parent
        write_invites_text(where, "invites:\n  - id: inv_a\n")
        monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(where.parent))
    else:
        where = small_repo
        monkeypatch.setenv("PATH", str(small_repo))
    result = run_in(where, {}, "plan", "--sandbox", "--changed-since", "main")
    assert result.returncode == 1
    assert said in result.stderr


def test_a_changed_option_counts_and_a_reformatted_entry_does_not(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_invites_text(
        small_repo,
        "invites:\n  - id: inv_a\n    name: Alpha Ltd\n    resendOnChange: true\n"
        "  - id: inv_b\n    groups: [a, b]\n",
    )
    git(small_repo, "add", ".")
    git(small_repo, "commit", "-qm", "two invites")
    write_invites_text(
        small_repo,
        "invites:\n  - id: inv_b\n    groups:\n      - a\n      - b\n"
        "  - name: Alpha Ltd\n    id: inv_a\n    resendOnChange: false\n",
    )
    monkeypatch.chdir(small_repo)
    invites = load_desired_state(["invites"]).invites
    # resendOnChange is part of the entry; a block list equal to the flow list is not a change.
    assert set(changed_entries("HEAD", ["invites"], invites) or ()) == {"inv_a"}


def test_a_file_name_with_a_line_break_shifts_no_other_files_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "invites/a\nb.yaml": "invites:\n  - id: inv_a\n    name: Odd Name GmbH\n",
        "invites/c.yaml": "invites:\n  - id: inv_c\n    name: Plain Ltd\n",
    }
    repo = commit_repository(tmp_path / "repo", files, "two files, one oddly named")
    monkeypatch.chdir(repo)
    invites = load_desired_state(["invites"]).invites
    # Nothing changed: the odd file's invites may count as changed (they are read,
    # never skipped), but the file after it must still be compared with its own past.
    changed = changed_entries("HEAD", ["invites"], invites)
    assert changed is not None and "inv_c" not in changed


@pytest.mark.parametrize(
    ("file", "start", "path"),
    [
        ("-invites/a.yaml", ".", "-invites"),
        ("invites/a.yaml", "invites", "."),
        ("invites/caf\udce9.yaml", ".", "invites"),
    ],
    ids=["a directory named like an option", "run from a subdirectory", "a name not UTF-8"],
)
def test_a_file_unchanged_is_unchanged_whatever_its_name_and_wherever_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str, start: str, path: str
) -> None:
    # git reads `-x` as an option, names paths from where it runs, and a file name is bytes.
    repo = tmp_path / "repo"
    (repo / file).parent.mkdir(parents=True)
    (repo / file).write_text(ALPHA, encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one invite")
    monkeypatch.chdir(repo / start)
    invites = load_desired_state([path]).invites
    assert [i.id for i in invites] == ["inv_a"]
    assert changed_entries("HEAD", [path], invites) == {}


def test_an_entry_git_cannot_show_at_the_base_leaves_the_other_files_compared(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A submodule named like a YAML file: `cat-file` answers "<commit>:<name> missing", and
    # a space in the name must not make that answer read as an object's size.
    git(small_repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},invites/b c.yaml")
    git(small_repo, "commit", "-q", "-m", "a submodule")
    monkeypatch.chdir(small_repo)
    invites = load_desired_state(["invites"]).invites
    assert changed_entries("HEAD", ["invites"], invites) == {}


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_a_base_version_that_is_not_utf8_counts_every_entry_as_changed(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch, encoding: str
) -> None:
    # Unreadable at the base, nothing can be shown unchanged: plan too much, never too little.
    text = "invites:\n  - id: inv_a\n    name: Café Alpha Ltd\n  - id: inv_b\n    name: Beta\n"
    (small_repo / "invites" / "a.yaml").write_bytes(text.encode(encoding))
    git(small_repo, "commit", "-qam", "saved in another encoding")
    write_invites_text(small_repo, text)
    monkeypatch.chdir(small_repo)
    invites = load_desired_state(["invites"]).invites
    assert set(changed_entries("HEAD", ["invites"], invites) or ()) == {"inv_a", "inv_b"}


# From test_changed_since_review.py: --changed-since as a new user meets it: a first push,
# reordered sets, a filtered --target.


ZERO = "0" * 40


BETA = {**ACME, "id": "inv_beta", "name": "Bêta Société SA", "email": "ops@beta.example"}


FILE = """\
invites:
  - id: inv_acme
    name: Acme Holdings Ltd
    email: {acme_email}
    groups: [{groups}]
  - id: inv_beta
    name: "Bêta Société SA"
    email: ops@beta.example
    groups: [emea, enterprise]
"""


def commit(repo: Path, groups: str = "emea, enterprise", acme_email: str = "a@acme.example"):
    (repo / "invites").mkdir(parents=True, exist_ok=True)
    text = FILE.format(groups=groups, acme_email=acme_email)
    (repo / "invites" / "invites.yaml").write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "invites")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_the_all_zero_sha_plans_every_invite(repo, start_sandbox):
    commit(repo)
    server = start_sandbox([ACME, BETA])
    result = run_cli("plan", "--changed-since", ZERO, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "Plan: 1 to update, 1 unchanged, 0 errors." in result.stdout
    assert result.stderr.count("no base commit") == 1
    assert "planning every invite" in result.stderr


def test_reordering_a_set_field_is_no_change(repo, start_sandbox):
    base = commit(repo)
    commit(repo, groups="enterprise, emea")
    server = start_sandbox([ACME, BETA])
    result = run_cli("plan", "--changed-since", base, cwd=repo, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    assert "0 invites of 2 added or changed" in result.stderr
    assert server.stats.calls("GET") == []  # no invite read


def test_a_target_left_out_by_changed_since_is_named(repo, start_sandbox):
    base = commit(repo)
    commit(repo, acme_email="new@acme.example")
    server = start_sandbox([ACME, BETA])
    env = sandbox_env(server)
    args = ("plan", "--changed-since", base, "--target", "inv_beta", "--target", "inv_acme")
    result = run_cli(*args, cwd=repo, env=env)
    assert f"--target inv_beta: unchanged since {base}; nothing to plan for it" in result.stderr
    assert "--target inv_acme:" not in result.stderr
    assert "Plan: 0 to update, 1 conflict (not written)" in result.stdout  # planned, not updated
