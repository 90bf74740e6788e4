"""A forge in a temporary directory, for the record of the last successful apply: a bare
origin, the clone a CI job runs in, and the moves people make (a merge, a pull request's
head pushed as the record, main force-pushed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .git import git

APPLIED = "reconcile/applied"


class Forge:
    """``origin`` (bare, every move of its refs logged) and ``work``, a clone on main."""

    def __init__(self, root: Path) -> None:
        self.origin = root / "origin.git"
        self.work = root / "work"
        self.work.mkdir(parents=True)
        git(root, "init", "-q", "--bare", "-b", "main", str(self.origin))
        git(self.origin, "config", "core.logAllRefUpdates", "always")
        git(self.work, "init", "-q", "-b", "main")
        git(self.work, "remote", "add", "origin", str(self.origin))
        self.first = self.commit("first")
        self.push()

    def commit(self, message: str, files: dict[str, str] | None = None) -> str:
        """A commit on the branch checked out, writing ``files`` (path: text) first."""
        for name, text in (files or {}).items():
            path = self.work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        git(self.work, "add", "-A")
        git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        return self.sha("HEAD")

    def merge(self, files: dict[str, str] | None = None, *, record_head: bool = False) -> str:
        """A pull request merged into main with a merge commit, pushed; its head pushed
        as the record before the merge when ``record_head`` (issue 51, row 6)."""
        git(self.work, "checkout", "-q", "-b", "pr", "main")
        head = self.commit("the pull request's change", files)
        if record_head:
            self.record(head)
        git(self.work, "checkout", "-q", "main")
        git(self.work, "merge", "-q", "--no-ff", "-m", "Merge the pull request", "pr")
        git(self.work, "branch", "-q", "-D", "pr")
        self.push()
        return self.sha("HEAD")

    def push(self, *, force: bool = False) -> None:
        git(self.work, "push", "-q", *(["--force"] if force else []), "origin", "HEAD:main")
        git(self.work, "fetch", "-q", "--prune", "origin")

    def record(self, commit: str) -> None:
        """``commit`` pushed to the record's branch, as anyone who may push a branch can."""
        git(self.work, "push", "-q", "--force", "origin", f"{commit}:refs/heads/{APPLIED}")
        git(self.work, "fetch", "-q", "--prune", "origin")

    def recorded(self) -> str | None:
        """The record's commit on origin, None when there is none."""
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{APPLIED}"],
            cwd=self.origin, capture_output=True, text=True, check=False,
        )  # fmt: skip
        return found.stdout.strip() or None

    def moves(self) -> list[tuple[str, str]]:
        """Every move of the record on origin, (old, new), oldest first."""
        log = self.origin / "logs" / "refs" / "heads" / APPLIED
        if not log.exists():
            return []
        return [(line.split()[0], line.split()[1]) for line in log.read_text().splitlines()]

    def sha(self, revision: str) -> str:
        return git(self.work, "rev-parse", revision)

    def clone(self, name: str, commit: str) -> Path:
        """Another job's checkout: a full clone of origin at ``commit``."""
        path = self.work.parent / name
        git(self.work.parent, "clone", "-q", str(self.origin), str(path))
        git(path, "checkout", "-q", commit)
        return path
