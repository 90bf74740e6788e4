"""The GitOps workflow end to end: saved plans, JSON and Markdown, export, max-changes."""

from __future__ import annotations

import json

import yaml
from support.cli import run_cli
from support.helpers import EXAMPLES, sandbox_env
from support.invites import ACME, desired_entry, write_invites

from reconciler.output.markdown import COMMENT_LIMIT


def _two_changes(start_sandbox, tmp_path):
    other = dict(ACME, id="inv_other")
    server = start_sandbox([ACME, other])
    entries = [
        desired_entry(ACME, email="new@acme.example"),
        desired_entry(other, groups=["emea", "vip"]),
    ]
    write_invites(tmp_path / "invites", entries)
    return server, sandbox_env(server)


def test_saved_plan_applies_exactly_its_patches_even_after_the_yaml_moved_on(
    start_sandbox, tmp_path
):
    server, env = _two_changes(start_sandbox, tmp_path)
    plan = run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env)
    assert plan.returncode == 0, plan.stderr
    # Only the client that signed it can apply it: a CI's write client cannot.
    assert "apply it, with the same client, with: reconcile apply --plan plan.json" in plan.stderr
    # The YAML changes after review; the saved plan must not pick that up.
    write_invites(tmp_path / "invites", [desired_entry(ACME, email="later@acme.example")])
    apply = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert apply.returncode == 0, apply.stderr
    assert "Apply: 2 updated, 0 failed." in apply.stdout
    bodies = sorted(json.dumps(p.body) for p in server.stats.calls("PATCH"))
    assert bodies == sorted(
        [json.dumps({"email": "new@acme.example"}), json.dumps({"groups": ["emea", "vip"]})]
    )
    assert server.store.get("inv_acme")["email"] == "new@acme.example"


def test_stale_saved_plan_is_refused_whole_with_nothing_written(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    assert run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env).returncode == 0
    # Someone changes an invite on the platform after the plan was reviewed.
    server.store.put(dict(server.store.get("inv_other"), groups=["apac"]))
    apply = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "refusing the whole plan" in apply.stderr
    assert "inv_other" in apply.stderr and "`groups`" in apply.stderr
    assert "inv_acme" not in apply.stderr  # only what drifted is named
    assert server.stats.calls("PATCH") == []


def test_saved_plan_for_another_server_is_refused(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    assert run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env).returncode == 0
    elsewhere = start_sandbox([ACME])
    apply = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=sandbox_env(elsewhere))
    assert apply.returncode == 1
    assert server.url in apply.stderr and elsewhere.url in apply.stderr
    assert elsewhere.stats.calls("PATCH") == []


