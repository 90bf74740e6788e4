"""load_settings: precedence, secrets kept out of the config file, clear errors."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli import run_cli
from support.git import git
from support.helpers import REPO, clean_env

from reconciler.errors import ConfigError, InputError, ReconcilerError
from reconciler.safetext import escape
from reconciler.settings.config import CI_MARKERS, ENV_VARS, Settings, load_settings
from reconciler.settings.contract import DEFAULT_SCOPE

SECRET = "cs_live_Zq9xSECRETvalue"


@pytest.fixture(autouse=True)
def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No stray reconciler.yaml from the repository may leak into these tests.
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], str]:
    def write(text: str, name: str = "conf/reconciler.yaml") -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


def _repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, cwd: str) -> Path:
    """A git repository with ``config`` as its reconciler.yaml, the run in its ``cwd``."""
    repo = tmp_path / "repo"
    (repo / cwd).mkdir(parents=True)
    git(repo, "init", "--quiet")
    (repo / "reconciler.yaml").write_text(config)
    monkeypatch.chdir(repo / cwd)
    return repo


# Every setting the environment may set, and two only the file sets: the option's, then
# the variable's, then the file's, then the default, each converted as the others are.
PRECEDENCE = [
    # (setting, default, (in the file, read as), (in the environment, read as), option)
    ("base_url", None, ("https://file.example", "https://file.example"),
     ("https://env.example", "https://env.example"), "https://option.example"),
    ("client_id", None, ("from-file", "from-file"), ("from-env", "from-env"), "from-option"),
    ("scope", DEFAULT_SCOPE, ("kyb:invites:read",) * 2, ("custom:scope",) * 2, "a:b"),
    ("token_auth_method", "client_secret_post", ("client_secret_basic",) * 2,
     ("client_secret_post",) * 2, "client_secret_basic"),
    ("parallelism", None, ("4", 4), ("8", 8), 2),
    ("max_parallelism", 64, ("32", 32), ("16", 16), 8),
    ("max_changes", None, ("10", 10), ("0", 0), 3),
    ("max_resends", None, ("5", 5), ("1", 1), 2),
    ("timeout", 30.0, ("10", 10.0), ("2.5", 2.5), 1.0),
    ("max_response_bytes", 4 * 1024 * 1024, ("2048", 2048), ("4096", 4096), 1024),
    ("max_rate", None, ("20", 20.0), ("7.5", 7.5), 3.0),
    ("max_attempts", 5, ("3", 3), None, 2),
    ("retry_max_seconds", 60.0, ("1.5", 1.5), None, 9.0),
]  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "default", "file", "env", "option"), PRECEDENCE, ids=[r[0] for r in PRECEDENCE]
)
def test_a_setting_is_the_option_s_then_the_variable_s_then_the_file_s_then_the_default(
    config: Callable[[str], str],
    setting: str,
    default: object,
    file: tuple[str, object],
    env: tuple[str, object] | None,
    option: object,
) -> None:
    def value(settings: Settings) -> object:
        return settings.contract.scope if setting == "scope" else getattr(settings, setting)

    assert load_settings(None, env={}) == Settings()
    assert value(Settings()) == default
    path = config(f"{setting}: {file[0]}\n")
    settings = load_settings(path, env={})
    assert value(settings) == file[1]
    if env is not None:
        variable = f"RECONCILER_{setting.upper()}"
        assert ENV_VARS[setting] == variable
        # An empty variable changes nothing.
        assert value(load_settings(path, env={variable: ""})) == file[1]
        settings = load_settings(path, env={variable: env[0]})
        assert value(settings) == env[1]
    assert value(settings.with_overrides(**{setting: option})) == option
    assert settings.with_overrides(**{setting: None}) == settings  # an option not given
    assert value(settings) == (env or file)[1]  # the original is untouched


def test_default_config_file_is_read_from_working_directory() -> None:
    assert load_settings(None, env={}).paths == ("invites",)  # none: the defaults
    Path("reconciler.yaml").write_text("scope: kyb:invites:read\nparallelism: 3\n")

    settings = load_settings(None, env={})

    assert settings.contract.scope == "kyb:invites:read"
    assert settings.parallelism == 3


def test_reconciler_yaml_is_found_up_to_the_repository_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 39, row 6: run from inside invites/, the project's file is found, as
    # pre-commit finds its own; its paths read from where the run is.
    _repo(tmp_path, monkeypatch, "paths: [invites]\naudit_log: audit.jsonl\n", "invites/emea")

    settings = load_settings(None, env={})

    assert settings.paths == (os.path.join("..", "..", "invites"),)
    assert settings.audit_log == os.path.join("..", "..", "audit.jsonl")


def test_a_file_found_above_without_paths_reads_the_invites_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(tmp_path, monkeypatch, "parallelism: 3\n", "invites")

    settings = load_settings(None, env={})

    assert settings.parallelism == 3
    assert settings.paths == (os.path.join("..", "invites"),)


def test_no_file_is_read_above_the_repository_top_or_outside_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "reconciler.yaml").write_text("parallelism: 3\n")  # above the repository
    repo = tmp_path / "repo"
    (repo / "invites").mkdir(parents=True)
    git(repo, "init", "--quiet")
    monkeypatch.chdir(repo / "invites")
    assert load_settings(None, env={}).parallelism is None

    (tmp_path / "plain" / "sub").mkdir(parents=True)  # no git: the working directory only
    (tmp_path / "plain" / "reconciler.yaml").write_text("parallelism: 3\n")
    monkeypatch.chdir(tmp_path / "plain" / "sub")
    assert load_settings(None, env={}).parallelism is None


@pytest.mark.parametrize(
    "key", ["client_secret", "token", "password", "access_token", "Client_Secret"]
)
def test_secret_in_config_file_is_an_error_naming_file_line_and_key(
    config: Callable[[str], str], key: str
) -> None:
    path = config(f"base_url: https://api.example.com\n{key}: {SECRET}\n")

    with pytest.raises(ReconcilerError) as caught:
        load_settings(path, env={})

    text = str(caught.value)
    assert f"{path}:2:" in text
    assert key in text
    assert "RECONCILER_CLIENT_SECRET" in text
    assert SECRET not in text


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("nope/secret", None, "cannot read: No such file or directory"),
        ("secret", b"", "file is empty"),
        ("secret", b"   \n\t\n", "file is empty"),
        ("secret", b"\xff\xfe" + SECRET.encode(), "cannot read: not UTF-8 text"),
        ("secret\x1b]0;PWNED\x07", None, "cannot read: No such file or directory"),
    ],
    ids=["missing", "empty", "blank", "not-utf8", "control-characters"],
)
def test_a_client_secret_file_without_a_secret_is_refused_naming_it_never_its_content(
    tmp_path: Path, name: str, content: bytes | None, said: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={"RECONCILER_CLIENT_SECRET_FILE": str(path)})
    # The name shown escaped: no control character reaches the terminal.
    assert str(caught.value) == f"RECONCILER_CLIENT_SECRET_FILE={escape(str(path))}: {said}"
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        *(
            ("RECONCILER_PARALLELISM", v, "is not a whole number")
            for v in ("eight", "4.5", "8 workers", "\u0663", "1_0", "\uff15")  # ٣, ５: no one types
        ),
        ("RECONCILER_TIMEOUT", "1_0", "is not a number of seconds"),
        *(
            ("RECONCILER_PARALLELISM", v, "must be at least 1 and at most 256")
            for v in ("0", "257", "1000")
        ),
        ("RECONCILER_TIMEOUT", "0", "must be more than 0 and at most 3600"),
        *(
            ("RECONCILER_TIMEOUT", v, "is not a finite number of seconds")
            for v in ("nan", "inf", "-inf", "NaN")
        ),
        # 1e10 s once reached the clock's arithmetic and ended in an OverflowError traceback.
        ("RECONCILER_TIMEOUT", "1e10", "must be more than 0 and at most 3600"),
        ("RECONCILER_TIMEOUT", "3601", "must be more than 0 and at most 3600"),
        *(
            ("RECONCILER_MAX_RATE", v, "must be at least 0.2 and at most 100000")
            for v in ("0", "-1", "0.0001", "1e6")  # 0.0001, attack t3: hours for a run
        ),
        ("RECONCILER_MAX_RATE", "fast", "is not a number of requests per second"),
        ("RECONCILER_MAX_RATE", "inf", "is not a finite number of requests per second"),
        (
            "RECONCILER_TOKEN_AUTH_METHOD",
            "private_key_jwt",
            "must be client_secret_post or client_secret_basic",
        ),
    ],
)
def test_a_value_from_the_environment_is_refused_naming_the_variable_and_value(
    name: str, value: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={name: value})
    assert str(caught.value) == f"{name}: {value!r} {said}"


def test_a_long_value_is_quoted_cut_short() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={"RECONCILER_MAX_CHANGES": "1" * 5000})
    assert str(caught.value) == f"RECONCILER_MAX_CHANGES: {'1' * 40!r}... is not a whole number"


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent.yaml")

    with pytest.raises(ConfigError) as caught:
        load_settings(missing, env={})

    assert missing in str(caught.value)


def test_relative_paths_resolve_against_the_config_files_directory(
    config: Callable[[str], str], tmp_path: Path
) -> None:
    git(tmp_path, "init", "-q")  # ../shared and the absolute path: inside the repository
    absolute = str(tmp_path / "elsewhere")
    path = config(f"paths:\n  - invites\n  - ../shared/invites\n  - {absolute}\n")

    settings = load_settings(path, env={})

    resolved = [Path(p).resolve() for p in settings.paths]
    assert resolved == [
        (tmp_path / "conf" / "invites").resolve(),
        (tmp_path / "shared" / "invites").resolve(),
        Path(absolute).resolve(),
    ]


@pytest.mark.parametrize("in_git", [True, False])
@pytest.mark.parametrize("where", ["outside", "../outside", "link", "sub/../../outside"])
def test_paths_may_not_leave_the_repository_as_symlinks_may_not(
    config: Callable[[str], str], tmp_path: Path, where: str, in_git: bool
) -> None:
    """Issue 37 row 8: `paths` confined like symbolic links, in git or beside the config;
    issue 51: refused at the entry, as written and where it leads."""
    repo = tmp_path / "repo"
    repo.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.yaml").write_text("invites:\n  - id: inv_x\n    name: Secret\n", "utf-8")
    if in_git:
        git(repo, "init", "-q")
    (repo / "link").symlink_to(outside)
    given = str(outside) if where == "outside" else where
    path = str(repo / "reconciler.yaml")
    Path(path).write_text(f"paths: [invites, {given}]\n", encoding="utf-8")

    with pytest.raises(InputError) as raised:
        load_settings(path, env={})

    column = len("paths: [invites, ") + 1
    said = f"{path}:1:{column}: `paths`: {given} leads to {outside.resolve()}, outside "
    said += (
        f"the repository ({repo.resolve()})"
        if in_git
        else f"the directory {repo.resolve()} (not in a git repository)"
    )
    assert said in str(raised.value)
    # And through the command: refused before anything is read, nothing quoted.
    done = run_cli("validate", "--config", path, env=clean_env())
    assert done.returncode == 1 and said in done.stderr
    assert "Secret" not in done.stdout + done.stderr


@pytest.mark.parametrize("written", ["../home/.bashrc", "{tmp}/home/.bashrc", "logs/.bashrc"])
def test_an_audit_log_the_file_names_out_of_the_repository_is_refused_at_its_place(
    tmp_path: Path, written: str
) -> None:
    """Issue 51 row 1: appends to a file of the job's machine; the environment's is the
    user's own choice, checked only when the log is opened."""
    repo = tmp_path / "repo"
    (tmp_path / "home").mkdir()
    (repo / "invites").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "logs").symlink_to(tmp_path / "home")
    given = written.format(tmp=tmp_path)
    path = str(repo / "reconciler.yaml")
    Path(path).write_text(f"parallelism: 2\naudit_log: {given}\n", encoding="utf-8")

    with pytest.raises(InputError) as raised:
        load_settings(path, env={})

    assert str(raised.value) == (
        f"{path}:2:12: `audit_log`: {given} leads to {(tmp_path / 'home/.bashrc').resolve()}, "
        f"outside the repository ({repo.resolve()}); a file in the repository names an audit "
        "log only inside it (give one elsewhere with --audit-log or RECONCILER_AUDIT_LOG, "
        "which a pull request cannot set)"
    )
    Path(path).write_text("audit_log: audit.jsonl\n", encoding="utf-8")
    mine = str(tmp_path / "home" / "audit.jsonl")
    assert load_settings(path, env={"RECONCILER_AUDIT_LOG": mine}).audit_log == mine


