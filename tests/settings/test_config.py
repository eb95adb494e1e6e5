"""Config file: found, validated, and overridden by flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from qadvisor.registry import load_checks
from qadvisor.settings.config import Config, ConfigError, check_ignores, check_options, find_config
from tests.conftest import TestDB
from tests.helpers import NO_SUCH_CODE, assert_quiet, build_archive_queue, check, qadvisor


def test_qadvisor_toml_and_pyproject_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.qadvisor]\nfail_on = "critical"\nfail_on_skip = true\n'
    )
    assert find_config(None, tmp_path).fail_on == "critical"
    assert find_config(None, tmp_path).fail_on_skip is True
    (tmp_path / "qadvisor.toml").write_text(
        'tables = ["public.jobs"]\nquery_files = ["sql/q.sql"]\n[options.QA201]\nmin_ratio = 20\n'
    )
    cfg = find_config(None, tmp_path)
    assert cfg.tables == ("public.jobs",)
    assert cfg.query_files == (tmp_path / "sql" / "q.sql",)
    opts = check_options(load_checks(), cfg)
    assert opts["QA201"].min_ratio == 20
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_config(None, empty) == Config()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fail_on = 3\n", "fail_on must be a string"),
        ('fail_on_skip = "yes"\n', "fail_on_skip must be true or false"),
        ('fail_on = "sometimes"\n', "fail_on must be one of"),
        ("colour = true\n", "unknown setting(s) colour"),
        ("[options.QA201]\nmin_ratoi = 3\n", "QA201 has no option 'min_ratoi'"),
        ('[options.QA201]\nmin_ratio = "3"\n', "QA201.min_ratio must be a number"),
        (f"[options.{NO_SUCH_CODE}]\nx = 1\n", f"unknown check {NO_SUCH_CODE}"),
        ("not toml = = 1", "not valid TOML"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "qadvisor.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_options(load_checks(), find_config(path))


def test_ignores_name_known_checks() -> None:
    checks = load_checks()
    check_ignores(["QA101", "QA201:public.jobs", "QA401:public.pgss:-42"], checks)
    for pattern, message in [
        (NO_SUCH_CODE, f"no check has the code '{NO_SUCH_CODE}'; the closest code is QA101"),
        ("QA2O1:public.jobs", "no check has the code 'QA2O1'; the closest code is QA201"),
        ("QA201:", "names no object after QA201:"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_ignores([pattern], checks)


def test_config_options_and_flags_on_a_real_server(db: TestDB, tmp_path: Path) -> None:
    build_archive_queue(db)
    cfg = tmp_path / "qadvisor.toml"
    # A trigger 160x the live set passes a gate set at 1,000x.
    cfg.write_text('fail_on = "critical"\n[options.QA201]\nmin_ratio = 1000\n')
    run = check(db, "--config", str(cfg))
    assert_quiet(run, "QA201")
    assert "QA101" in run.codes()
    assert run.rc == 0  # warnings only, and the file's gate is critical
    assert check(db, "--config", str(cfg), "--fail-on", "warning").rc == 1
    cfg.write_text("[options.QA201]\nmin_ratoi = 3\n")
    bad = qadvisor("check", db.dsn, "--config", str(cfg))
    assert bad.rc == 2 and "no option 'min_ratoi'" in bad.stderr
