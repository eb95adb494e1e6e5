"""Choosing checks: --select (and select / QADVISOR_SELECT), a check's severity set by the
config file's [severity] table, and its thresholds by [options.CODE]; on a real server, and
the rules on hand-built snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qadvisor.engine import configured_severity, run_checks
from qadvisor.model import Severity
from qadvisor.registry import load_checks
from qadvisor.settings.config import ConfigError, check_selects, check_severities, find_config
from qadvisor.settings.resolve import ENV_VARIABLES
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import NO_SUCH_CODE, assert_quiet, build_archive_queue, check, qadvisor

CHECKS = {c.code: c for c in load_checks()}


def test_a_pattern_takes_the_checks_it_starts_and_a_typo_is_an_error() -> None:
    check_selects(["QA2", "QA101"], list(CHECKS.values()))
    with pytest.raises(ConfigError, match="no check has the code 'QA9'"):
        check_selects(["QA9"], list(CHECKS.values()))
    with pytest.raises(ConfigError, match="the closest code is QA201"):
        check_selects(["QA2O1"], list(CHECKS.values()))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[severity]\nQA204 = "low"\n', "severity must be a table of check codes"),
        ("severity = 3\n", "severity must be a table of check codes"),
        (f'[severity]\n{NO_SUCH_CODE} = "info"\n', f"no check has the code '{NO_SUCH_CODE}'"),
    ],
)
def test_a_bad_severity_entry_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "qadvisor.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        check_severities(list(CHECKS.values()), find_config(path))


def test_an_entry_sets_the_severity_but_never_raises_what_the_check_rated_lower() -> None:
    qa301 = CHECKS["QA301"]  # warning by default; critical when generic plans are forced
    crit, warn, info = Severity.CRITICAL, Severity.WARNING, Severity.INFO
    assert configured_severity(warn, qa301, {"QA301": info}) == info
    assert configured_severity(crit, qa301, {"QA301": warn}) == warn
    assert configured_severity(warn, qa301, {"QA301": crit}) == crit
    # An info finding (a binding only some plans have, a counter that contradicts the plan)
    # is weaker evidence: an entry may lower it no further and never raise it.
    assert configured_severity(info, qa301, {"QA301": crit}) == info
    assert configured_severity(warn, qa301, {}) == warn


def test_the_report_and_its_rules_carry_the_configured_severity() -> None:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * 1024 * 1024)
    snap = S.snapshot(S.jobs_table(indexes=(idx,)))
    report = run_checks(snap, list(CHECKS.values()), severities={"QA101": Severity.CRITICAL})
    (f,) = [f for f in report.findings if f.code == "QA101"]
    assert f.severity == Severity.CRITICAL
    (rule,) = [r for r in report.rules if r.code == "QA101"]
    assert rule.severity == Severity.CRITICAL  # SARIF's defaultConfiguration.level


def _env(**extra: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ENV_VARIABLES} | extra


def test_select_severity_and_thresholds_on_a_real_server(db: TestDB, tmp_path: Path) -> None:
    # The archive seed: QA101, QA201 and QA204 warn.
    build_archive_queue(db)
    every = check(db)
    assert {"QA101", "QA201", "QA204"} <= every.codes()
    assert len(every.report["checks_run"]) == len(CHECKS)

    # --select: only those checks run (and only they can skip), by code or by its start.
    picked = check(db, "--select", "QA1", "--select", "QA204")
    assert set(picked.report["checks_run"]) == {c for c in CHECKS if c[:3] == "QA1"} | {"QA204"}
    assert picked.codes() == {"QA101", "QA204"}
    assert {s["code"] for s in picked.report["skipped"]} <= set(picked.report["checks_run"])
    # The config file's select, and QADVISOR_SELECT over it, and the flag over both.
    config = tmp_path / "qadvisor.toml"
    config.write_text('select = ["QA2"]\n')
    assert check(db, "--config", str(config)).codes() == {"QA201", "QA204"}
    env = _env(QADVISOR_SELECT="QA101")
    run = qadvisor("check", db.dsn, "--config", str(config), "--format", "json", env=env)
    assert run.codes() == {"QA101"}
    assert check(db, "--config", str(config), "--select", "QA204").codes() == {"QA204"}
    bad = qadvisor("check", db.dsn, "--select", "QA9")
    assert bad.rc == 2 and "--select 'QA9': no check has the code 'QA9'" in bad.stderr

    # [severity]: the gate follows it.
    config.write_text('[severity]\nQA101 = "critical"\nQA201 = "info"\nQA204 = "info"\n')
    run = check(db, "--config", str(config), "--fail-on", "critical")
    assert run.rc == 1
    by_code = {f["code"]: f["severity"] for f in run.report["findings"]}
    assert by_code == {"QA101": "critical", "QA201": "info", "QA204": "info"}
    sarif = qadvisor("check", db.dsn, "--config", str(config), "--format", "sarif")
    rules = {r["id"]: r for r in json.loads(sarif.stdout)["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["QA101"]["defaultConfiguration"]["level"] == "error"
    config.write_text('[severity]\nQA101 = "info"\nQA201 = "info"\nQA204 = "info"\n')
    assert check(db, "--config", str(config)).rc == 0  # no warning left to fail on

    # [options.CODE]: a threshold of the check's own, judged, not skipped.
    config.write_text("[options.QA201]\nmin_ratio = 1000000\n")
    assert_quiet(check(db, "--config", str(config)), "QA201")


def test_select_and_severity_are_resolved_once_into_the_settings(tmp_path: Path) -> None:
    from qadvisor.settings.resolve import Flags, resolve

    config = tmp_path / "qadvisor.toml"
    config.write_text('select = ["QA1"]\n[severity]\nqa204 = "info"\n')
    settings = resolve(Flags(config=config, snapshot=tmp_path / "s.json"), env={})
    assert settings.select == ("QA1",)
    assert settings.severities == {"QA204": Severity.INFO}
    flagged = resolve(Flags(config=config, snapshot=tmp_path / "s.json", select=["QA2"]), env={})
    assert flagged.select == ("QA2",)