def test_an_audit_log_the_file_names_in_git_s_own_directory_is_refused(tmp_path: Path) -> None:
    # A hook git runs: appended to, its next run would run what a record holds (`$(...)`).
    git(tmp_path, "init", "-q")
    path = str(tmp_path / "reconciler.yaml")
    Path(path).write_text("audit_log: .git/hooks/pre-commit\n", encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_settings(path, env={})
    assert f"{path}:1:12: `audit_log`: .git/hooks/pre-commit leads to " in str(raised.value)
    assert "into git's own directory, which no commit holds" in str(raised.value)


def test_relative_paths_with_a_relative_config_path(
    config: Callable[[str], str], tmp_path: Path
) -> None:
    config("paths: invites\n")  # a single text: a list of one
    relative = os.path.relpath(tmp_path / "conf" / "reconciler.yaml")

    settings = load_settings(relative, env={})

    assert [Path(p).resolve() for p in settings.paths] == [
        (tmp_path / "conf" / "invites").resolve()
    ]


def test_settings_repr_never_shows_the_secret(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(f"  {SECRET}\n\n", encoding="utf-8")  # read stripped

    direct = Settings(base_url="https://api.example.com", client_id="ci", client_secret=SECRET)
    from_env = load_settings(None, env={"RECONCILER_CLIENT_SECRET": SECRET})
    from_file = load_settings(None, env={"RECONCILER_CLIENT_SECRET_FILE": str(secret_file)})

    for settings in (direct, from_env, from_file):
        assert settings.client_secret == SECRET
        assert SECRET not in repr(settings)
        assert SECRET not in str(settings)
        assert SECRET not in repr(settings.with_overrides(parallelism=2))


# --- one conversion for options, environment and file ---------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [("--parallelism", "1000", "at least 1 and at most 256"), ("--max-rate", "0", "at least 0.2")],
)
def test_the_option_and_the_environment_refuse_the_same_values(
    option: str, value: str, said: str
) -> None:
    result = run_cli("plan", option, value, "--sandbox")
    assert result.returncode == 1  # a usage error
    assert option in result.stderr and f"must be {said}" in result.stderr
    variable = f"RECONCILER_{option[2:].replace('-', '_').upper()}"
    with pytest.raises(ConfigError, match=f"must be {said}"):
        load_settings(None, env={variable: value})


def test_both_secret_variables_set_is_an_error_that_shows_neither(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET)
    env = {"RECONCILER_CLIENT_SECRET": SECRET, "RECONCILER_CLIENT_SECRET_FILE": str(secret_file)}

    with pytest.raises(ConfigError) as caught:
        load_settings(None, env=env)

    text = str(caught.value)
    assert "RECONCILER_CLIENT_SECRET and RECONCILER_CLIENT_SECRET_FILE" in text
    assert SECRET not in text


def test_the_contract_is_one_record_swapped_whole() -> None:
    from reconciler.settings.contract import Contract

    custom = Settings(
        base_url="https://api.example.com",
        contract=Contract(
            token_path="/auth/token",
            get_invite_path="/v9/{inviteId}",
            field_names={"phone": "phoneNumber"},
            scope="custom:scope",
        ),
    )
    assert custom.contract.token_path == "/auth/token"
    published = custom.with_contract(Contract())
    assert published.contract == Contract()
    assert published.contract.wire_name("phone") == "phone"
    assert published.base_url == custom.base_url  # only the contract changed


# Bytes that are not UTF-8 in a variable reach Python as lone surrogates ('\udcff'),
# which no HTTP header, token form or signing key can carry.
@pytest.mark.parametrize(
    "name", ["RECONCILER_CLIENT_SECRET", "RECONCILER_CLIENT_ID", "RECONCILER_BASE_URL"]
)
def test_a_variable_that_is_not_utf8_is_refused_without_showing_it(name: str) -> None:
    env = {"RECONCILER_CLIENT_ID": "ci", "RECONCILER_CLIENT_SECRET": SECRET, name: "cs_\udcffLIVE"}

    with pytest.raises(ConfigError) as caught:
        load_settings(None, env=env)

    assert str(caught.value) == f"{name} is not UTF-8 text; set it again"


def test_a_number_of_seconds_in_the_config_file_is_finite(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.yaml"
    config.write_text("retry_max_seconds: .nan\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a finite number"):
        load_settings(str(config), env={})


def test_a_config_file_that_never_ends_is_refused(tmp_path: Path) -> None:
    result = run_cli("validate", "--config", "/dev/zero", cwd=tmp_path, env=clean_env())
    assert result.returncode == 1
    assert "/dev/zero: cannot read config file: it is a device, not a regular file" in (
        result.stderr
    )


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (os.mkfifo, "cannot read config file: it is a FIFO (named pipe), not a regular file"),
        (
            lambda path: os.symlink("/dev/zero", path),  # a link out of the repository: unread
            "not read: it leads to /dev/zero, outside the repository ({repo}); a config file "
            "is never read through a link out of it (copy it in instead)",
        ),
        (
            lambda path: os.symlink("gone.yaml", path),
            "cannot read config file: No such file or directory",
        ),
        (os.mkdir, "cannot read config file: it is a directory, not a regular file"),
    ],
    ids=["fifo", "link-to-dev-zero", "dangling-link", "directory"],
)
def test_a_reconciler_yaml_found_that_is_no_regular_file_is_refused_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[str], None], said: str
) -> None:
    # Skipped, the run went on with the defaults, or with a reconciler.yaml further up
    # (its max_changes, its policies) as if none were here.
    repo = _repo(tmp_path, monkeypatch, "parallelism: 3\n", "invites")
    make(str(repo / "invites" / "reconciler.yaml"))
    with pytest.raises(ConfigError) as refused:
        load_settings(None, env={})
    assert str(refused.value) == "reconciler.yaml: " + said.format(repo=repo.resolve())


