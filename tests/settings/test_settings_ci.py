"""The CI gate's settings: baseline, report files, the SARIF anchor and docs URL, resolved once
(config file < QADVISOR_* environment < flags) and checked before anything is collected."""

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


def settings(tmp_path: Path, flags: Flags | None = None, **env: str) -> Settings:
    return resolve(flags or Flags(), env=env, cwd=tmp_path, checks=CHECKS)


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


def test_the_environment_names_the_baseline_between_the_file_and_the_flag(tmp_path: Path) -> None:
    for name in ("file.json", "env.json", "flag.json"):
        (tmp_path / name).write_text(BASELINE.replace('"app"', f'"{name}"'))
    (tmp_path / "qadvisor.toml").write_text('baseline = "file.json"\n')
    env = str(tmp_path / "env.json")

    def read(flags: Flags | None = None, **variables: str) -> tuple[str | None, str]:
        s = settings(tmp_path, flags, **variables)
        assert s.baseline is not None
        return s.baseline.database, s.baseline.source

    assert read() == ("file.json", "file.json")
    assert read(QADVISOR_BASELINE=env) == ("env.json", "env.json")
    assert read(QADVISOR_BASELINE=" ") == ("file.json", "file.json")  # empty: unset
    assert read(Flags(baseline=tmp_path / "flag.json"), QADVISOR_BASELINE=env)[0] == "flag.json"
    missing = str(tmp_path / "missing.json")
    with pytest.raises(BaselineError, match="cannot read baseline"):
        settings(tmp_path, QADVISOR_BASELINE=missing)
    # As with the file's, the run that writes it the first time reads none.
    s = settings(tmp_path, Flags(write_baseline=Path(missing)), QADVISOR_BASELINE=missing)
    assert s.baseline is None and s.write_baseline == Path(missing)


def test_the_environment_names_the_anchor_between_the_file_and_the_flag(tmp_path: Path) -> None:
    for name in ("file.yml", "env.yml", "flag.yml"):
        (tmp_path / name).write_text("on: push\n")
    (tmp_path / "qadvisor.toml").write_text('sarif_anchor = "file.yml"\n')
    env = str(tmp_path / "env.yml")
    assert settings(tmp_path).anchor == Location("file.yml", 1)
    assert settings(tmp_path, QADVISOR_SARIF_ANCHOR=env).anchor == Location("env.yml", 1)
    s = settings(tmp_path, Flags(sarif_anchor=tmp_path / "flag.yml"), QADVISOR_SARIF_ANCHOR=env)
    assert s.anchor == Location("flag.yml", 1)
    # A wrong one names where it came from: the variable, the file or the flag.
    nope = tmp_path / "nope.yml"
    with pytest.raises(SettingsError) as err:
        settings(tmp_path, QADVISOR_SARIF_ANCHOR=str(nope))
    assert str(err.value) == f"QADVISOR_SARIF_ANCHOR {nope}: no such file"
    (tmp_path / "qadvisor.toml").write_text('sarif_anchor = "nope.yml"\n')
    with pytest.raises(SettingsError) as err:
        settings(tmp_path)
    assert str(err.value) == f"{tmp_path / 'qadvisor.toml'}: sarif_anchor {nope}: no such file"
    with pytest.raises(SettingsError) as err:
        settings(tmp_path, Flags(sarif_anchor=nope))
    assert str(err.value) == f"--sarif-anchor {nope}: no such file"
    # The config file's tables line still comes first, whichever layer names a file.
    (tmp_path / "qadvisor.toml").write_text('tables = ["public.jobs"]\n')
    assert settings(tmp_path, QADVISOR_SARIF_ANCHOR=env).anchor == Location("qadvisor.toml", 1)


def test_the_environment_sets_docs_url_between_the_file_and_the_flag(tmp_path: Path) -> None:
    (tmp_path / "qadvisor.toml").write_text('docs_url = "https://file.example/qa"\n')
    env = "https://env.example/qa"
    assert settings(tmp_path).docs_url == "https://file.example/qa"
    assert settings(tmp_path, QADVISOR_DOCS_URL=env).docs_url == env
    assert settings(tmp_path, QADVISOR_DOCS_URL="").docs_url == "https://file.example/qa"
    s = settings(tmp_path, Flags(docs_url="https://flag.example/qa"), QADVISOR_DOCS_URL=env)
    assert s.docs_url == "https://flag.example/qa"
    with pytest.raises(SettingsError) as err:
        settings(tmp_path, QADVISOR_DOCS_URL="docs/")
    assert str(err.value) == "QADVISOR_DOCS_URL 'docs/': must be an absolute http(s) URL"
    (tmp_path / "qadvisor.toml").write_text('docs_url = "example.org"\n')
    with pytest.raises(SettingsError) as err:
        settings(tmp_path)
    assert str(err.value).endswith("qadvisor.toml: docs_url 'example.org': must be an absolute "
                                   "http(s) URL")  # fmt: skip


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
