"""When libyaml fails in a way the loader does not expect (another libyaml build,
an error without a position), the user still gets the file, a line and column
and a message: never a traceback, never an error placed nowhere."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from reconciler.desired.state import load_text
from reconciler.yamlload import source as yaml_source
from reconciler.yamlload.builder import DEPTH_LIMIT
from reconciler.yamlload.source import load_yaml

TEXT = "invites:\n  - id: inv_1\n    name: [[[[Acme]]]]\n"


class _FailingParser:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def get_event(self) -> Any:
        raise self.error

    def dispose(self) -> None:
        pass


@pytest.fixture
def libyaml_fails_on(monkeypatch: pytest.MonkeyPatch):
    """libyaml raising ``error`` on ``text``; any other text (a part of it) parses."""
    real = yaml_source._Parser

    def fail(text: str, error: Exception) -> None:
        monkeypatch.setattr(
            yaml_source,
            "_Parser",
            lambda source: _FailingParser(error) if source == text else real(source),
        )

    return fail


def _messages(text: str) -> list[str]:
    invites, problems = load_text(text, "team.yaml")
    assert invites == []
    return [str(p) for p in problems]


def _mark(line: int, column: int, index: int) -> yaml.Mark:
    return yaml.Mark("<file>", index, line, column, None, None)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (yaml.YAMLError("the stream broke"), "team.yaml:1:1: invalid YAML: the stream broke"),
        (yaml.MarkedYAMLError(), "team.yaml:1:1: invalid YAML"),
        (
            yaml.reader.ReaderError(
                "<file>", 3, 0x41, "utf-8", "special characters are not allowed"
            ),
            "team.yaml:1:1: a character YAML does not allow; save the file as text",
        ),
    ],
    ids=["error-without-position", "marked-error-without-marks", "refused-character-we-allow"],
)
def test_an_error_without_a_place_is_shown_at_the_first_line(libyaml_fails_on, error, expected):
    libyaml_fails_on(TEXT, error)
    assert _messages(TEXT) == [expected]


def test_the_config_loader_reports_it_the_same_way(libyaml_fails_on):
    text = "concurrency: 4\n"
    libyaml_fails_on(text, yaml.YAMLError("the stream broke"))
    loaded = load_yaml(text, "reconciler.yaml")
    assert loaded.document is None
    assert [str(p) for p in loaded.problems] == [
        "reconciler.yaml:1:1: invalid YAML: the stream broke"
    ]


def _too_deep(mark: yaml.Mark | None) -> yaml.MarkedYAMLError:
    return yaml.scanner.ScannerError(
        "while increasing flow level", None, "exceeded maximum nesting depth", mark
    )


def test_libyaml_stopping_deeper_than_our_limit_is_shown_where_ours_was_passed(libyaml_fails_on):
    text = "invites:\n  - id: inv_1\n    name: " + "[" * (DEPTH_LIMIT + 20) + "\n"
    libyaml_fails_on(text, _too_deep(_mark(2, len(text), len(text) - 1)))
    [message] = _messages(text)
    assert message.startswith("team.yaml:3:")
    assert f"nested too deeply (limit {DEPTH_LIMIT})" in message
    column = int(message.split(":")[2])
    assert column < len("    name: ") + DEPTH_LIMIT + 2  # at ours, not at libyaml's stop


def test_libyaml_stopping_before_our_limit_is_shown_where_libyaml_stopped(libyaml_fails_on):
    # A libyaml built with a lower limit than ours: the text up to its stop
    # is within our limit, so its own place is the best there is.
    libyaml_fails_on(TEXT, _too_deep(_mark(2, 14, len(TEXT) - 10)))
    assert _messages(TEXT) == [f"team.yaml:3:15: nested too deeply (limit {DEPTH_LIMIT})"]


def test_libyaml_stopping_without_a_place_is_shown_at_the_first_line(libyaml_fails_on):
    libyaml_fails_on(TEXT, _too_deep(None))
    assert _messages(TEXT) == [f"team.yaml:1:1: nested too deeply (limit {DEPTH_LIMIT})"]


def test_items_handed_to_the_hook_are_not_kept_in_the_document():
    # The whole point of the hook: a 60 MB file's invites are never all in memory.
    text = "invites:\n" + "".join(f"  - id: inv_{n}\n" for n in range(3)) + "other: [1, 2]\n"
    seen: list[tuple[int, Any]] = []
    document, problems, _ = yaml_source.stream(
        text,
        "team.yaml",
        yaml_source.Lines(text),
        "invites",
        lambda item: seen.append((item.index, item.value)),
    )
    assert problems == []
    assert seen == [(n, {"id": f"inv_{n}"}) for n in range(3)]
    assert document is not None
    assert document.value == {"invites": [], "other": [1, 2]}