# Settings checked as a whole: field names that clash, or a secret too short to redact.
@pytest.mark.parametrize(
    ("names", "said"),
    [
        (
            "{phone: email}",
            "1:22: `field_names.phone`: `email` is already the wire name of `email`",
        ),
        ("{name: status}", "1:21: `field_names.name`: `status` is a read-only field of the invite"),
        ("{email: id}", "1:22: `field_names.email`: `id` is a read-only field of the invite"),
        ("{groups: tags, addOns: tags}", "`field_names.addOns`: `tags` is already the wire name"),
        ('{phone: " "}', "1:22: `field_names.phone`: a wire name must not be empty"),
    ],
)
def test_field_names_must_map_to_distinct_wire_names_none_read_only(
    config: Callable[[str], str], names: str, said: str
) -> None:
    path = config(f"field_names: {names}\n")
    with pytest.raises(ReconcilerError) as caught:
        load_settings(path, env={})
    assert said in str(caught.value)


def test_field_names_that_swap_two_wire_names_are_fine(config: Callable[[str], str]) -> None:
    settings = load_settings(config("field_names: {phone: email, email: mail}\n"), env={})
    assert settings.contract.wire_name("phone") == "email"
    assert settings.contract.wire_name("email") == "mail"


def test_credentials_are_resolved_once_all_three_set_and_never_shown_with_the_secret() -> None:
    settings = Settings(base_url="https://api.example", client_id="ci", client_secret=SECRET)
    credentials = settings.credentials()
    assert credentials == ("https://api.example", "ci", SECRET)
    assert SECRET not in repr(credentials)
    with pytest.raises(ConfigError) as caught:
        Settings(client_id="ci").credentials()
    assert str(caught.value).startswith(
        "missing RECONCILER_BASE_URL, RECONCILER_CLIENT_SECRET: set them in the environment"
    )


