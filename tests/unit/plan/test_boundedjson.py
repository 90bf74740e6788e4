"""Reading a JSON file from outside (a saved plan): size, UTF-8, depth, keys."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.errors import ReconcilerError
from reconciler.plan.boundedjson import loads_bounded, read_bounded_text

WHAT = "a plan file"


def refusal(text: str, max_depth: int = 3, path: str = "plan.json") -> str:
    with pytest.raises(ReconcilerError) as refused:
        loads_bounded(text, path, max_depth, WHAT)
    return str(refused.value)


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_bytes(b"[" + b" " * 998 + b"]")
    assert read_bounded_text(str(plan), 1000, WHAT) == "[" + " " * 998 + "]"
    plan.write_bytes(b"[" + b" " * 999 + b"]")
    with pytest.raises(ReconcilerError) as refused:
        read_bounded_text(str(plan), 1000, WHAT)
    assert str(refused.value) == f"{plan}: larger than 1,000 bytes: too large for a plan file"


def test_a_limit_of_whole_mebibytes_is_said_in_mib(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_bytes(b" " * (1048576 + 1))
    with pytest.raises(ReconcilerError, match=r": larger than 1 MiB: too large for a plan file$"):
        read_bounded_text(str(plan), 1048576, WHAT)


def test_a_fifo_or_device_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    # `apply --plan FIFO` with no writer would block for ever; /dev/zero never ends.
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    with pytest.raises(ReconcilerError) as refused:
        read_bounded_text(str(fifo), 1000, WHAT)
    assert str(refused.value) == (
        f"{fifo}: cannot read a plan file: it is a FIFO (named pipe), not a regular file"
    )
    with pytest.raises(ReconcilerError, match=r"^/dev/zero: .* it is a device, not a regular"):
        read_bounded_text("/dev/zero", 1000, WHAT)


def test_a_file_that_is_not_utf8_is_not_a_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_bytes(b'{"name": "Caf\xe9"}')
    with pytest.raises(ReconcilerError) as refused:
        read_bounded_text(str(plan), 1000, WHAT)
    assert str(refused.value) == f"{plan}: not a plan file (not UTF-8 text)"


def test_a_missing_file_says_why_it_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "gone.json"
    with pytest.raises(ReconcilerError) as refused:
        read_bounded_text(str(missing), 1000, WHAT)
    assert str(refused.value) == f"{missing}: cannot read a plan file: No such file or directory"


def test_a_file_name_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    message = refusal("[", path="evil\x1b]0;PWNED\x07.json")
    assert "\x1b" not in message and "\x07" not in message
    assert message.startswith("evil\\x1b]0;PWNED\\x07.json:")


def test_nesting_up_to_the_limit_is_read() -> None:
    assert loads_bounded('{"a": [[1]], "b": [[2], {"c": 3}]}', "plan.json", 3, WHAT) == {
        "a": [[1]],
        "b": [[2], {"c": 3}],
    }


def test_many_brackets_side_by_side_are_not_depth() -> None:
    text = "[" + ",".join(["[[]]"] * 500) + "]"
    assert len(loads_bounded(text, "plan.json", 3, WHAT)) == 500


def test_one_level_past_the_limit_is_refused_at_its_bracket() -> None:
    text = '{\n  "changes": [\n    {"patch": {"groups": [\n'
    assert refusal(text + "]}}]}", max_depth=3) == ("plan.json:3:15: nested too deeply (limit 3)")


def test_closed_brackets_no_longer_count_towards_depth() -> None:
    assert loads_bounded("[[[]], [[1]], {}]", "plan.json", 3, WHAT) == [[[]], [[1]], {}]
    # Depth 3 closed, then depth 4: refused where the fourth level opens.
    assert refusal("[[[]], [[[1]]]]", max_depth=3) == "plan.json:1:10: nested too deeply (limit 3)"


def test_the_position_follows_depth_down_and_up_again() -> None:
    # Depth 4, down to 2, then up past 4: refused at the bracket that makes 5.
    assert (
        refusal("[[[[]], [[[1]]]]]", max_depth=4) == "plan.json:1:11: nested too deeply (limit 4)"
    )


def test_a_leading_blank_line_counts_in_the_position() -> None:
    assert refusal("\n[[[[1]]]]", max_depth=3) == "plan.json:2:4: nested too deeply (limit 3)"


def test_depth_is_refused_before_json_is_parsed() -> None:
    # json.loads would recurse once per level and could crash the interpreter;
    # a truncated document this deep is refused for its depth, not its syntax.
    assert refusal("[" * 100_000, max_depth=64) == "plan.json:1:65: nested too deeply (limit 64)"


def test_brackets_inside_strings_are_text_not_nesting() -> None:
    name = 'Acme [[[{{{ \\"quoted [[[ \\" }}}'
    text = f'{{"name": "{name}", "groups": ["a[", "]]]]b"]}}'
    assert loads_bounded(text, "plan.json", 2, WHAT)["groups"] == ["a[", "]]]]b"]


def test_after_a_string_with_brackets_the_deep_bracket_is_still_found() -> None:
    text = '["[[[[", "\\"[[", [[[1]]]]'
    assert refusal(text, max_depth=3) == "plan.json:1:20: nested too deeply (limit 3)"


def test_invalid_json_names_line_and_column() -> None:
    assert refusal('{\n  "a": 1,\n  "b": }') == (
        "plan.json:3:8: not a plan file (invalid JSON: Expecting value)"
    )


def test_a_key_written_twice_is_refused_whatever_the_values() -> None:
    assert refusal('{"changes": [], "changes": []}') == (
        'plan.json: not a plan file (key "changes" appears twice)'
    )


def test_a_key_written_twice_is_named_escaped() -> None:
    message = refusal('{"a": {"\\u001b[31mred": 1, "\\u001b[31mred": 2}}')
    assert "\x1b" not in message
    assert message == 'plan.json: not a plan file (key "\\u001b[31mred" appears twice)'


def test_a_key_written_twice_is_named_as_written() -> None:
    assert refusal('{"Müller": 1, "Müller": 2}') == (
        'plan.json: not a plan file (key "Müller" appears twice)'
    )


def test_the_same_key_in_two_objects_is_fine() -> None:
    assert loads_bounded('[{"id": 1}, {"id": 2}]', "plan.json", 3, WHAT) == [{"id": 1}, {"id": 2}]


def test_a_number_python_refuses_to_convert_is_a_clear_error() -> None:
    assert refusal("[" + "1" * 5000 + "]") == "plan.json: not a plan file (ValueError)"
