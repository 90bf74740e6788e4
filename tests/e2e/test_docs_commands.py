"""Every command the README and docs/ show runs, against a sandbox, so the guide cannot rot.

The fenced ``sh`` blocks are scripts as they stand; a ``console`` block's commands are its
lines that start with ``$ ``; what follows them is output, compared with the command's
stdout (stderr holds progress and times) where the line above the block says
``<!-- docs-test: output compared -->``, and not elsewhere (plans hold dates and ports).
A document's blocks run in order, in one bash process (``set -euo pipefail``: the first
command that fails ends it, named by the block it was in), in a temporary directory, with
the installed `reconcile` first on PATH and a sandbox of the bundled state started for
that document alone. The sandbox's address takes the place of
``http://127.0.0.1:8787``, where the README's second terminal would serve it.

A block that cannot run says so on the line above it, visibly in the Markdown source:
``<!-- docs-test: not run: WHY -->``; the test below lists every one of them, so a new one
shows in the diff. ``<!-- docs-test: answers y at the prompt ... -->`` runs the document
with a pseudo-terminal as stdin, where `y` is typed for each such block; that block's
stdout and stderr are the terminal too, as for a person typing it.

README.md runs in an empty directory (its walkthrough makes its own repository); a page
of docs/ runs in a git repository holding the example invites, committed on `main`, with
`origin/reconcile/applied` at that commit and an audit log of one applied update.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.cli import run_cli
from support.helpers import EXAMPLES, RECONCILE, REPO, sandbox_env

from reconciler.sandbox import Sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN = frozenset({"sh", "console"})
MARK = re.compile(r"^<!-- docs-test: (?P<what>.+?) -->$")
NOT_RUN = "not run: "
ANSWER_Y = "answers y at the prompt"
COMPARED = "output compared"
SANDBOX_URL = "http://127.0.0.1:8787"  # where `reconcile sandbox` serves by default

# Every block marked not run, by document and reason's start: a new one must be added here.
NOT_RUN_EXPECTED = {
    ("README.md", "it installs this checkout and runs this very suite"),
    ("README.md", "it serves until Ctrl-C"),
    ("README.md", "it needs the repository's address, which a copy fills in"),
    ("docs/commands.md", "each line is for another shell (bash, zsh, fish)"),
}


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    mark: str | None

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(REPO)}:{self.line}"

    def script(self) -> str:
        if self.language == "sh":
            return self.text
        return "\n".join(command for command, _ in self.commands())

    def commands(self) -> list[tuple[str, str]]:
        """A console block's commands, each with the output shown under it."""
        commands: list[tuple[str, list[str]]] = []
        continued = False
        for line in self.text.splitlines():
            if continued:
                commands[-1] = (f"{commands[-1][0]}\n{line}", [])
            elif line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
            continued = line.endswith("\\")
        return [(command, "\n".join(shown)) for command, shown in commands]


