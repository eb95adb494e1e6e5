"""Settings resolved once: defaults < config file < QADVISOR_* environment < flags, every value
checked where it is read, one line naming where a wrong one came from."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from qadvisor.collect.connect import connect
from qadvisor.registry import load_checks
from qadvisor.settings.config import ConfigError
from qadvisor.settings.resolve import (
    ENV_VARIABLES,
    IGNORE,
    SETTINGS,
    Flags,
    SessionLimits,
    Settings,
    SettingsError,
    defaults,
    resolve,
)
from tests.conftest import TestDB
from tests.helpers import NO_SUCH_CODE, qadvisor

CHECKS = load_checks()
FILE = """
fail_on = "critical"
fail_on_skip = true
tables = ["public.jobs"]
ignore = ["QA101"]
statement_timeout = 3000
lock_timeout = 300
connect_timeout = 7

[options.QA201]
min_ratio = 20
"""


def settings(tmp_path: Path, flags: Flags | None = None, /, **env: str) -> Settings:
    return resolve(flags or Flags(), env=env, cwd=tmp_path, checks=CHECKS)


def test_defaults_without_file_environment_or_flags(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert s == defaults(checks=CHECKS, env={})
    assert (s.fail_on, s.fail_on_skip, s.tables, s.ignore, s.queries) == (
        "warning",
        False,
        (),
        (),
        (),
    )
    assert s.limits == SessionLimits(5_000, 1_000, 10)
    assert s.options == {} and s.config_file is None and s.format == "text"
    assert s.checks == CHECKS
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.fail_on = "never"  # type: ignore[misc]


def test_the_file_then_the_environment_then_the_flags(tmp_path: Path) -> None:
    (tmp_path / "qadvisor.toml").write_text(FILE)
    s = settings(tmp_path)
    assert s.config_file == tmp_path / "qadvisor.toml"
    assert (s.fail_on, s.fail_on_skip, s.tables) == ("critical", True, ("public.jobs",))
    assert s.ignore == ("QA101",)
    assert s.limits == SessionLimits(3_000, 300, 7)
    assert s.options["QA201"].min_ratio == 20

    env = {
        "QADVISOR_FAIL_ON": "info",
        "QADVISOR_FAIL_ON_SKIP": "no",
        "QADVISOR_TABLES": "app.jobs, app.mail",
        "QADVISOR_IGNORE": "QA201:public.jobs",
        "QADVISOR_STATEMENT_TIMEOUT": "4000",
        "QADVISOR_LOCK_TIMEOUT": "400",
        "QADVISOR_CONNECT_TIMEOUT": "8",
    }
    s = settings(tmp_path, **env)
    assert (s.fail_on, s.fail_on_skip, s.tables) == ("info", False, ("app.jobs", "app.mail"))
    assert s.ignore == ("QA101", "QA201:public.jobs")  # ignores add up
    assert s.limits == SessionLimits(4_000, 400, 8)

    flags = Flags(
        fail_on="never",
        fail_on_skip=True,
        tables=("public.other",),
        ignore=("QA203",),
        statement_timeout=5_500,
        lock_timeout=550,
        connect_timeout=9,
    )
    s = settings(tmp_path, flags, **env)
    assert (s.fail_on, s.fail_on_skip, s.tables) == ("never", True, ("public.other",))
    assert s.ignore == ("QA101", "QA201:public.jobs", "QA203")
    assert s.limits == SessionLimits(5_500, 550, 9)


def test_an_empty_variable_is_unset_and_qadvisor_config_names_the_file(tmp_path: Path) -> None:
    other = tmp_path / "ci" / "gate.toml"
    other.parent.mkdir()
    other.write_text('fail_on = "info"\n')
    s = settings(tmp_path, QADVISOR_CONFIG=str(other), QADVISOR_FAIL_ON="", QADVISOR_TABLES=" ")
    assert (s.config_file, s.fail_on, s.tables) == (other, "info", ())
    # --config wins over QADVISOR_CONFIG.
    (tmp_path / "flag.toml").write_text('fail_on = "critical"\n')
    s = settings(tmp_path, Flags(config=tmp_path / "flag.toml"), QADVISOR_CONFIG=str(other))
    assert s.fail_on == "critical"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"QADVISOR_FAIL_ON": "sometimes"},
            "QADVISOR_FAIL_ON='sometimes': must be one of critical",
        ),
        (
            {"QADVISOR_FAIL_ON_SKIP": "maybe"},
            "QADVISOR_FAIL_ON_SKIP='maybe': must be true or false",
        ),
        ({"QADVISOR_STATEMENT_TIMEOUT": "5s"}, "QADVISOR_STATEMENT_TIMEOUT='5s': must be a whole"),
        (
            {"QADVISOR_STATEMENT_TIMEOUT": "50"},
            "QADVISOR_STATEMENT_TIMEOUT is 50 ms: it must be at least 100",
        ),
        ({"QADVISOR_LOCK_TIMEOUT": "0"}, "QADVISOR_LOCK_TIMEOUT is 0 ms: it must be at least 1"),
        ({"QADVISOR_CONNECT_TIMEOUT": "0"}, "QADVISOR_CONNECT_TIMEOUT is 0 seconds"),
        (
            {"QADVISOR_IGNORE": "QA2O1"},
            "QADVISOR_IGNORE 'QA2O1': no check has the code 'QA2O1'; the closest code is QA201",
        ),
        ({"QADVISOR_CONFIG": "/nonexistent/q.toml"}, "cannot read /nonexistent/q.toml"),
    ],
)
def test_a_wrong_variable_is_one_error_naming_it(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises((SettingsError, ConfigError)) as err:
        settings(tmp_path, **env)
    assert str(err.value).startswith(message) or message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "statement_timeout = 99\n",
            "qadvisor.toml: statement_timeout is 99 ms: it must be at least 100",
        ),
        ('lock_timeout = "1s"\n', "qadvisor.toml: lock_timeout must be an integer"),
        ("connect_timeout = true\n", "qadvisor.toml: connect_timeout must be an integer"),
        ("connect_timeout = 0\n", "qadvisor.toml: connect_timeout is 0 seconds"),
        ('queries = ["DROP TABLE jobs"]\n', "--query 1 refused: not a single SELECT/UPDATE"),
        ('query_files = ["missing.sql"]\n', "cannot read --query-file"),
        (
            f'ignore = ["{NO_SUCH_CODE}"]\n',
            f"qadvisor.toml: ignore '{NO_SUCH_CODE}': no check has the code",
        ),
        ("[options.QA201]\nmin_ratoi = 3\n", "qadvisor.toml: QA201 has no option 'min_ratoi'"),
    ],
)
def test_a_wrong_file_value_is_one_error_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "qadvisor.toml").write_text(text)
    with pytest.raises((SettingsError, ConfigError)) as err:
        settings(tmp_path)
    assert message in str(err.value), str(err.value)


def test_a_flag_is_checked_as_well(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="--statement-timeout is 10 ms"):
        settings(tmp_path, Flags(statement_timeout=10))
    with pytest.raises(SettingsError, match="--query 1 refused"):
        settings(tmp_path, Flags(queries=("EXPLAIN SELECT 1",)))
    with pytest.raises(SettingsError, match=r"--ignore 'QA201:' names no object"):
        settings(tmp_path, Flags(ignore=("QA201:",)))


def test_queries_come_read_with_where_they_came_from(tmp_path: Path) -> None:
    sql = tmp_path / "sql" / "claim.sql"
    sql.parent.mkdir()
    sql.write_text("-- the claim\nSELECT 1;\n\nSELECT id FROM jobs FOR UPDATE SKIP LOCKED;\n")
    (tmp_path / "qadvisor.toml").write_text(
        'queries = ["SELECT 2"]\nquery_files = ["sql/claim.sql"]\n'
    )
    s = settings(tmp_path, Flags(queries=("SELECT 3",)))
    assert s.queries == (
        ("--query 1", "SELECT 2"),
        ("--query 2", "SELECT 3"),
        # Named relative to the current directory, the repository's root in CI.
        ("sql/claim.sql:2", "SELECT 1"),
        ("sql/claim.sql:4", "SELECT id FROM jobs FOR UPDATE SKIP LOCKED"),
    )
    # A file outside the current directory keeps the path it was given as.
    outside = tmp_path.parent / f"{tmp_path.name}-other.sql"
    outside.write_text("SELECT 4;\n")
    s = settings(tmp_path, Flags(query_files=(outside,)))
    assert s.queries[-1] == (f"{outside}:1", "SELECT 4")


def test_a_saved_snapshot_takes_no_server_settings(tmp_path: Path) -> None:
    snap = tmp_path / "s.json"
    with pytest.raises(SettingsError, match=r"given: a DSN, --table"):
        settings(tmp_path, Flags(snapshot=snap, dsn="dbname=app", tables=("public.jobs",)))
    # The file's and the environment's tables belong to server runs: they do not apply.
    (tmp_path / "qadvisor.toml").write_text('queries = ["SELECT 1"]\n' + FILE)
    s = settings(tmp_path, Flags(snapshot=snap), QADVISOR_TABLES="app.jobs")
    assert (s.snapshot_file, s.tables, s.queries) == (snap, (), ())
    assert s.ignore == ("QA101",) and s.fail_on == "critical"


def test_github_actions_turns_on_the_annotations(tmp_path: Path) -> None:
    assert settings(tmp_path, GITHUB_ACTIONS="true").github_annotations
    assert not settings(tmp_path, GITHUB_ACTIONS="false").github_annotations
    assert defaults(env={"GITHUB_ACTIONS": "true"}, checks=CHECKS).github_annotations


def test_the_file_s_timeouts_reach_the_session(db: TestDB, tmp_path: Path) -> None:
    (tmp_path / "qadvisor.toml").write_text("statement_timeout = 2345\nlock_timeout = 67\n")
    s = settings(tmp_path)
    with connect(db.dsn, s.limits) as conn:
        row = conn.execute(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"
        ).fetchone()
    assert row == ("2345ms", "67ms")


def test_the_environment_on_the_command_line(tmp_path: Path) -> None:
    from tests.test_cli import _snapshot_file

    snap = str(_snapshot_file(tmp_path))
    base = {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES}
    assert qadvisor("check", "--snapshot", snap, "--format", "json", env=base).rc == 1
    assert qadvisor("check", "--snapshot", snap, env={**base, "QADVISOR_FAIL_ON": "never"}).rc == 0
    # The flag wins over the variable.
    run = qadvisor(
        "check",
        "--snapshot",
        snap,
        "--fail-on",
        "warning",
        env={**base, "QADVISOR_FAIL_ON": "never"},
    )
    assert run.rc == 1
    run = qadvisor("check", "--snapshot", snap, env={**base, "QADVISOR_FAIL_ON": "sometimes"})
    assert run.rc == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "qadvisor: error: QADVISOR_FAIL_ON='sometimes': must be one of critical, warning, info, "
        "never"
    ]
    run = qadvisor("check", "--snapshot", snap, env={**base, "QADVISOR_IGNORE": "QA101,QA201"})
    assert run.rc == 0, run.stderr
    # The docs' URL reaches SARIF's helpUri from the variable, and the flag wins over it.
    sarif = ("check", "--snapshot", snap, "--format", "sarif", "--fail-on", "never")
    urls = {"QADVISOR_DOCS_URL": "https://env.example/qa"}
    for extra, expected in (
        ((), "https://env.example/qa/"),
        (("--docs-url", "https://flag.example/"), "https://flag.example/"),
    ):
        run = qadvisor(*sarif, *extra, env={**base, **urls})
        rules = json.loads(run.stdout)["runs"][0]["tool"]["driver"]["rules"]
        assert rules and all(r["helpUri"].startswith(expected) for r in rules), rules[:1]
    run = qadvisor(*sarif, env={**base, "QADVISOR_DOCS_URL": "docs/"})
    assert run.rc == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "qadvisor: error: QADVISOR_DOCS_URL 'docs/': must be an absolute http(s) URL"
    ]


def test_every_setting_has_its_three_layers_and_its_variable_is_documented() -> None:
    """A row of the table names a config key, a Flags field and a flag that exist, and its
    variable is in docs/cli.md's table of them."""
    from qadvisor.settings.config import Config

    docs = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    flags, config = {f.name for f in dataclasses.fields(Flags)}, dataclasses.fields(Config)
    for s in (*SETTINGS, IGNORE):
        assert s.key in flags and s.key in {f.name for f in config}, s.key
        assert s.variable == "QADVISOR_" + s.key.upper()
        assert f"| `{s.variable}` | `{s.flag}` |" in docs, s.variable
    for variable in ENV_VARIABLES:
        assert f"| `{variable}` |" in docs, variable
