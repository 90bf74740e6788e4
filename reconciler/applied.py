"""The record of the last successful apply: a branch of the git remote (`reconcile/applied`
by default) at the commit of main that the last apply to exit 0 applied.

Trusted only at a commit main has pointed at: on main's first-parent history (a merge
commit, or a commit pushed to main). Whoever may push a branch may push this one, and a
pull request's own head is in main's history once merged, but never on that line: a
record there would let the merge's apply skip the reviewed change (issue 51, row 6).
Moved forward after an apply that exited 0 (``advance``): by compare-and-swap (`git push
--force-with-lease`), only along that line, never backwards or sideways. git is run
bounded in time, with a token for the remote that a credential helper hands git from the
environment when git asks.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias

from reconciler.errors import ReconcilerError
from reconciler.git import USERINFO, call, last_line
from reconciler.safetext import escape, quote_value, register_secret

DEFAULT_BRANCH = "reconcile/applied"
BRANCH_ENV = "RECONCILER_APPLIED_BRANCH"
MAIN_ENV = "RECONCILER_MAIN_BRANCH"
REMOTE_ENV = "RECONCILER_GIT_REMOTE"
TOKEN_ENV = "RECONCILER_GIT_TOKEN"
_LOCAL_TIMEOUT = 60.0
_NETWORK_TIMEOUT = 120.0
# git asks it for the remote's password; it answers from the environment, so the token is
# never on a command line or in a file. Set only when the variable is.
_HELPER = f'!f() {{ echo username=x-access-token; echo "password=${TOKEN_ENV}"; }}; f'
_OBJECT_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
TRIES = 3  # pushes tried while other records race this one
_OR = "{}, or --{}"  # a setting named in parentheses


@dataclass(frozen=True)
class Record:
    """Where the record lives: ``branch`` of ``remote``, trusted on ``main``'s first-parent
    history (``main`` a branch of the same remote)."""

    branch: str = DEFAULT_BRANCH
    main: str = "main"
    remote: str = "origin"
    # Whether the command at hand has --branch, --main and --remote (`reconcile applied`
    # has; plan, apply and adopt read the variables only): advice names only what exists.
    options: bool = field(default=False, compare=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **given: str | None) -> Record:
        """Options ``given`` win over RECONCILER_* variables; main's default is CI's
        default branch (GitLab's CI_DEFAULT_BRANCH), else `main`. Never from a file of the
        repository: a pull request would choose which record is trusted."""
        return cls._checked(os.environ if env is None else env, given, options=False)

    @classmethod
    def from_options(cls, **given: str | None) -> Record:
        """`reconcile applied`'s record: its --branch, --main and --remote, then the variables."""
        return cls._checked(os.environ, given, options=True)

    @classmethod
    def _checked(
        cls, env: Mapping[str, str], given: Mapping[str, str | None], *, options: bool
    ) -> Record:
        record = cls(
            branch=given.get("branch") or env.get(BRANCH_ENV) or DEFAULT_BRANCH,
            main=given.get("main") or env.get(MAIN_ENV) or env.get("CI_DEFAULT_BRANCH") or "main",
            remote=given.get("remote") or env.get(REMOTE_ENV) or "origin",
            options=options,
        )
        record.check()
        return record

    def setting(self, variable: str, option: str, joined: str = "{} (or --{})") -> str:
        """How the user sets one of the record's places: the variable, and the option when
        the command has it."""
        return joined.format(variable, option) if self.options else variable

    def check(self) -> None:
        for what, name, env in (("branch", self.branch, BRANCH_ENV), ("main", self.main, MAIN_ENV)):
            if _git_run(["check-ref-format", f"refs/heads/{name}"], ok=(0, 1)).returncode:
                raise ReconcilerError(
                    f"{quote_value(name)} ({self.setting(env, what, _OR)}): not a branch name git "
                    "accepts"
                )
        if self.remote.startswith("-") or not self.remote.strip():
            raise ReconcilerError(
                f"{quote_value(self.remote)} ({self.setting(REMOTE_ENV, 'remote', _OR)}): not a "
                "git remote"
            )

    @property
    def shown_remote(self) -> str:
        return escape(USERINFO.sub("", self.remote))


class Trusted(NamedTuple):
    """At a commit main pointed at, in HEAD's history: what changed since it is pending."""

    commit: str


class Untrusted(NamedTuple):
    """At a commit that is never a base: every invite is planned."""

    commit: str
    why: str


class Missing(NamedTuple):
    """No record (a first apply, or the branch deleted): every invite is planned."""


class AlreadyApplied(NamedTuple):
    """At a later commit of main than HEAD: a re-run of an older push has nothing to do."""

    later: str


RecordState: TypeAlias = Trusted | Untrusted | Missing | AlreadyApplied


class Reading(NamedTuple):
    state: RecordState
    head: str
    unreachable: str | None  # why the remote could not be read (this clone's copies were)


def read_record(record: Record) -> Reading:
    """The record as the remote has it now (this clone's copies when it cannot be
    reached), judged against main's first-parent history and HEAD."""
    head = _commit_of("HEAD")
    if head is None:
        raise ReconcilerError("the applied record: HEAD is no commit (not a git checkout?)")
    heads, unreachable = _remote_heads(record), None
    if isinstance(heads, str):  # unreachable: this clone's copies of the branches
        unreachable, names = heads, (record.branch, record.main)
        tracking = {b: _commit_of(f"refs/remotes/{record.remote}/{b}") for b in names}
        heads = {b: commit for b, commit in tracking.items() if commit is not None}
    else:
        _fetch_missing(record, heads)
    main = _main_commit(record, heads)
    applied = heads.get(record.branch)
    if applied is None:
        return Reading(Missing(), head, unreachable)
    return Reading(_judge(record, applied, main, head), head, unreachable)


def pending_commits(applied: str, head: str) -> int:
    """How many commits of HEAD's first-parent line since ``applied``: merges, mostly."""
    done = _git_run(["rev-list", "--first-parent", "--count", f"{applied}..{head}"])
    return int(done.stdout.decode().strip() or 0)


def _judge(record: Record, applied: str, main: str, head: str) -> RecordState:
    if _commit_of(applied) is None:
        return Untrusted(applied, "a commit this clone does not have and could not fetch")
    if not _on_first_parent_line(applied, main):
        return Untrusted(applied, _off_main(record))
    if _is_ancestor(applied, head):
        return Trusted(applied)
    if _is_ancestor(head, applied):
        return AlreadyApplied(applied)
    return Untrusted(applied, f"neither in the history of HEAD ({head[:12]}) nor after it")


def _off_main(record: Record) -> str:
    main = escape(record.main)
    why = (
        f"not on {main}'s first-parent history: {main} never pointed at it (a commit "
        f"pushed to {escape(record.branch)} by hand, such as a pull request's own head, "
        f"or {main} was force-pushed)"
    )
    shallow = _git_run(["rev-parse", "--is-shallow-repository"]).stdout.strip() == b"true"
    if shallow:
        why += (
            "; this clone is shallow, so that history may be cut short: check out the "
            "whole history (actions/checkout: fetch-depth: 0; GitLab: GIT_DEPTH: 0)"
        )
    return why


def _remote_heads(record: Record) -> dict[str, str] | str:
    """The commits of the record's branch and main's on the remote, by branch name (a
    missing one left out); git's reason when the remote cannot be read."""
    wanted = {f"refs/heads/{b}": b for b in (record.branch, record.main)}
    done = _git_run(["ls-remote", record.remote, *wanted], network=True, ok=None)
    if done.returncode:
        return last_line(done)
    heads = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines():
        commit, _, name = line.partition("\t")
        # ls-remote matches a name's tail too (evil/refs/heads/...): the whole name only.
        if name in wanted and _OBJECT_NAME.fullmatch(commit):
            heads[wanted[name]] = commit
    return heads


def _main_commit(record: Record, heads: Mapping[str, str]) -> str:
    main = heads.get(record.main)
    if main is None and not _is_remote(record.remote):
        raise _no_remote(record)
    if main is None:
        raise ReconcilerError(
            f"{record.shown_remote} has no branch {escape(record.main)}: set "
            f"{record.setting(MAIN_ENV, 'main')} to the branch applies run on"
        )
    if _commit_of(main) is None:
        raise ReconcilerError(
            f"{escape(record.main)} is at {main}, a commit this clone does not have and "
            f"could not fetch from {record.shown_remote}"
        )
    return main


def _no_remote(record: Record) -> ReconcilerError:
    return ReconcilerError(
        f"this clone has no git remote {record.shown_remote}: add it (git remote add "
        f"{record.shown_remote} URL), or set {record.setting(REMOTE_ENV, 'remote')} to "
        "the remote (a name or a URL) that main and the record are pushed to"
    )


def _is_remote(remote: str) -> bool:
    """A remote of this clone by name, or a URL or path (git reads either, not judged here)."""
    if any(c in remote for c in ":/\\") or remote in (".", ".."):
        return True
    return _git_run(["remote", "get-url", remote], ok=None).returncode == 0


def _fetch_missing(record: Record, heads: Mapping[str, str]) -> None:
    """Fetch the branches whose commits this clone lacks; they are judged as found."""
    missing = [b for b, commit in heads.items() if _commit_of(commit) is None]
    if missing:
        names = [f"refs/heads/{b}" for b in missing]
        _git_run(["fetch", "--quiet", "--no-tags", record.remote, *names], network=True, ok=None)


def _on_first_parent_line(commit: str, tip: str) -> bool:
    """Whether ``tip`` pointed at ``commit``: ``tip`` itself, its first parent, that one's
    first parent, and so on (a merge's other parents never are). The commits of that line
    not in ``commit``'s history are counted; the next one down must be ``commit``."""
    done = _git_run(["rev-list", "--first-parent", "--count", tip, f"^{commit}"])
    return _commit_of(f"{tip}~{int(done.stdout)}") == commit


def _is_ancestor(older: str, newer: str) -> bool:
    return _git_run(["merge-base", "--is-ancestor", older, newer], ok=(0, 1)).returncode == 0


def _commit_of(revision: str) -> str | None:
    done = _git_run(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], ok=None)
    return done.stdout.decode().strip() if done.returncode == 0 else None


