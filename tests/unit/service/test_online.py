"""The service online (``Service``): the plan of the files against the invites read now,
and a saved plan checked against the server before any write."""

from __future__ import annotations

import pytest
from support.fake_platform import BASE, IDS, INVITES, FakePlatform, answer

from reconciler.desired.state import DesiredState
from reconciler.errors import ReconcilerError
from reconciler.sandbox import SANDBOX_CLIENT_SECRET
from reconciler.service.online import open_service, signing_secret
from reconciler.settings.config import Settings


def test_the_plan_holds_each_invite_that_differs_and_only_what_differs(
    settings: Settings, state: DesiredState, platform: FakePlatform
) -> None:
    with open_service(settings) as service:
        plan = service.plan(state)
    assert [change.id for change in plan.changes] == IDS
    assert plan.changes[0].patch == {"email": "compliance@sakura-shoji.example"}
    assert set(plan.changes[1].patch) == {"name", "email"}  # the accents fixed too
    assert not plan.failed and plan.summary.update == 3
    assert plan.base_url == BASE  # the server it was read from, named in the plan
    assert platform.writes() == []  # a plan never writes


def test_an_invite_that_cannot_be_read_is_in_the_plan_as_failed(
    settings: Settings, state: DesiredState, platform: FakePlatform
) -> None:
    platform.mock.get(INVITES + IDS[1], **answer(404, "no such invite", "r-404"))
    with open_service(settings) as service:
        plan = service.plan(state)
    assert [change.id for change in plan.changes] == [IDS[0], IDS[2]]
    (failed,) = plan.failed
    assert failed.id == IDS[1] and failed.status == 404


def test_a_saved_plan_is_refused_whole_once_the_server_has_left_it(
    settings: Settings, state: DesiredState, platform: FakePlatform
) -> None:
    with open_service(settings) as service:
        plan = service.plan(state)
        assert service.check_saved(plan, "plan.json") == frozenset()  # nothing moved
        platform.held[IDS[2]]["email"] = "changed@in-the-console.example"
        with pytest.raises(ReconcilerError, match=r"plan\.json: refusing the whole plan"):
            service.check_saved(plan, "plan.json")
    assert platform.writes() == []


def test_a_sandbox_run_signs_with_the_sandbox_s_own_secret(settings: Settings) -> None:
    assert signing_secret(settings, sandbox=True) == SANDBOX_CLIENT_SECRET
    assert signing_secret(settings, sandbox=False) == settings.client_secret
