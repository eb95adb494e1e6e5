"""The CI gate's settings: baseline, report files, the SARIF anchor and docs URL, resolved once
and checked before anything is collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from qadvisor.model import Location
from qadvisor.registry import load_checks
from qadvisor.settings.baseline import BaselineError
from qadvisor.settings.config import ConfigError
from qadvisor.settings.resolve import Flags, Settings, SettingsError, resolve

CHECKS = tuple(load_checks())
BASELINE = '{"qadvisor_baseline": 1, "database": "app", "findings": []}\n'


def settings(tmp_path: Path, flags: Flags | None = None) -> Settings:
    return resolve(flags or Flags(), env={}, cwd=tmp_path, checks=CHECKS)


def test_the_config_file_names_the_baseline_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "b.json").write_text(BASELINE)
    (tmp_path / "ci" / "qadvisor.toml").write_text('baseline = "b.json"\n')
    s = settings(tmp_path, Flags(config=tmp_path / "ci" / "qadvisor.toml"))
    assert s.baseline is not None and s.baseline.source == "ci/b.json"
    assert s.baseline.database == "app" and s.baseline.entries == ()
    # The flag wins over the file.
    (tmp_path / "other.json").write_text(BASELINE)
    s = settings(tmp_path, Flags(config=tmp_path / "ci" / "qadvisor.toml",
                                 baseline=tmp_path / "other.json"))  # fmt: skip
    assert s.baseline is not None and s.baseline.source == "other.json"


def test_a_missing_baseline_is_an_error_unless_this_run_writes_it(tmp_path: Path) -> None:
    (tmp_path / "qadvisor.toml").write_text('baseline = "b.json"\n')
    with pytest.raises(BaselineError, match="cannot read baseline"):
        settings(tmp_path)
    s = settings(tmp_path, Flags(write_baseline=tmp_path / "b.json"))
    assert s.baseline is None and s.write_baseline == tmp_path / "b.json"


def test_the_anchor_is_the_tables_line_of_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "app"\n\n[tool.qadvisor]\nfail_on = "warning"\n'
        'tables = ["public.jobs"]\n'
    )
    assert settings(tmp_path).anchor == Location("pyproject.toml", 6)
    (tmp_path / "qadvisor.toml").write_text('# ours\ntables = ["public.jobs"]\n')
    assert settings(tmp_path).anchor == Location("qadvisor.toml", 2)


def test_without_tables_the_anchor_is_the_given_file(tmp_path: Path) -> None:
    workflow = tmp_path / ".github" / "workflows" / "qadvisor.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("on: push\n")
    assert settings(tmp_path).anchor is None
    s = settings(tmp_path, Flags(sarif_anchor=workflow))
    assert s.anchor == Location(".github/workflows/qadvisor.yml", 1)
    (tmp_path / "qadvisor.toml").write_text('sarif_anchor = ".github/workflows/qadvisor.yml"\n')
    assert settings(tmp_path).anchor == Location(".github/workflows/qadvisor.yml", 1)
    with pytest.raises(SettingsError, match="no such file"):
        settings(tmp_path, Flags(sarif_anchor=tmp_path / "nope.yml"))
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.yml"
    elsewhere.write_text("")
    with pytest.raises(SettingsError, match="is outside"):
        settings(tmp_path, Flags(sarif_anchor=elsewhere))


def test_docs_url_must_be_absolute(tmp_path: Path) -> None:
    s = settings(tmp_path, Flags(docs_url="https://example.org/qa"))
    assert s.docs_url == "https://example.org/qa"
    with pytest.raises(SettingsError, match="--docs-url 'docs/': must be an absolute"):
        settings(tmp_path, Flags(docs_url="docs/"))
    (tmp_path / "qadvisor.toml").write_text("docs_url = 3\n")
    with pytest.raises(ConfigError, match="docs_url must be a string"):
        settings(tmp_path)


def test_outputs_are_checked_and_kept_in_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sarif", tmp_path / "b.xml"
    s = settings(tmp_path, Flags(outputs=(f"SARIF:{a}", f"junit:{b}")))
    assert s.outputs == (("sarif", a), ("junit", b))
    with pytest.raises(SettingsError, match="given twice"):
        settings(tmp_path, Flags(outputs=(f"sarif:{a}", f"json:{a}")))


def test_every_format_has_a_renderer() -> None:
    from qadvisor.render import RENDERERS
    from qadvisor.settings.resolve import FORMATS

    assert set(FORMATS) == set(RENDERERS)
