"""`reconcile adopt`, for random layouts and random platform values (issue 37).

Each example writes an invite file in a random layout (block and flow lists, comments
above, after and inside them, LF or CRLF, a BOM or none, plain, single- and
double-quoted scalars), serves random platform values from a real sandbox, runs the
real `adopt`, and holds the result to the contract: exactly the values that differ
are changed, every other byte is as it was (the expected text is built from the same
layout with the platform's values), and the result validates and plans clean.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import run_cli
from support.helpers import sandbox_env

from reconciler.sandbox import Sandbox
from reconciler.yamlload.builder import render_scalar

pytestmark = pytest.mark.real  # a property run of the real CLI: the real-parts stage

NAMES = st.text(
    alphabet=st.sampled_from(list("abcXYZ019 ,.[]{}#:'\"&-!?%@*|>é")), min_size=1, max_size=16
)
SPECIAL_NAMES = st.sampled_from(["yes", "NO", "12", "null", "~", "a: b", "a #b", "Acme, Inc."])
EMAILS = st.from_regex(r"[a-z]{1,8}@[a-z]{1,8}\.example", fullmatch=True)
ITEMS = ["emea", "apac", "us", "tier-1", "yes", "12", "a, b", "[x]", "o'k", "x#y", "é"]
STYLES = st.sampled_from([None, "'", '"'])
COMMENTS = st.one_of(st.just(""), st.sampled_from(["   # note", "  # a, b: [c]", " #x"]))


@dataclass
class Scalar:
    key: str
    value: str
    style: str | None
    trail: str  # a comment after the value, or ""


@dataclass
class Listed:
    key: str
    items: list[str]
    styles: list[str | None]
    flow: bool
    trails: list[str] = field(default_factory=list)  # block: each item's comment
    gaps: list[bool] = field(default_factory=list)  # block: a comment line before the item
    key_trail: str = ""  # a comment after `key:` (block) or after `]` (flow)
    inside: bool = False  # flow: a comment inside the brackets, the list on two lines
    after: bool = False  # a comment line after the list, at the key's indent
    spacing: str = ", "  # flow: the separator as typed


@dataclass
class Entry:
    id: str
    above: bool
    id_trail: str
    fields: list[Scalar | Listed]


@dataclass
class Layout:
    nl: str
    bom: bool
    header: bool
    entries: list[Entry]
    footer: bool


@st.composite
def scalar(draw: st.DrawFn, key: str) -> Scalar:
    value = draw(EMAILS if key == "email" else st.one_of(NAMES, SPECIAL_NAMES))
    return Scalar(key, value, draw(STYLES), draw(COMMENTS))


@st.composite
def listed(draw: st.DrawFn, key: str) -> Listed:
    items = draw(st.lists(st.sampled_from(ITEMS), unique=True, max_size=4))
    flow = not items or draw(st.booleans())
    inside = flow and len(items) >= 2 and draw(st.booleans())
    return Listed(
        key,
        items,
        [draw(STYLES) for _ in items],
        flow,
        trails=[draw(COMMENTS) for _ in items],
        gaps=[draw(st.booleans()) for _ in items],
        key_trail=draw(COMMENTS),
        inside=inside,
        after=draw(st.booleans()),
        spacing=draw(st.sampled_from([", ", ",", " ,  "])),
    )


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    entries = []
    for n in range(draw(st.integers(1, 3))):
        keys = draw(st.permutations(["name", "email", "groups", "attachments"]))
        keys = keys[: draw(st.integers(1, 4))]
        fields: list[Scalar | Listed] = [
            draw(scalar(k)) if k in ("name", "email") else draw(listed(k)) for k in keys
        ]
        entries.append(Entry(f"inv_{n}", draw(st.booleans()), draw(COMMENTS), fields))
    return Layout(
        draw(st.sampled_from(["\n", "\r\n"])),
        draw(st.booleans()),
        draw(st.booleans()),
        entries,
        draw(st.booleans()),
    )


@st.composite
def platform_values(draw: st.DrawFn, layout: Layout) -> dict[str, dict[str, Any]]:
    """Per entry: each managed field's value on the platform, the same or another."""
    values: dict[str, dict[str, Any]] = {}
    for entry in layout.entries:
        held: dict[str, Any] = {}
        for one in entry.fields:
            if not draw(st.booleans()):  # the same as the file
                held[one.key] = one.value if isinstance(one, Scalar) else list(one.items)
            elif isinstance(one, Scalar):
                held[one.key] = draw(EMAILS if one.key == "email" else NAMES)
            elif one.inside:  # only gains items: a removal there is left to the author
                extra = draw(st.lists(st.sampled_from(ITEMS), unique=True, max_size=3))
                held[one.key] = list(dict.fromkeys([*one.items, *extra]))
            else:
                held[one.key] = draw(st.lists(st.sampled_from(ITEMS), unique=True, max_size=4))
        values[entry.id] = held
    return values


# -- the file, as written and as adopt must leave it --------------------------------------------


