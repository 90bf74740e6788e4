"""Whatever a file or a server hands the tool, it answers with its own error, never a crash.

Every input the reconciler reads from outside (desired-state YAML, a saved
plan, an API response body) is fuzzed here. The property is always the same:
either a result, or the tool's own error type carrying a message a user can
read; never any other exception, which would reach the user as a traceback.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import requests_mock
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.api.client import ApiClient
from reconciler.api.exceptions import ApiError
from reconciler.desired.state import DesiredState, load_desired_state
from reconciler.errors import FileProblem, InputError, ReconcilerError
from reconciler.model.invite import CurrentInvite, updatable_fields
from reconciler.output.text import TextRenderer
from reconciler.plan.model import Plan
from reconciler.plan.saved import plan_chunks, plan_digest, plan_from_document, read_plan_document
from reconciler.settings.config import Settings

pytestmark = pytest.mark.real  # big fuzz runs: the real-parts stage

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# -- desired-state files ----------------------------------------------------------------


def assert_loads_or_reports(path: Path, text: str | None = None) -> None:
    """The run either yields a DesiredState or an InputError of well-formed problems."""
    try:
        state = load_desired_state([str(path)])
    except InputError as exc:
        assert exc.problems, "an InputError must list at least one problem"
        max_line = len(text.splitlines()) + 1 if text is not None else None
        for problem in exc.problems:
            assert isinstance(problem, FileProblem)
            assert problem.path == str(path)
            assert problem.line >= 1, problem
            assert problem.column >= 1, problem
            assert problem.message.strip(), problem
            if max_line is not None:
                assert problem.line <= max_line, f"{problem} (file has {max_line - 1} lines)"
    else:
        assert isinstance(state, DesiredState)
        assert state.files == [str(path)]
        for invite in state.invites:
            assert isinstance(invite.id, str)
            assert "resendOnChange" not in invite.fields


YAML_FRAGMENTS = [
    "invites:", "invites: ", "\n", "\n", "\n  ", "\n    ", "  ", "    ", "- ", "- id: ",
    "  - id: inv_8f2k1", "id: ", "name: ", "email: ", "phone: ", "primaryContact:", "groups: ",
    "addOns: ", "attachments: ", "resendOnChange: ", "emial: ", "&a ", "*a", "&b ", "*b", "<<: ",
    "<<: *a", "!!python/object:os.system ", "!!python/name:os.system", "!!binary ", "!!set ",
    "!!omap ", "!!str ", "!!int ", "!!float ", "!!timestamp ", "!local ", "\t", "{", "}", "[",
    "]", ", ", ":", ": ", "? ", "'", '"', "|", "|-\n", ">\n", "#", " # comment", "---\n", "...\n",
    "%YAML 1.1\n", "%TAG ! tag:example.com,2000:\n", "\\", "@", "`", "%", "~", "null", "NO",
    "yes", "12:30", "0755", "1e3", "2024-01-02", "+442079460000", "a@b.example", "inv_1",
    "Müller & Söhne GmbH", "株式会社サクラ商事", "🙂", "\r\n", "\r", "\u2028", "\x85", "\ufeff",
    "\x00", "\x07", "\x0c", "\x1b",
]  # fmt: skip

yamlish_text = st.lists(
    st.one_of(st.sampled_from(YAML_FRAGMENTS), st.text(max_size=4)), max_size=40
).map("".join)


@FUZZ
@given(text=st.one_of(st.text(), yamlish_text))
@example(text="invites:\n  - id: inv_8f2k1\n    name: Acme\x07 Ltd\n")
@example(text="invites:\n  - id: inv_8f2k1\n    phone: !!int +44 20 7946 0000\n")
@example(text="invites:\n  - id: inv_8f2k1\n    groups: !!seq emea\n")
@example(text="invites:\n  - &a {id: inv_1}\n  - <<: *a\n    id: inv_2\n")
@example(text="invites:\n  - id: [a, b]\n")
@example(text="a: &a [*a]\n")
@example(text="invites:\n  - ? [a, b]\n    : x\n")
@example(text="invites: " + "[" * 30000 + "\n")
@example(text="invites:\n" + "- " * 20000 + "x\n")
@example(
    text="a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"{n}: &a [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" for n in "bcdefghi")
)
@example(text='invites:\n  - id: "inv_1\\n"\n  - id: inv_1\n  - <<: {id: x}\n    <<: {id: y}\n')
def test_any_text_in_a_desired_state_file_loads_or_is_reported(workdir: Path, text: str) -> None:
    path = workdir / "fuzz.yaml"
    path.write_text(text, encoding="utf-8", newline="")

    assert_loads_or_reports(path, text)


@FUZZ
@given(data=st.binary(max_size=200))
@example(data="name: Müller".encode("latin-1"))
@example(data=b"\xef\xbb\xbfinvites: []\n")
@example(data=b"invites:\n  - id: a\xff\n")
@example(data="invites: []\n".encode("utf-16"))
def test_any_bytes_in_a_desired_state_file_load_or_are_reported(workdir: Path, data: bytes) -> None:
    path = workdir / "fuzz.yaml"
    path.write_bytes(data)

    assert_loads_or_reports(path)


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
FIELD_NAMES = ["invites", "id", *updatable_fields(), "resendOnChange", "emial"]
yaml_keys = st.one_of(
    st.sampled_from(FIELD_NAMES), st.text(max_size=10), st.integers(), st.booleans(), st.none()
)
nested = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(yaml_keys, children, max_size=5),
    ),
    max_leaves=15,
)
invite_like = st.dictionaries(st.sampled_from(FIELD_NAMES), nested, max_size=6)
documents = st.one_of(
    nested,
    st.fixed_dictionaries({"invites": st.lists(invite_like, max_size=5)}),
    st.fixed_dictionaries(
        {"invites": st.lists(st.fixed_dictionaries({"id": st.text(max_size=10)}), max_size=5)}
    ),
)


@FUZZ
@given(
    document=documents,
    flow=st.sampled_from([None, True, False]),
    unicode=st.booleans(),
)
def test_any_yaml_structure_loads_or_is_reported(
    workdir: Path, document: Any, flow: bool | None, unicode: bool
) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow, allow_unicode=unicode, sort_keys=False)
    path = workdir / "structure.yaml"
    path.write_text(text, encoding="utf-8", newline="")

    assert_loads_or_reports(path, text)


# -- saved plan files ---------------------------------------------------------------------

VALID_PLAN: dict[str, Any] = {
    "format_version": 1,
    "created_at": "2026-11-22T10:00:00.000Z",
    "base_url": "https://api.example.com",
    "changes": [
        {
            "id": "inv_8f2k1",
            "source": "invites/acme.yaml:3",
            "before": {"email": "old@acme.example"},
            "after": {"email": "new@acme.example"},
            "patch": {"email": "new@acme.example"},
            "resend": False,
        }
    ],
    "errors": [
        {"id": "inv_gone", "source": "invites/acme.yaml:20", "message": "invite not found (404)"}
    ],
    "summary": {"update": 1, "unchanged": 12, "error": 1},
}


def assert_plan_or_error(path: Path) -> None:
    try:
        plan = plan_from_document(read_plan_document(str(path)), str(path))
    except ReconcilerError as exc:
        assert str(path) in str(exc), f"the error must name the file: {exc}"
    else:
        assert isinstance(plan, Plan)
        # `apply --plan` shows the plan and hashes it for the audit log: neither may crash.
        TextRenderer().render(plan)
        plan_digest(plan)
        "".join(plan_chunks(plan))


def test_the_plan_from_the_spec_loads(workdir: Path) -> None:
    # The base of the mutations below: it must load, or the fuzzing proves nothing.
    path = workdir / "plan.json"
    path.write_text(json.dumps(VALID_PLAN), encoding="utf-8")

    plan = plan_from_document(read_plan_document(str(path)), str(path))

    assert [(c.id, c.patch, c.before) for c in plan.changes] == [
        ("inv_8f2k1", {"email": "new@acme.example"}, {"email": "old@acme.example"})
    ]
    assert plan.summary == (1, 12, 1, 0, 0)
    assert plan.base_url == "https://api.example.com"


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@FUZZ
@given(value=json_values)
def test_any_json_value_as_a_plan_file_loads_or_is_refused(workdir: Path, value: Any) -> None:
    path = workdir / "plan.json"
    path.write_text(json.dumps(value), encoding="utf-8")

    assert_plan_or_error(path)


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
@example(data=json.dumps(VALID_PLAN).encode()[:-7])  # truncated
@example(data=b"\xef\xbb\xbf" + json.dumps(VALID_PLAN).encode())
@example(data=json.dumps(VALID_PLAN).encode("utf-16"))
def test_any_bytes_as_a_plan_file_are_refused_with_the_file_named(
    workdir: Path, data: bytes
) -> None:
    path = workdir / "plan.json"
    path.write_bytes(data)

    assert_plan_or_error(path)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_plans(draw: st.DrawFn) -> Any:
    document: Any = copy.deepcopy(VALID_PLAN)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if not path:
            document = draw(json_values) if action == "replace" else document
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if action == "drop":
            del parent[last]
        elif action == "replace":
            parent[last] = draw(json_values)
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from([*FIELD_NAMES, "name", "status", "x"]))] = draw(json_values)
        else:
            parent.append(draw(json_values))
    return document


@FUZZ
@given(document=mutated_plans())
def test_mutated_plan_files_load_or_are_refused(workdir: Path, document: Any) -> None:
    path = workdir / "plan.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    assert_plan_or_error(path)


# -- API response bodies --------------------------------------------------------------------

BASE_URL = "https://api.example.test"
INVITE_ID = "inv_8f2k1"
INVITE_URL = f"{BASE_URL}/public-api/v1/kyb/invites/{INVITE_ID}"
TOKEN_BODY = {
    "status": 201,
    "success": True,
    "message": "ok",
    "data": {"access_token": "t", "token_type": "Bearer", "expires_in": 3600},
    "metadata": {"requestId": "1", "timestamp": "x"},
}


def envelope(status: Any, data: Any, message: Any, metadata: Any) -> dict[str, Any]:
    return {
        "status": status,
        "success": True,
        "message": message,
        "data": data,
        "metadata": metadata,
    }


invite_objects = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "status": st.one_of(st.sampled_from(["pending", "accepted"]), json_values),
        **{name: json_values for name in updatable_fields()},
        "createdAt": json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=100),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(
        envelope,
        st.one_of(st.just(200), json_values),
        st.one_of(invite_objects, json_values),
        json_values,
        st.one_of(st.fixed_dictionaries({"requestId": json_values}), json_values),
    ).map(lambda v: json.dumps(v).encode()),
)
header_text = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
headers = st.fixed_dictionaries(
    {},
    optional={
        "Content-Type": st.one_of(
            st.sampled_from(["application/json", "text/html; charset=utf-8", "text/plain"]),
            header_text,
        ),
        "Retry-After": st.one_of(
            st.sampled_from(
                ["0", "5", "-1", "nan", "inf", "1e309", "Wed, 21 Oct 2015 07:28:00 GMT"]
            ),
            header_text,
        ),
        "X-Request-Id": header_text,
    },
)
statuses = st.one_of(
    st.sampled_from([200, 201, 204, 400, 401, 403, 404, 409, 422, 429, 500, 502, 503, 504]),
    st.integers(100, 999),
)


@FUZZ
@given(status=statuses, body=bodies, response_headers=headers)
@example(status=200, body=b"", response_headers={})
@example(status=200, body=b"<html>proxy</html>", response_headers={"Content-Type": "text/html"})
@example(status=502, body=b'{"status": 502, "success": false', response_headers={})
@example(
    status=200, body=json.dumps({"data": {"id": INVITE_ID}})[:-3].encode(), response_headers={}
)
@example(status=429, body=b"", response_headers={"Retry-After": "inf"})
@example(status=304, body=json.dumps({"data": {"id": INVITE_ID}}).encode(), response_headers={})
def test_any_answer_to_get_invite_is_an_invite_or_an_api_error(
    status: int, body: bytes, response_headers: dict[str, str]
) -> None:
    with requests_mock.Mocker() as mock:
        mock.post(f"{BASE_URL}/oauth/token", json=TOKEN_BODY, status_code=201)
        mock.get(INVITE_URL, status_code=status, content=body, headers=response_headers)
        now = [0.0]  # a clock that moves only when the client sleeps: no real waits
        client = ApiClient(
            Settings(
                base_url=BASE_URL,
                client_id="c",
                client_secret="fuzz-secret",
                max_attempts=1,
                # A 429 is not counted against max_attempts: the budget ends its retries.
                retry_max_seconds=1,
            ),
            clock=lambda: now[0],
            sleep=lambda seconds: now.__setitem__(0, now[0] + seconds),
        )
        try:
            invite = client.get_invite(INVITE_ID)
        except ApiError as exc:
            assert str(exc).strip()
        else:
            assert isinstance(invite, CurrentInvite)
            # Only a successful answer may be taken for the invite.
            assert 200 <= status <= 299, f"HTTP {status} was taken for an invite"
            data: Any = json.loads(body)
            data = data.get("data") if isinstance(data, dict) and "data" in data else data
            # A null is no value held: the same as a field left out.
            sent = {k: data[k] for k in updatable_fields() if data.get(k) is not None}
            assert invite.fields == sent
        finally:
            client.close()
