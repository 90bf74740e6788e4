"""What the loader says about YAML constructs that have no place in an invite file,
hand-written or hostile: tags, aliases, anchors, odd keys, merges. Each message
points at the line and column to fix."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from reconciler.cli import run
from reconciler.desired.state import load_desired_state, load_file, load_text
from reconciler.errors import FileProblem, InputError
from reconciler.model.invite import RECONCILER_KEYS, updatable_fields
from reconciler.schema.check import invite_validators
from reconciler.settings.config import load_settings
from reconciler.yamlload.builder import DEPTH_LIMIT, Lines, Located, Mark, resolve_plain
from reconciler.yamlload.source import stream

ENTRY = "invites:\n  - id: inv_1\n"
READS_1230 = 'YAML reads 12:30 as a number (750); put it in quotes: "12:30"'
# "addOns, attachments, email, groups, id, name, phone, primaryContact, resendOnChange"
FIELDS = ", ".join(sorted([*RECONCILER_KEYS, *updatable_fields()]))

CASES = {
    "map tag on a value": (
        ENTRY + "    name: !!map Acme\n",
        ["3:11: the tag !!map needs a mapping, but the value is a single value"],
    ),
    "seq tag on a value": (
        ENTRY + "    name: !!seq Acme\n",
        ["3:11: the tag !!seq needs a list, but the value is a single value"],
    ),
    "str tag on a mapping": (
        ENTRY + "    name: !!str {a: 1}\n",
        ["3:11: the tag !!str needs a single value, but the value is a mapping"],
    ),
    "python tag": (
        ENTRY + "    name: !!python/object:os.system Acme\n",
        ["3:11: the tag !!python/object:os.system is not supported here; remove it"],
    ),
    "local tag": (
        ENTRY + "    name: !custom Acme\n",
        ["3:11: the tag !custom is not supported here; remove it"],
    ),
    "a value that does not fit its tag": (
        ENTRY + "    name: !!int abc\n",
        ["3:11: 'abc' does not fit its tag !!int; remove the tag or fix the value"],
    ),
    "a date that is no date": (
        ENTRY + "    name: !!timestamp 2026-13-45\n",
        ["3:11: '2026-13-45' does not fit its tag !!timestamp; remove the tag or fix the value"],
    ),
    "a plain value that looks like a date and is none": (
        ENTRY + "    name: 2026-13-45\n",
        ["3:11: YAML cannot read 2026-13-45; put it in quotes"],
    ),
    "a long one, cut at 40 characters": (
        ENTRY + "    name: 2026-13-45T10:00:00." + "1234567890" * 4 + "\n",
        ["3:11: YAML cannot read 2026-13-45T10:00:00.12345678901234567890…; put it in quotes"],
    ),
    "seq tag on a mapping": (
        ENTRY + "    name: !!seq {a: 1}\n",
        ["3:11: the tag !!seq needs a list, but the value is a mapping"],
    ),
    "map tag on a list": (
        ENTRY + "    name: !!map [a]\n",
        ["3:11: the tag !!map needs a mapping, but the value is a list"],
    ),
    "the non-specific tag leaves a list a list": (
        ENTRY + "    name: ! [a]\n",
        ["3:11: `name` must be text, not a list"],
    ),
    "an anchor name used again after its value ended": (
        "x-a: &x 1\nx-b: &x 2\n" + ENTRY,
        [
            "2:6: anchor `&x` is already defined on line 1; give this one another name",
        ],
    ),
    "undefined alias": (
        ENTRY + "    groups: *nothing\n",
        [
            "3:13: found undefined alias `*nothing` "
            "(an `*alias` needs an `&anchor` earlier in the file)"
        ],
    ),
    "alias inside its own anchor": (
        ENTRY + "    groups: &g [a, *g]\n",
        ["3:20: alias `*g` is used inside its own anchor"],
    ),
    "anchor defined twice": (
        "invites: &x\n  - id: inv_1\n    name: &x Acme\n",
        ["3:11: anchor `&x` is already defined on line 1; give this one another name"],
    ),
    "a list as a key": (
        ENTRY + "    [a, b]: 1\n",
        ["3:5: a key must be text, not a list; put the key in quotes"],
    ),
    "a mapping as a key": (
        ENTRY + "    {a: 1}: 1\n",
        ["3:5: a key must be text, not a mapping; put the key in quotes"],
    ),
    "an empty key": (
        ENTRY + "    ? \n    : 1\n",
        [
            "3:6: a key is empty; write a field name before the `:`",
            f"3:6: unknown field ``; allowed: {FIELDS}",
        ],
    ),
    "merge of a number": (
        ENTRY + "    <<: 5\n",
        ["3:9: `<<` merges a mapping or a list of mappings, not a number"],
    ),
    "merge of a text": (
        ENTRY + "    <<: abc\n",
        ["3:9: `<<` merges a mapping or a list of mappings, not text"],
    ),
    "merge of a list of numbers": (
        ENTRY + "    <<: [{name: A}, 5]\n",
        ["3:9: `<<` merges a mapping or a list of mappings, not a list holding a number"],
    ),
    "binary as a name": (
        ENTRY + "    name: !!binary aGVsbG8=\n",
        [
            "3:11: `name` must be text, but YAML reads aGVsbG8= as binary data; "
            'put it in quotes: "aGVsbG8="'
        ],
    ),
    "a merged value of the wrong kind, at its anchor": (
        "x-base: &b {groups: 5}\ninvites:\n  - <<: *b\n    id: inv_1\n",
        [
            "1:21: `groups` must be a list, not a number",
        ],
    ),
    "the second of two merged mappings, at its anchor": (
        "x-1: &b1 {name: A}\nx-2: &b2 {groups: {a: 1}}\n"
        "invites:\n  - <<: [*b1, *b2]\n    id: inv_1\n",
        [
            "2:19: `groups` must be a list, not a mapping",
        ],
    ),
    "a merged key and value, each shown at the anchor": (
        "x-base: &b {nmae: A, email: 5}\ninvites:\n  - <<: *b\n    id: inv_1\n",
        [
            "1:13: unknown field `nmae`; did you mean `name`?",
            '1:29: `email` must be text, but YAML reads 5 as a number; put it in quotes: "5"',
        ],
    ),
    "the same through a list of merges, in block style": (
        "x-b: &b\n  nmae: A\n  email: 5\ninvites:\n  - <<: [*b]\n    id: inv_1\n",
        [
            "2:3: unknown field `nmae`; did you mean `name`?",
            '3:10: `email` must be text, but YAML reads 5 as a number; put it in quotes: "5"',
        ],
    ),
    "a key written twice after a merge": (
        "x-base: &b {name: A}\ninvites:\n  - <<: *b\n    id: inv_1\n    name: B\n    name: C\n",
        [
            "6:5: duplicate key `name` (first set on line 5); "
            "YAML would silently keep only the last one",
        ],
    ),
    "a number too long for Python to print, unquoted": (
        ENTRY + "    name: 0x" + "f" * 5000 + "\n",
        ["3:11: YAML cannot read 0x" + "f" * 38 + "…; put it in quotes"],
    ),
    "the same with a tag": (
        ENTRY + "    name: !!int 0x" + "f" * 5000 + "\n",
        ["3:11: '0x" + "f" * 38 + "…' is out of range for !!int"],
    ),
    "an alias as a value, shown where it is used": (
        ENTRY + "    name: &n Acme\n    email: *n\n",
        ["4:12: `email`: 'Acme' is not a valid email address: it has no @-sign"],
    ),
    "an alias under a misspelt key, the key shown": (
        ENTRY + "    name: &n Acme\n    nmae: *n\n",
        ["4:5: unknown field `nmae`; did you mean `name`?"],
    ),
    "an alias as a key": (
        "invites:\n  - id: &i inv_1\n    *i : x\n",
        [f"3:5: unknown field `inv_1`; allowed: {FIELDS}"],
    ),
    "a key written twice: its second value is not read, the next key is": (
        ENTRY + "    name: A\n    name: 12:30\n    groups: 5\n",
        [
            "4:5: duplicate key `name` (first set on line 3); "
            "YAML would silently keep only the last one",
            "5:13: `groups` must be a list, not a number",
        ],
    ),
    "lines ended by a lone CR": (
        "invites:\r  - id: inv_1\r    name: A\r    groups: 5\r",
        ["4:13: `groups` must be a list, not a number"],
    ),
    # libyaml counts NEL, LS and PS as line breaks, and so does every position here:
    "lines ended by NEL, LS and PS": (
        "invites:\n  - id: inv_1\x85    name: A\u2028    email: a@b.example\u2029    groups: 5\n",
        ["5:13: `groups` must be a list, not a number"],
    ),
    "a nested field, at its own line": (
        ENTRY + "    name: A\n    primaryContact:\n      name: B\n      email: 5\n",
        [
            "6:14: `primaryContact.email` must be text, but YAML reads 5 as a number; "
            'put it in quotes: "5"'
        ],
    ),
    "a `<<` as a value is text": (ENTRY + "    name: <<\n", []),
    "an alias to an anchored `<<` key is the text `<<`": (
        ENTRY + "    &m <<: {groups: [a]}\n    name: *m\n",
        [],
    ),
    "an alias to 12:30 is quoted as written, at the alias": (
        ENTRY + "    email: &t 12:30\n    name: *t\n",
        [
            f"4:11: `name` must be text, but {READS_1230}",
            f"3:12: `email` must be text, but {READS_1230}",
        ],
    ),
    "a tagged number in quotes is not told to be quoted": (
        ENTRY + '    name: !!int "5"\n',
        ["3:11: `name` must be text, not a number"],
    ),
    "the non-specific tag reads a plain value as YAML would": (
        ENTRY + "    name: ! 12:30\n",
        [f"3:11: `name` must be text, but {READS_1230}"],
    ),
    "exactly 40 characters are shown whole": (
        ENTRY + "    name: 2026-13-45T10:00:00." + "1234567890" * 2 + "\n",
        ["3:11: YAML cannot read 2026-13-45T10:00:00.12345678901234567890; put it in quotes"],
    ),
    "41 characters are cut": (
        ENTRY + "    name: 2026-13-45T10:00:00." + "1234567890" * 2 + "1\n",
        ["3:11: YAML cannot read 2026-13-45T10:00:00.12345678901234567890…; put it in quotes"],
    ),
    "a !!float too large to hold (sexagesimal parts multiply by 60)": (
        ENTRY + "    name: !!float " + ":".join(["1"] * 200) + "\n",
        ["3:11: '" + "1:" * 20 + "…' is out of range for !!float"],
    ),
    "a tagged int of exactly 14,000 bits is a number": (
        ENTRY + "    name: !!int 0x" + "f" * 3500 + "\n",
        [
            "3:11: `name` must be text, but YAML reads 0x"
            + "f" * 38
            + "… as a number ("
            + str(2**14000 - 1)[:40]
            + "…); put it in quotes"  # too long to show whole, so no sample to copy
        ],
    ),
    "a tagged int of 14,001 bits is out of range": (
        ENTRY + "    name: !!int 0x1" + "0" * 3500 + "\n",
        ["3:11: '0x1" + "0" * 37 + "…' is out of range for !!int"],
    ),
    "a value that does not fit its tag: exactly 40 characters shown whole": (
        ENTRY + "    name: !!int " + "x" * 40 + "\n",
        ["3:11: '" + "x" * 40 + "' does not fit its tag !!int; remove the tag or fix the value"],
    ),
    "a value that does not fit its tag: 41 characters are cut": (
        ENTRY + "    name: !!int " + "x" * 41 + "\n",
        ["3:11: '" + "x" * 40 + "…' does not fit its tag !!int; remove the tag or fix the value"],
    ),
    "a key written twice in a file that starts with an empty line": (
        "\ninvites:\n  - id: inv_1\ninvites: []\n",
        [
            "4:1: duplicate key `invites` (first set on line 2); "
            "YAML would silently keep only the last one",
        ],
    ),
    "a `<<` in a list is text": (ENTRY + "    groups: [<<]\n", []),
    "an alias to an anchored `<<` key, shown as the text `<<`": (
        ENTRY + "    &m <<: {groups: [a]}\n    email: *m\n",
        [
            "4:12: `email`: '<<' is not a valid email address: "
            "an open angle bracket at the start of the email address has to be followed by a close "
            "angle bracket at the end"
        ],
    ),
    "a key written twice with text: the next key's value is still read": (
        ENTRY + "    name: A\n    name: B\n    groups: 5\n",
        [
            "4:5: duplicate key `name` (first set on line 3); "
            "YAML would silently keep only the last one",
            "5:13: `groups` must be a list, not a number",
        ],
    ),
    "a value written after a merge replaces the merged one, as written": (
        "x-base: &b {phone: +4420}\ninvites:\n  - <<: *b\n    id: inv_1\n    name: A\n"
        '    phone: !!int "5"\n',
        [
            "6:12: `phone` must be text, not a number",
        ],
    ),
    "a tagged key in quotes is named by its value": (
        ENTRY + '    !!int "5": x\n',
        [
            '3:5: YAML reads the key 5 as a number; put it in quotes: "5"',
            f"3:5: unknown field `5`; allowed: {FIELDS}",
        ],
    ),
    "a key YAML reads as a number is no duplicate of a merged key": (
        "x-base: &b {'5': a}\ninvites:\n  - <<: *b\n    id: inv_1\n    5: x\n",
        [
            '5:5: YAML reads the key 5 as a number; put it in quotes: "5"',
            f"5:5: unknown field `5`; allowed: {FIELDS}",
        ],
    ),
    "text read as a number, 40 characters: shown whole to copy": (
        ENTRY + "    name: " + "1" * 40 + "\n",
        [
            f"3:11: `name` must be text, but YAML reads {'1' * 40} as a number; "
            f'put it in quotes: "{"1" * 40}"'
        ],
    ),
    "text read as a number, 41 characters: too long to copy from a message": (
        ENTRY + "    name: " + "1" * 41 + "\n",
        [f"3:11: `name` must be text, but YAML reads {'1' * 40}… as a number; put it in quotes"],
    ),
    "an unknown tag on a mapping": (
        ENTRY + "    name: !custom {a: 1}\n",
        ["3:11: the tag !custom is not supported here; remove it"],
    ),
    "an anchor name used again for a list after its list ended": (
        "x-a: &x [1]\nx-b: &x [2]\n" + ENTRY,
        [
            "2:6: anchor `&x` is already defined on line 1; give this one another name",
        ],
    ),
    "two merge keys in one mapping": (
        "invites:\n  - &base {id: inv_1, name: Acme, groups: [emea]}\n  - <<: *base\n"
        "    id: inv_2\n    <<: {name: Bolt}\n",
        [
            "5:5: duplicate key `<<` (first set on line 3); "
            "YAML would silently keep only the last one"
        ],
    ),
    "two documents": (
        ENTRY + "---\n" + ENTRY,
        ["3:1: holds more than one YAML document; keep one document per file"],
    ),
}


@pytest.mark.parametrize(("text", "shown"), CASES.values(), ids=CASES.keys())
def test_each_construct_is_refused_where_it_is(text: str, shown: list[str]) -> None:
    problems = load_text(text, "t.yaml")[1]  # any problem stops the run before a request
    assert [str(p) for p in problems] == [f"t.yaml:{s}" for s in shown]


def nested_alias(anchored: int, around: int) -> str:
    return (
        "a: &deep " + "[" * anchored + "]" * anchored
        + "\nb: " + "[" * around + "*deep" + "]" * around + "\n"
    )  # fmt: skip


def shared_list(items: int, aliases: int) -> str:
    return "a: &x [" + ",".join(["1"] * items) + "]\nb: [" + ",".join(["*x"] * aliases) + "]\n"


def text_aliases(aliases: int) -> str:
    return "a: &x t\nb: [" + ",".join(["*x"] * aliases) + "]\n"


def in_an_anchor(lists: int) -> str:  # `out` is [[x]]: two levels, written as one list
    return "a: &in [x]\nb: &out [*in]\nc: " + "[" * lists + "*out" + "]" * lists + "\n"


def lists(levels: int) -> str:
    return "invites: " + "[" * levels + "]" * levels + "\n"


TOO_DEEP = f"nested too deeply (limit {DEPTH_LIMIT})"
EXPAND = "aliases expand to more than {} values (limit 100000 plus 10 per value written); write the values out"  # noqa: E501
# Each bound met exactly and passed by one: (the text, the file's problems of nesting or
# aliases; one crossing a bound is the file's only problem).
BOUNDS = {
    # The top mapping is level 1: 1 + 49 around + 50 in the alias is the limit.
    "an alias carrying nesting to the limit": (nested_alias(50, 49), []),
    "one level more, at the alias": (nested_alias(50, 50), [f"2:54: {TOO_DEEP}"]),
    # 2,505 values written (2,500 items, two lists, a mapping, two keys) allow
    # 100,000 + 10 x 2,505 = 125,050 values through aliases: 50 uses of 2,501.
    "aliases expanding to their allowance": (shared_list(2500, 50), []),
    "one use more": (shared_list(2500, 51), ["2:155: " + EXPAND.format(125050)]),
    # 5 values written (the mapping, two keys, the text, the list) allow 100,050 text aliases.
    "text aliases to their allowance": (text_aliases(100_050), []),
    "one text alias more": (text_aliases(100_051), ["2:300155: " + EXPAND.format(100050)]),
    # 1 (the top mapping) + 99 lists: the limit, with a text at the bottom.
    "a text alias adds no nesting": ("a: &s x\nb: " + "[" * 99 + "*s" + "]" * 99 + "\n", []),
    "nesting through an alias inside an anchor, to the limit": (in_an_anchor(97), []),
    "one level more": (in_an_anchor(98), [f"3:102: {TOO_DEEP}"]),
    "99 lists in the top mapping: the limit": (lists(DEPTH_LIMIT - 1), []),
    "one list more": (lists(DEPTH_LIMIT), [f"1:109: {TOO_DEEP}"]),
    # A bomb built by redefining one anchor, each time nine copies of the last.
    "an anchor redefined until it multiplies": (
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(f"k{n}: &a [" + ", ".join(["*a"] * 9) + "]\n" for n in range(12)),
        ["6:9: " + EXPAND.format(100220)],
    ),
    # libyaml scans the whole `[[[...` before handing out an event, and refuses it at 1,000
    # levels; the text up to there is read again to find our limit, and the repeated key on
    # the way must not break that second reading.
    "deep flow nesting after a repeated key, at our limit": (
        "invites: []\nx: {a: 1, a: 2, b: " + "[" * 1100 + "\n",
        [f"2:118: {TOO_DEEP}"],
    ),
}


@pytest.mark.parametrize(("text", "shown"), BOUNDS.values(), ids=BOUNDS.keys())
def test_nesting_and_aliases_are_bounded_exactly(text: str, shown: list[str]) -> None:
    assert DEPTH_LIMIT == 100
    problems = [str(p) for p in load_text(text, "t.yaml")[1]]
    expected = [f"t.yaml:{s}" for s in shown]
    assert [p for p in problems if "nested" in p or "aliases expand" in p] == expected
    assert problems == expected or not expected


# From test_loader_hostile.py:
# Hostile invite and config files: refused with a placed message, exit 1.
#
# Each file is what an attacker or an unlucky merge could put in a pull request;
# the run must end with `path:line:col: message` lines and exit code 1, never a
# traceback, a crash, minutes of CPU or gigabytes of memory.
WriteYaml = Callable[[str, str], Path]


def billion_laughs(levels: int = 9) -> str:
    """The classic: each level lists the previous one nine times (9**9 "lol"s at level 9)."""
    names = "abcdefghi"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        aliases = ",".join([f"*{names[level - 1]}"] * 9)
        lines.append(f"{names[level]}: &{names[level]} [{aliases}]")
    return "invites:\n  - id: inv_1\n" + "".join(f"    {line}\n" for line in lines)


def reconcile(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = run(list(args))
    return code, capsys.readouterr().err.splitlines()


def only(problems: list[FileProblem]) -> FileProblem:
    assert len(problems) == 1, "\n".join(map(str, problems))
    return problems[0]


# -- 1: alias expansion is bounded ------------------------------------------------------


def test_billion_laughs_is_refused_at_the_alias_that_crosses_the_bound(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml("bomb.yaml", billion_laughs())
    assert len(path.read_bytes()) < 600  # the 524-byte file of the report, give or take

    tracemalloc.start()
    try:
        code, err = reconcile("validate", str(path), capsys=capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert code == 1
    # Line 8 holds level f (9**6 "lol"s): its first alias crosses 100,000 values.
    assert err[0].startswith(f"{path}:8:12: aliases expand to more than")
    assert peak < 20 * 2**20  # nothing was expanded: it was 4 GB


def test_an_anchor_shared_by_hundreds_of_invites_still_loads(write_yaml: WriteYaml) -> None:
    entries = "".join(
        f"  - id: inv_{n:03d}\n    name: Société Nº{n}\n    groups: *emea\n" for n in range(1, 400)
    )
    path = write_yaml(
        "shared.yaml",
        "invites:\n  - id: inv_000\n    name: Müller GmbH\n"
        "    groups: &emea [emea, enterprise, priority]\n" + entries,
    )

    state = load_desired_state([str(path)])

    assert len(state.invites) == 400
    assert {tuple(i.fields["groups"]) for i in state.invites} == {
        ("emea", "enterprise", "priority")
    }


# -- 2: nesting depth is bounded before any recursion ------------------------------------


@pytest.mark.parametrize(
    ("text", "position"),
    [
        pytest.param("invites: " + "[" * 30000 + "\n", (1, 10 + DEPTH_LIMIT - 1), id="brackets"),
        pytest.param("invites:\n" + "- " * 100000 + "x\n", (2, 2 * DEPTH_LIMIT - 1), id="dashes"),
        pytest.param("invites:\n  - id: inv_1\n    name: " + "{a: " * 5000 + "\n", None, id="maps"),
    ],
)
def test_deep_nesting_is_refused_with_its_position(
    write_yaml: WriteYaml, text: str, position: tuple[int, int] | None
) -> None:
    path = write_yaml("deep.yaml", text)

    problem = only(load_file(path)[1])

    assert problem.message == f"nested too deeply (limit {DEPTH_LIMIT})"
    if position is not None:
        assert (problem.line, problem.column) == position


def test_a_deep_config_file_is_refused_too(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text("paths: " + "[" * 40000 + "\n", encoding="utf-8")

    with pytest.raises(InputError) as caught:
        load_settings(str(config), env={})

    assert str(caught.value) == f"{config}:1:{8 + DEPTH_LIMIT - 1}: nested too deeply (limit 100)"


def test_deep_files_exit_1_with_a_message_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "reconciler.yaml").write_text("paths: " + "[" * 40000 + "\n", encoding="utf-8")
    invites = tmp_path / "deep.yaml"
    invites.write_text("invites:\n" + "- " * 100000 + "x\n", encoding="utf-8")

    for args in (["--config", str(tmp_path / "reconciler.yaml"), str(invites)], [str(invites)]):
        code, err = reconcile("validate", *args, capsys=capsys)
        assert code == 1
        assert "nested too deeply (limit 100)" in err[0]
        assert err[-1] == "Found 1 problem."  # validate never sends: it never says so


# -- 3: ids match as a whole --------------------------------------------------------------


def test_an_id_with_a_trailing_newline_is_refused(
    write_yaml: WriteYaml, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml("ids.yaml", 'invites:\n  - id: "inv_1\\n"\n  - id: "inv_1"\n')

    code, err = reconcile("validate", str(path), capsys=capsys)

    assert code == 1
    assert err[0] == (
        f"{path}:2:9: `id`: 'inv_1\\n' is not a valid inviteId "
        "(1 to 128 letters, digits, `_`, `-`, `.`, and not dots alone)"
    )
    assert len(err) == 2


@pytest.mark.parametrize("value", ["inv_1\n", "..\n", "+442079460000\n"])
def test_the_schema_patterns_refuse_a_final_newline(value: str) -> None:
    # The shipped schema alone (as editors and other tools use it) must refuse it.
    field = "phone" if value.startswith("+") else "id"
    entry = {"id": "inv_1", field: value}

    assert not invite_validators().entry.is_valid(entry)
    assert invite_validators().entry.is_valid({**entry, field: value.rstrip("\n")}) is (
        value != "..\n"
    )


def test_an_email_with_a_trailing_newline_is_refused(write_yaml: WriteYaml) -> None:
    path = write_yaml("email.yaml", 'invites:\n  - id: inv_1\n    email: "a@b.example\\n"\n')

    problem = only(load_file(path)[1])

    assert "'a@b.example\\n' is not a valid email address" in problem.message


# -- 4: duplicate merge keys ----------------------------------------------------------------


def test_merge_key_in_a_sequence_of_mappings_keeps_the_first_mapping_s_value(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        "merge.yaml",
        "invites:\n"
        "  - &a {id: inv_a, name: First, groups: [emea]}\n"
        "  - &b {id: inv_b, name: Second, addOns: [edd]}\n"
        "  - <<: [*a, *b]\n"
        "    id: inv_c\n",
    )

    invites, problems = load_file(path)

    assert problems == []
    assert invites[2].fields == {"name": "First", "groups": ["emea"], "addOns": ["edd"]}


# -- 5: control characters are never written raw -----------------------------------------------


def test_file_names_with_control_characters_are_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "invites"
    folder.mkdir()
    hostile = folder / "a\x1b]0;PWNED\x07\nb.yaml"
    hostile.write_text("invites:\n  - id: inv_1\n    emial: x@y.example\n", encoding="utf-8")
    (folder / "c.yaml").write_text("invites:\n  - id: inv_1\n", encoding="utf-8")

    code, err = reconcile("validate", str(folder), capsys=capsys)

    assert code == 1
    shown = f"{folder}/a\\x1b]0;PWNED\\x07\\nb.yaml"
    assert err == [
        f"{shown}:3:5: unknown field `emial`; did you mean `email`?",
        f"{folder}/c.yaml:2:5: invite id `inv_1` is already defined at {shown}:2",
        "Found 2 problems.",
    ]


def test_values_and_keys_with_control_characters_are_shown_escaped(
    write_yaml: WriteYaml,
) -> None:
    path = write_yaml(
        "values.yaml",
        'invites:\n  - id: inv_1\n    email: "x\\e]0;PWNED\\a@y.example"\n    "emial\\r": z\n',
    )

    problems = load_file(path)[1]

    text = "\n".join(str(p) for p in problems)
    assert not any(c in text.replace("\n", "") for c in "\x1b\x07\r")
    assert "'x\\x1b]0;PWNED\\x07@y.example' is not a valid email address" in text
    assert "unknown field `emial\\r`" in text


# Where a loaded value's parts were written, asked for parts that were not.
#
# A problem can name a part the file does not have (a field left out, an index past the end, a
# field inside a plain value): the message then points at the deepest part that was written, never
# at another part, and never fails.

TEXT = """\
invites:
  - id: inv_1
    name: Acme
    email: kyb@acme.example
    phone: +442079460000