# -- moving it forward -------------------------------------------------------------------


class Advance(NamedTuple):
    """What advancing did: the record before (None: none yet) and after; `moved` by this
    run, `there` at the commit already, or left at a `later` commit of main."""

    old: str | None
    now: str
    outcome: Literal["moved", "there", "later"]


def advance(record: Record, commit: str = "HEAD", tries: int = TRIES) -> Advance:
    """Move the record to ``commit`` by compare-and-swap, only forward along main's
    first-parent line; a push that lost a race is decided again from the record as it
    is then. Refuses (ReconcilerError) to move it backwards or sideways."""
    new = None if commit.startswith("-") else _commit_of(commit)
    if new is None:
        raise ReconcilerError(f"{quote_value(commit)}: no such commit in this clone")
    for _ in range(tries):
        heads = _remote_heads(record)
        if isinstance(heads, str) and not _is_remote(record.remote):
            raise _no_remote(record)
        if isinstance(heads, str):
            raise ReconcilerError(f"cannot read {record.shown_remote}: {heads}; not recorded")
        _fetch_missing(record, heads)
        old = heads.get(record.branch)
        settled = _settled(record, old, new, _main_commit(record, heads))
        if settled is not None:
            return settled
        if _push(record, old, new):
            return Advance(old, new, "moved")
    raise ReconcilerError(
        f"{escape(record.branch)} moved during each of {tries} tries to record {new[:12]} "
        "(other records racing this one): not recorded; the next apply covers this one's "
        "changes again"
    )


