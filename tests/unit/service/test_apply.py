"""``apply_plan``: each change written through the applier, watched as it ends, and what
came of it (``Applied``) for the command or the Ansible module to say."""

from __future__ import annotations

from pathlib import Path

from support.fake_platform import IDS, FakePlatform, answer, read_records

from reconciler.apply.applier import ChangeResult
from reconciler.desired.state import DesiredState
from reconciler.plan.model import InviteChange
from reconciler.service.apply import Watch, apply_plan
from reconciler.service.online import open_service
from reconciler.settings.config import Settings


class Seen(Watch):
    """A Watch that records what it is told."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def started(self, done: list[InviteChange], total: int) -> None:
        self.events += [f"already {change.id}" for change in done] + [f"started {total}"]

    def result(self, result: ChangeResult) -> None:
        self.events.append(f"{result.outcome.name.lower()} {result.change.id}")

    def ended(self) -> None:
        self.events.append("ended")


def test_each_change_is_written_and_watched_as_it_ends(
    settings: Settings, state: DesiredState, platform: FakePlatform, tmp_path: Path
) -> None:
    settings = settings.with_overrides(audit_log=str(tmp_path / "audit.jsonl"))
    seen = Seen()
    with open_service(settings) as service:
        applied = apply_plan(service, service.plan(state), watch=seen)
    assert applied.ok and applied.failures == [] and applied.fatal == []
    assert platform.writes() == [("PATCH", i) for i in IDS]
    assert seen.events[0] == "started 3" and seen.events[-1] == "ended"
    assert sorted(seen.events[1:-1]) == sorted(f"updated {i}" for i in IDS)
    records = read_records(tmp_path / "audit.jsonl")
    assert {r["invite_id"] for r in records if r["record"] == "attempt"} == set(IDS)


def test_a_failed_write_is_a_failure_with_the_servers_answer(
    settings: Settings, state: DesiredState, platform: FakePlatform
) -> None:
    platform.on_update(IDS[1], **answer(422, "email is not deliverable", "r-422"))
    with open_service(settings) as service:
        applied = apply_plan(service, service.plan(state))
    assert not applied.ok and applied.fatal == []
    (failed,) = applied.failures
    assert (failed.id, failed.status, failed.request_id) == (IDS[1], 422, "r-422")
    assert "email is not deliverable" in failed.message