"""


def located(text: str = TEXT) -> Located:
    document = stream(text, "t.yaml", Lines(text)).document
    assert document is not None
    return document


def test_a_part_that_was_written_is_found_whole() -> None:
    document = located()
    spot, _, taken = document.walk(("invites", 0, "name"))
    assert taken == 3 and spot is None  # a plain value holds nothing
    assert document.mark(("invites", 0, "name")) == Mark(3, 11)


def test_a_field_left_out_points_at_its_entry() -> None:
    document = located()
    spot, position, _ = document.walk(("invites", 0))

    assert document.walk(("invites", 0, "addOns")) == (spot, position, 2)
    assert document.mark(("invites", 0, "addOns")) == Mark(2, 5)


def test_a_field_inside_a_plain_value_points_at_the_value() -> None:
    document = located()
    position = document.walk(("invites", 0, "name"))[1]

    assert document.walk(("invites", 0, "name", "first")) == (None, position, 3)
    assert document.mark(("invites", 0, "name", "first")) == Mark(3, 11)


def test_an_index_past_the_end_or_a_name_in_a_list_points_at_the_list() -> None:
    document = located()
    spot, position, _ = document.walk(("invites",))
    for step in (1, 5, -1, "id"):  # 1: one past the only entry
        assert document.walk(("invites", step, "id")) == (spot, position, 1), step
        assert document.mark(("invites", step)) == Mark(2, 3), step


def test_a_key_is_shown_where_it_was_written() -> None:
    assert located().key_mark(("invites", 0, "email")) == Mark(4, 5)


def test_a_key_under_a_part_left_out_is_shown_at_the_deepest_part_written() -> None:
    # `email` is a key of the entry, but not of the `primaryContact` left out:
    # pointing at the entry's `email` would send the reader to the wrong line.
    document = located()
    assert document.key_mark(("invites", 0, "primaryContact", "email")) == Mark(2, 5)
    assert document.key_mark(("invites", 0, "name", "first")) == Mark(3, 11)


def test_the_text_yaml_read_as_a_number_is_kept_only_where_it_was_written() -> None:
    document = located()
    assert document.raw(("invites", 0, "phone")) == "+442079460000"
    assert document.raw(("invites", 0, "name")) is None  # read as text
    assert document.raw(("invites", 0, "primaryContact", "phone")) is None  # left out
    assert document.raw(("invites", 0, "phone", "x")) is None
    assert document.raw(()) is None


# What YAML 1.1 makes of a plain scalar: what PyYAML's resolver makes of it.

TEXTS = [
    "name",
    "no",
    "No",
    "null",
    "~",
    "",
    "12",
    "1_000",
    "0x1f",
    "1.5",
    "2026-11-26",
    "nfc",
    "on",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_plain_scalar_resolves_as_pyyaml_resolves_it(text: str) -> None:
    expected = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    assert resolve_plain(text) == expected