def _settled(record: Record, old: str | None, new: str, main: str) -> Advance | None:
    """The answer when nothing needs pushing; None when the push may go; raises when the
    record must not be moved to ``new``."""
    branch, shown_main = escape(record.branch), escape(record.main)
    if not _on_first_parent_line(new, main):
        local = _commit_of(f"refs/heads/{record.main}")
        if local is not None and _is_ancestor(main, new) and _on_first_parent_line(new, local):
            raise ReconcilerError(
                f"{new[:12]} is on {shown_main} in this clone but not on "
                f"{record.shown_remote}'s {shown_main} yet: push it first (git push "
                f"{record.shown_remote} {shown_main}), then record it; {branch} is not moved"
            )
        raise ReconcilerError(
            f"{new[:12]} is not on {shown_main}'s first-parent history: a record there "
            f"would never be trusted; {branch} is not moved"
        )
    if old is None:
        return None
    known = _commit_of(old) is not None
    if known and _on_first_parent_line(old, new):
        return None if old != new else Advance(old, new, "there")
    if known and _on_first_parent_line(new, old) and _on_first_parent_line(old, main):
        return Advance(old, old, "later")
    raise ReconcilerError(
        f"{branch} ({old}) is neither on the first-parent history of {new[:12]} nor a "
        f"later commit of {shown_main} (main was rewritten, or the branch pushed by hand): "
        f"it is never moved backwards or sideways. Delete it (git push "
        f"{record.shown_remote} --delete {branch}): the next apply then plans every invite, "
        "and its record starts afresh"
    )


def _push(record: Record, old: str | None, new: str) -> bool:
    """Whether the compare-and-swap push landed; False when the record moved meanwhile."""
    ref = f"refs/heads/{record.branch}"
    lease = f"--force-with-lease={ref}:{old or ''}"  # empty: the branch must not exist yet
    done = _git_run(
        ["push", "--quiet", lease, record.remote, f"{new}:{ref}"], network=True, ok=None
    )
    if done.returncode == 0:
        return True
    now = _remote_heads(record)
    if isinstance(now, dict) and now.get(record.branch) != old:
        return False  # another record got there first: decided again
    raise ReconcilerError(
        f"git push to {record.shown_remote} failed: {last_line(done)}; {escape(record.branch)} "
        "is not moved"
    )


# -- git ----------------------------------------------------------------------------------


def _git_run(
    args: list[str], *, network: bool = False, ok: tuple[int, ...] | None = (0,)
) -> subprocess.CompletedProcess[bytes]:
    """git ``args``, bounded in time; a return code outside ``ok`` (None: any) is an error."""
    timeout = _NETWORK_TIMEOUT if network else _LOCAL_TIMEOUT
    return call([*_credentials(network), *args], "the applied record", timeout=timeout, ok=ok)


def _credentials(network: bool) -> list[str]:
    token = os.environ.get(TOKEN_ENV, "")
    if not network or not token:
        return []
    register_secret(token)  # never shown, should git or a server quote it
    # The empty helper first drops any other: none of them sees or stores the token.
    return ["-c", "credential.helper=", "-c", f"credential.helper={_HELPER}"]