def render(layout: Layout, values: dict[str, dict[str, Any]] | None = None) -> str:
    """The file of ``layout``; with ``values``, as adopt must leave it for them."""
    nl = layout.nl
    out = ["\ufeff" if layout.bom else ""]
    if layout.header:
        out.append(f"# Invites. Keep ids sorted.{nl}")
    out.append(f"invites:{nl}")
    for entry in layout.entries:
        if entry.above:
            out.append(f"  # {entry.id}, above its entry{nl}")
        out.append(f"  - id: {entry.id}{entry.id_trail}{nl}")
        held = values[entry.id] if values is not None else {}
        for one in entry.fields:
            new = held.get(one.key)
            if isinstance(one, Scalar):
                text = render_scalar(one.value, one.style, False)
                if new is not None and new != one.value:  # in the style the file shows
                    text = render_scalar(new, style_of(text), False)
                out.append(f"    {one.key}: {text}{one.trail}{nl}")
            elif new is None or set(new) == set(one.items):  # None: not adopted, as written
                out.append(_list_as_written(one, nl))
            else:
                out.append(_list_adopted(one, new, nl))
    if layout.footer:
        out.append(f"# the end{nl}")
    return "".join(out)


def style_of(text: str) -> str | None:
    """The style a scalar is written in: what the file shows, whatever was asked."""
    return text[0] if text[:1] in ("'", '"') else None


def _item(one: Listed, i: int) -> str:
    return render_scalar(one.items[i], one.styles[i], one.flow)


def _list_as_written(one: Listed, nl: str) -> str:
    after = f"    # after {one.key}{nl}" if one.after else ""
    if one.flow and one.inside:
        first, rest = (
            _item(one, 0),
            one.spacing.join(_item(one, i) for i in range(1, len(one.items))),
        )
        return f"    {one.key}: [{first},   # inside{nl}      {rest}]{one.key_trail}{nl}{after}"
    if one.flow:
        items = one.spacing.join(_item(one, i) for i in range(len(one.items)))
        return f"    {one.key}: [{items}]{one.key_trail}{nl}{after}"
    lines = [f"    {one.key}:{one.key_trail}{nl}"]
    for i in range(len(one.items)):
        if one.gaps[i]:
            lines.append(f"      # before {i}{nl}")
        lines.append(f"      - {_item(one, i)}{one.trails[i]}{nl}")
    return "".join(lines) + after


def _list_adopted(one: Listed, new: list[str], nl: str) -> str:
    """The contract for a set that differs: items kept where written, in their order;
    the platform's others after them, sorted; a removed item's comment kept."""
    after = f"    # after {one.key}{nl}" if one.after else ""
    held = set(new)
    kept = [i for i, item in enumerate(one.items) if item in held]
    added = sorted(held - set(one.items))
    if one.flow and one.inside:
        first, rest = (
            _item(one, 0),
            one.spacing.join(_item(one, i) for i in range(1, len(one.items))),
        )
        more = "".join(", " + render_scalar(v, None, True) for v in added)
        return (
            f"    {one.key}: [{first},   # inside{nl}      {rest}{more}]{one.key_trail}{nl}{after}"
        )
    if one.flow:
        texts = [_item(one, i) for i in kept] + [render_scalar(v, None, True) for v in added]
        return f"    {one.key}: [{', '.join(texts)}]{one.key_trail}{nl}{after}"
    empty = not kept and not added
    lines = [f"    {one.key}:{' []' if empty else ''}{one.key_trail}{nl}"]
    for i in range(len(one.items)):
        if one.gaps[i]:
            lines.append(f"      # before {i}{nl}")
        if i in kept:
            lines.append(f"      - {_item(one, i)}{one.trails[i]}{nl}")
        elif one.trails[i]:
            lines.append(f"      {one.trails[i].lstrip(' ')}{nl}")
    lines += [f"      - {render_scalar(v, None, False)}{nl}" for v in added]
    return "".join(lines) + after


def differing(layout: Layout, values: dict[str, dict[str, Any]]) -> int:
    count = 0
    for entry in layout.entries:
        for one in entry.fields:
            new = values[entry.id][one.key]
            if isinstance(one, Scalar):
                count += new != one.value
            else:
                count += set(new) != set(one.items)
    return count


@st.composite
def cases(draw: st.DrawFn) -> tuple[Layout, dict[str, dict[str, Any]]]:
    layout = draw(layouts())
    return layout, draw(platform_values(layout))


@settings(
    max_examples=int(os.environ.get("ADOPT_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_adopt_changes_exactly_the_values_that_differ_and_every_other_byte_stays(
    case: tuple[Layout, dict[str, dict[str, Any]]],
) -> None:
    layout, values = case
    written = render(layout)
    server_state = [{"id": i, "status": "pending", **held} for i, held in values.items()]
    with tempfile.TemporaryDirectory() as top, Sandbox(server_state) as server:
        root = Path(top)
        (root / "invites").mkdir()
        target = root / "invites" / "a.yaml"
        target.write_bytes(written.encode("utf-8"))
        env = sandbox_env(server)
        valid = run_cli("validate", cwd=root, env=env)
        assert valid.returncode == 0, written + valid.stderr

        result = run_cli("adopt", cwd=root, env=env)

        assert result.returncode == 0, written + result.stdout + result.stderr
        assert target.read_bytes().decode("utf-8") == render(layout, values), result.stdout
        assert len(result.stdout.splitlines()) == differing(layout, values)
        assert run_cli("validate", cwd=root, env=env).returncode == 0
        plan = run_cli("plan", "--detailed-exitcode", cwd=root, env=env)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert server.stats.calls("PATCH") == []