@pytest.mark.parametrize("secret", ["Q", "Ab1", "abcde", "12345"])
def test_a_secret_shorter_than_the_redaction_floor_is_refused_with_the_reason(
    tmp_path: Path, secret: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, env={"RECONCILER_CLIENT_SECRET": secret})
    said = str(caught.value)
    assert "RECONCILER_CLIENT_SECRET is shorter than 6 characters" in said
    assert "never redacted" in said and secret not in said.replace("RECONCILER_CLIENT_SECRET", "")
    (tmp_path / "secret").write_text(secret + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="shorter than 6 characters"):
        load_settings(None, env={"RECONCILER_CLIENT_SECRET_FILE": str(tmp_path / "secret")})
    assert load_settings(None, env={"RECONCILER_CLIENT_SECRET": "abcdef"}).client_secret


def test_a_short_secret_stops_the_cli_before_any_request(tmp_path: Path) -> None:
    env = clean_env(
        RECONCILER_BASE_URL="http://127.0.0.1:9",
        RECONCILER_CLIENT_ID="ci",
        RECONCILER_CLIENT_SECRET="abc",
    )
    done = run_cli("export", "inv_1", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "shorter than 6 characters" in done.stderr and "Traceback" not in done.stderr


# Each system's own variables (docs/configuration.md lists them), written out here rather
# than read from the table in the code, so a name dropped there fails here.
CI_SETS = [
    ("CI", "true"),
    ("CI", " True "),
    ("CI", "woodpecker"),  # Woodpecker
    ("CI", "yes"),
    ("GITHUB_ACTIONS", "true"),
    ("GITHUB_ACTIONS", "false"),  # set at all is enough
    ("GITLAB_CI", "true"),
    ("TF_BUILD", "True"),  # Azure Pipelines
    ("SYSTEM_TEAMFOUNDATIONCOLLECTIONURI", "https://dev.azure.com/org/"),
    ("JENKINS_URL", "https://jenkins.example/"),
    ("JENKINS_HOME", "/var/jenkins_home"),
    ("TEAMCITY_VERSION", "2024.03 (build 156364)"),
    ("CIRCLECI", "true"),
    ("BITBUCKET_BUILD_NUMBER", "17"),
    ("BITBUCKET_COMMIT", "9fceb02d0ae598e95dc970b74767f19372d61af8"),
    ("BUILDKITE", "true"),
    ("DRONE", "true"),
    ("CI_PIPELINE_NUMBER", "8"),  # Woodpecker
    ("CODEBUILD_BUILD_ID", "invites:0b8c5b9e-2f4e-4f7b-9a52-7d3c1b2a4e6f"),
    ("CODEBUILD_BUILD_ARN", "arn:aws:codebuild:eu-west-1:123456789012:build/invites:0b8c"),
    ("BUILDER_OUTPUT", "/builder/outputs"),  # Google Cloud Build
    ("TRAVIS", "true"),
    ("bamboo_buildKey", "INV-APPLY-JOB1"),
    ("bamboo_planKey", "INV-APPLY"),
    ("GO_SERVER_URL", "https://gocd.internal:8154/go"),
    ("GO_PIPELINE_NAME", "invites"),
    ("CF_BUILD_ID", "65d4a8f2c1e0b3001a2b3c4d"),
    ("HARNESS_BUILD_ID", "42"),
    ("CONTINUOUS_INTEGRATION", "true"),
    ("BUILD_NUMBER", "17"),  # Jenkins without JENKINS_URL, TeamCity
    ("BUILD_ID", "17"),
]


@pytest.mark.parametrize(("name", "value"), CI_SETS, ids=[f"{n}={v}" for n, v in CI_SETS])
def test_under_ci_a_base_url_from_the_file_is_refused_naming_the_variable(
    config: Callable[[str], str], name: str, value: str
) -> None:
    path = config("base_url: https://attacker.example\nclient_id: from-file\n")
    settings = load_settings(path, env={"RECONCILER_CLIENT_SECRET": SECRET, name: value})
    assert settings.base_url is None and settings.client_id == "from-file"
    with pytest.raises(ConfigError) as refused:
        settings.credentials()
    message = str(refused.value)
    assert "sets base_url" in message and "Set RECONCILER_BASE_URL" in message
    assert name in message and "attacker" not in message
    # A marker is named, never shown: only `CI`'s own value is quoted.
    assert (f"{name}={value.strip()}" in message) == (name == "CI")


def test_docs_list_the_ci_table_the_code_reads() -> None:
    docs = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for system, names in CI_MARKERS.items():
        assert f"| {system} | {', '.join(f'`{n}`' for n in names)} |" in docs
    assert {name for name, _ in CI_SETS} == {"CI"}.union(*CI_MARKERS.values())


@pytest.mark.parametrize(
    "ci", [{}, {"CI": "false"}, {"CI": " FALSE "}, {"CI": "0"}, {"CI": ""}, {"TRAVIS": ""}]
)
def test_outside_ci_the_file_may_set_base_url(
    config: Callable[[str], str], ci: dict[str, str]
) -> None:
    path = config("base_url: https://file.example.com\n")
    settings = load_settings(path, env={"RECONCILER_CLIENT_SECRET": SECRET, **ci})
    assert settings.base_url == "https://file.example.com"


def test_under_ci_the_environment_decides_and_the_file_changes_nothing(
    config: Callable[[str], str],
) -> None:
    path = config("base_url: https://attacker.example\n")
    env = {"CI": "true", "RECONCILER_BASE_URL": "https://api.example.com"}
    settings = load_settings(path, env={**env, "RECONCILER_CLIENT_SECRET": SECRET})
    assert settings.base_url == "https://api.example.com"