def blocks(document: Path) -> Iterator[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^```(\w*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while not lines[end].startswith("```"):
            end += 1
        above = lines[index - 1] if index else ""
        mark = MARK.match(above)
        yield Block(
            document,
            index + 1,
            opening.group(1),
            "\n".join(lines[index + 1 : end]),
            mark.group("what") if mark else None,
        )
        index = end + 1


def runnable(document: Path) -> list[Block]:
    return [b for b in blocks(document) if b.language in RUN]


def test_every_marker_is_known_and_every_block_not_run_is_listed() -> None:
    not_run = set()
    for document in DOCUMENTS:
        for block in runnable(document):
            if block.mark is None or block.mark.startswith(ANSWER_Y) or block.mark == COMPARED:
                continue
            assert block.mark.startswith(NOT_RUN), f"{block.where}: unknown mark {block.mark!r}"
            reason = block.mark.removeprefix(NOT_RUN).split(";")[0]
            not_run.add((str(block.document.relative_to(REPO)), reason))
    assert not_run == NOT_RUN_EXPECTED


def test_the_guide_has_commands_to_run() -> None:
    # The extraction itself: a README with no command found would pass everything.
    readme = [b for b in runnable(REPO / "README.md") if not (b.mark or "").startswith(NOT_RUN)]
    assert len(readme) >= 8
    assert any("reconcile adopt" in b.script() for b in readme)
    assert any(ANSWER_Y in (b.mark or "") and "reconcile apply" in b.script() for b in readme)


def _project(directory: Path) -> str:
    """The set-up of a docs/ page, as a script: the example invites in a repository."""
    shutil.copytree(EXAMPLES, directory / "invites")
    return "\n".join(
        [
            "git init --quiet --initial-branch=main .",
            "git add invites && git commit --quiet -m 'Invites under git'",
            "git update-ref refs/remotes/origin/reconcile/applied HEAD",
            "reconcile apply --auto-approve --target inv_7c2d4 --audit-log audit.jsonl >/dev/null",
        ]
    )


@pytest.mark.parametrize(
    "document",
    [d for d in DOCUMENTS if any(not (b.mark or "").startswith(NOT_RUN) for b in runnable(d))],
    ids=lambda d: str(d.relative_to(REPO)),
)
def test_the_commands_of_a_document_run(
    document: Path, start_sandbox: Callable[..., Sandbox], tmp_path: Path
) -> None:
    server = start_sandbox()
    env = sandbox_env(
        server,
        PATH=f"{Path(RECONCILE[0]).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        GIT_AUTHOR_NAME="Docs Test",
        GIT_AUTHOR_EMAIL="docs@example.invalid",
        GIT_COMMITTER_NAME="Docs Test",
        GIT_COMMITTER_EMAIL="docs@example.invalid",
        GIT_CONFIG_GLOBAL=os.devnull,
        NO_COLOR="1",
    )
    parts = ["set -euo pipefail"]
    if document != REPO / "README.md":
        parts.append(_project(tmp_path))
    answers = 0
    compared: list[tuple[str, str, Path]] = []  # where, the output shown, the output had
    for block in runnable(document):
        if block.mark is not None and block.mark.startswith(NOT_RUN):
            continue
        answered = ANSWER_Y in (block.mark or "")
        answers += answered
        parts.append(f"echo '@@ {block.where}' >&2")
        if block.mark == COMPARED:
            for index, (command, output) in enumerate(block.commands()):
                had = tmp_path.parent / f"{tmp_path.name}-{block.line}-{index}.out"
                compared.append((f"{block.where}: $ {command}", output, had))
                parts.append(f"{{\n{command}\n}} >{had}")
            continue
        script = block.script().replace(SANDBOX_URL, server.url)
        # Typed at the terminal, read there: apply asks only about a plan a person can see.
        parts.append(f"{{\n{script}\n}} >&0 2>&0" if answered else script)
    script = "\n".join(parts) + "\n"

    primary, secondary = os.openpty()  # stdin a terminal: `apply` asks, and `y` is typed
    shown: list[bytes] = []  # what the terminal showed, read as it comes (never blocking it)
    reader = threading.Thread(target=_read_all, args=(primary, shown), daemon=True)
    reader.start()
    try:
        os.write(primary, b"y\n" * answers)
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            stdin=secondary if answers else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    finally:
        os.close(secondary)
        reader.join(timeout=10)
        os.close(primary)

    last = [line for line in done.stderr.splitlines() if line.startswith("@@ ")]
    terminal = b"".join(shown).decode("utf-8", "replace")
    assert done.returncode == 0, (
        f"a command of {last[-1][3:] if last else document} exited {done.returncode}:\n"
        f"{done.stderr[-3000:]}\n--- stdout:\n{done.stdout[-2000:]}\n"
        f"--- the terminal:\n{terminal[-2000:]}"
    )
    for where, output, had in compared:
        assert had.read_text(encoding="utf-8").rstrip("\n") == output, where


def _read_all(primary: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: no process holds the terminal any more
            return
        if not chunk:
            return
        into.append(chunk)


def _invite_files() -> list[Block]:
    return [
        b
        for d in DOCUMENTS
        for b in blocks(d)
        if b.language == "yaml" and re.search(r"^invites:", b.text, re.MULTILINE)
    ]


@pytest.mark.parametrize("block", _invite_files(), ids=lambda b: b.where)
def test_every_invite_file_shown_validates(block: Block, tmp_path: Path) -> None:
    (tmp_path / "invites").mkdir()
    (tmp_path / "invites" / "shown.yaml").write_text(block.text + "\n", encoding="utf-8")
    done = run_cli("validate", cwd=tmp_path)
    assert done.returncode == 0, f"{block.where}:\n{done.stderr}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_docs_page_is_linked_from_the_readme_and_every_link_resolves() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"docs/{page.name} is not linked"
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            assert linked.exists(), f"{document.relative_to(REPO)}: {target}"
            if anchor and linked.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
                assert anchor in {_slug(h) for h in headings}, (
                    f"{document.relative_to(REPO)}: {target}"
                )