def test_corrupt_or_foreign_plan_files_get_a_clear_error(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    cases = {
        "truncated.json": '{"format_version": 1, "changes": [',
        "foreign.json": json.dumps({"name": "my-package", "version": "1.0.0"}),
        "future.json": json.dumps({"format_version": 7, "changes": []}),
        "binary.json": "\udcff",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8", errors="surrogateescape")
        result = run_cli("apply", "--plan", name, cwd=tmp_path, env=env)
        assert result.returncode == 1, name
        assert name in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert (
        "format_version 7"
        in run_cli("apply", "--plan", "future.json", cwd=tmp_path, env=env).stderr
    )
    assert server.stats.calls("PATCH") == []


def test_json_output_is_the_documented_plan_document(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    write_invites(tmp_path / "invites", [{"id": "inv_gone", "name": "Nobody"}], name="z.yaml")
    result = run_cli("plan", "--format", "json", "--out", "saved.json", cwd=tmp_path, env=env)
    assert result.returncode == 1  # one error
    document = json.loads(result.stdout)
    assert document["format_version"] == 2
    assert document["base_url"] == server.url
    assert document["summary"] == {
        "update": 2,
        "resend": 0,
        "unchanged": 0,
        "error": 1,
        "conflict": 0,
    }
    first = document["changes"][0]
    assert first["id"] == "inv_acme"
    assert first["source"] == "invites/invites.yaml:2"
    assert first["before"] == {"email": "old@acme.example"}
    assert first["after"] == first["patch"] == {"email": "new@acme.example"}
    assert first["resend"] is False
    (error,) = document["errors"]
    assert error["id"] == "inv_gone" and "404" in error["message"]
    assert error["source"] == "invites/z.yaml:2"
    saved = json.loads((tmp_path / "saved.json").read_text(encoding="utf-8"))
    assert saved["changes"] == document["changes"]


def test_markdown_plan_has_a_table_and_stays_under_the_comment_limit(start_sandbox, tmp_path):
    count = 400  # past the limit already at 300: the plan is folded, "Not shown" the rest
    state = [
        dict(ACME, id=f"inv_{i:05d}", name=f"Société Nº{i} — Ünïcødé Holdings Ltd")
        for i in range(count)
    ]
    server = start_sandbox(state)
    entries = [desired_entry(s, email=f"new{i}@acme.example") for i, s in enumerate(state)]
    write_invites(tmp_path / "invites", entries)
    result = run_cli("plan", "--format", "markdown", cwd=tmp_path, env=sandbox_env(server))
    assert result.returncode == 0, result.stderr
    comment = result.stdout
    assert comment.startswith(f"### Invite plan: {count} to update, 0 unchanged, 0 errors.")
    assert "| field | before | after |" in comment
    assert (
        '| email | <code>"old@acme.example"</code> | <code>"new0@acme.example"</code> |' in comment
    )
    assert "<details>" in comment and "</details>" in comment
    assert len(comment) <= COMMENT_LIMIT
    assert "Not shown" in comment and "change" in comment


def test_small_markdown_plan_is_complete_and_unfolded(start_sandbox, tmp_path):
    _server, env = _two_changes(start_sandbox, tmp_path)
    comment = run_cli("plan", "--format", "markdown", cwd=tmp_path, env=env).stdout
    assert "<details>" not in comment and "Not shown" not in comment
    assert comment.count("| field | before | after |") == 2
    assert '<code>+ "vip"</code><br><code>- "enterprise"</code>' in comment


def test_export_round_trips_to_a_clean_plan(sandbox, tmp_path):
    ids = [inv["id"] for inv in yaml.safe_load((EXAMPLES / "emea.yaml").read_text())["invites"]]
    ids += ["inv_0z9y8", "inv_5q5q5"]  # an accepted one and one not in the examples
    env = sandbox_env(sandbox)
    (tmp_path / "invites").mkdir()
    export = run_cli("export", *ids, "--out", "invites/exported.yaml", cwd=tmp_path, env=env)
    assert export.returncode == 0, export.stderr
    text = (tmp_path / "invites" / "exported.yaml").read_text(encoding="utf-8")
    assert text.startswith("# yaml-language-server: $schema=")
    assert 'phone: "+442079460000"' in text
    assert "Müller & Söhne GmbH" in text  # unicode kept readable
    assert run_cli("validate", cwd=tmp_path).returncode == 0
    plan = run_cli("plan", "--detailed-exitcode", cwd=tmp_path, env=env)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"Plan: 0 to update, {len(ids)} unchanged, 0 errors." in plan.stdout


def test_export_of_an_unknown_id_names_it_and_writes_the_others(sandbox, tmp_path):
    result = run_cli(
        "export", "inv_8f2k1", "inv_nope", "--out", "x.yaml", cwd=tmp_path, env=sandbox_env(sandbox)
    )
    assert result.returncode == 1
    assert "inv_nope" in result.stderr and "404" in result.stderr
    written = (tmp_path / "x.yaml").read_text(encoding="utf-8")
    assert "id: inv_8f2k1" in written and "inv_nope" not in written


def test_max_changes_warns_in_the_plan_and_apply_refuses(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    plan = run_cli("plan", "--max-changes", "1", cwd=tmp_path, env=env)
    assert "more than max_changes (1)" in plan.stdout
    markdown = run_cli("plan", "--max-changes", "1", "--format", "markdown", cwd=tmp_path, env=env)
    assert "more than max_changes (1)" in markdown.stdout
    apply = run_cli("apply", "--auto-approve", "--max-changes", "1", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "refusing to apply" in apply.stderr
    # From the config file too, and for saved plans.
    (tmp_path / "reconciler.yaml").write_text("max_changes: 1\n", encoding="utf-8")
    # plan fails the check apply would fail (exit 1), and still saves the plan it shows.
    assert run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env).returncode == 1
    saved = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert saved.returncode == 1 and "max_changes" in saved.stderr
    assert server.stats.calls("PATCH") == []
    allowed = run_cli("apply", "--auto-approve", "--max-changes", "2", cwd=tmp_path, env=env)
    assert allowed.returncode == 0, allowed.stderr


def test_saved_plan_keeps_the_max_changes_it_was_reviewed_under(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    plan = run_cli("plan", "--max-changes", "1", "--out", "plan.json", cwd=tmp_path, env=env)
    assert "apply will refuse this plan" in plan.stdout
    requests_for_plan = server.stats.total
    # No limit in this run's settings: the plan's own limit still holds.
    apply = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "more than max_changes (1)" in apply.stderr
    assert server.stats.total == requests_for_plan  # refused before any request
    # A reviewer looking at the artifact gets the advice that can work for it.
    shown = run_cli("show", "plan.json", cwd=tmp_path, env=env)
    assert "This plan was made with --max-changes 1; make a new plan" in shown.stdout
    assert "Split the change" not in shown.stdout


def test_a_hand_edited_saved_plan_is_refused(start_sandbox, tmp_path):
    server, env = _two_changes(start_sandbox, tmp_path)
    assert run_cli("plan", "--out", "plan.json", cwd=tmp_path, env=env).returncode == 0
    document = json.loads((tmp_path / "plan.json").read_text(encoding="utf-8"))
    document["changes"][0]["patch"] = {"email": "evil@attacker.example"}
    (tmp_path / "plan.json").write_text(json.dumps(document), encoding="utf-8")
    apply = run_cli("apply", "--plan", "plan.json", cwd=tmp_path, env=env)
    assert apply.returncode == 1
    assert "edited by hand or is damaged" in apply.stderr
    assert server.stats.calls("PATCH") == []


def test_export_never_overwrites_a_file_without_force(sandbox, tmp_path):
    env = sandbox_env(sandbox)
    target = tmp_path / "apac.yaml"
    target.write_text("invites: []\n", encoding="utf-8")
    refused = run_cli("export", "inv_6p3j9", "--out", str(target), cwd=tmp_path, env=env)
    assert refused.returncode == 1
    assert "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == "invites: []\n"
    forced = run_cli("export", "inv_6p3j9", "--out", str(target), "--force", cwd=tmp_path, env=env)
    assert forced.returncode == 0, forced.stderr
    assert "inv_6p3j9" in target.read_text(encoding="utf-8")


def test_manual_resends_are_audited(sandbox, tmp_path):
    env = sandbox_env(sandbox)
    args = ["resend", "--auto-approve", "--audit-log", "audit.jsonl"]
    refused = run_cli(*args, "inv_8f2k1", "inv_nope", cwd=tmp_path, env=env)
    assert refused.returncode == 1 and "inv_nope: HTTP 404" in refused.stderr
    assert not (tmp_path / "audit.jsonl").exists()  # nothing was sent, nothing to record
    sandbox.store.put(dict(sandbox.store.get("inv_3m9q7"), status="accepted"))
    result = run_cli(*args, "inv_8f2k1", "inv_7c2d4", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "Resend: 2 re-sent, 0 failed." in result.stdout
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(x["record"], x["invite_id"]) for x in lines] == [
        ("attempt", "inv_8f2k1"),
        ("outcome", "inv_8f2k1"),
        ("attempt", "inv_7c2d4"),
        ("outcome", "inv_7c2d4"),
    ]
    outcomes = [x for x in lines if x["record"] == "outcome"]
    assert [(x["invite_id"], x["operation"], x["outcome"], x["http_status"]) for x in outcomes] == [
        ("inv_8f2k1", "resend", "ok", 200),
        ("inv_7c2d4", "resend", "ok", 200),
    ]
    assert all(x["request_id"] for x in outcomes)
    assert all(x["plan_hash"] is None for x in lines)
    assert sandbox.store.resends["inv_8f2k1"] == 1
    # An invite no longer pending is refused before anything is sent, like an unknown id.
    accepted = run_cli(*args, "inv_8f2k1", "inv_3m9q7", cwd=tmp_path, env=env)
    assert accepted.returncode == 1 and "inv_3m9q7: is accepted, not pending" in accepted.stderr
    assert sandbox.store.resends["inv_8f2k1"] == 1


def test_a_refused_token_request_is_one_run_level_error(sandbox, tmp_path):
    write_invites(tmp_path / "invites", [{"id": "inv_8f2k1"}, {"id": "inv_3m9q7"}])
    env = sandbox_env(sandbox, RECONCILER_SCOPE="kyb:everything")
    result = run_cli("plan", cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert result.stderr.count("unknown scope") == 1
    assert "RECONCILER_SCOPE" in result.stderr
    assert sandbox.stats.calls("GET") == []
