"""The pipeline in the engine: settings -> one snapshot -> the checks -> one report, the same
entry for `check`, `snapshot` and `demo`; renderers need nothing but the report."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from qadvisor import engine, registry, render
from qadvisor.cli import Format
from qadvisor.derive.statement_ids import statement_id
from qadvisor.derive.statement_queues import statement_target
from qadvisor.engine import SnapshotFileError
from qadvisor.errors import ExitCode
from qadvisor.model import (
    Finding,
    Ignored,
    InlineIgnore,
    Location,
    Report,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Target,
    unavailable_key,
)
from qadvisor.registry import Check, NoOptions, judgeable, load_checks
from qadvisor.render import sarif
from qadvisor.settings.resolve import Flags, Settings, resolve
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import build_archive_queue, check

MB = 1024 * 1024
CHECKS = load_checks()


def _saved(tmp_path: Path) -> Path:
    idx = S.index("jobs_status_created_at_idx", ("status", "created_at"), 300 * MB)
    path = tmp_path / "snap.json"
    path.write_text(engine.snapshot_json(S.snapshot(S.jobs_table(indexes=(idx,)))))
    return path


def _settings(tmp_path: Path, **changes: object) -> Settings:
    base = resolve(Flags(snapshot=_saved(tmp_path)), env={}, cwd=tmp_path, checks=CHECKS)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_check_is_collect_then_judge(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    snap = engine.collect(settings)
    report = _unstamped(engine.check(settings))
    assert report == _unstamped(engine.judge(snap, settings))
    assert report == engine.run_checks(snap, CHECKS)
    assert {"QA101", "QA201"} <= {f.code for f in report.findings}


def _unstamped(report: Report) -> Report:
    return dataclasses.replace(report, checked_at=None, command=None)


def test_the_report_is_stamped_with_the_time_and_the_command_without_its_password(
    tmp_path: Path,
) -> None:
    dsn = "postgresql://monitor:s3cr%3Ct@db.example/app"
    # The password also sits in another argument (a second DSN-shaped value).
    other = "postgresql://monitor:s3cr%3Ct@replica.example/app"
    command = ("qadvisor", "check", dsn, "-f", "markdown", "--docs-url", other)
    settings = _settings(tmp_path, dsn=dsn, command=command)
    before = datetime.now(UTC).replace(microsecond=0)
    report = engine.judge(engine.collect(_settings(tmp_path)), settings)
    assert report.checked_at is not None and report.checked_at.endswith("Z")
    assert before <= datetime.fromisoformat(report.checked_at) <= datetime.now(UTC)
    # The DSN is written "$DSN" (no host, port or user in a pasted report); every other
    # argument is redacted, then quoted for the shell ('***' is quoted as a glob would be).
    assert report.command == (
        "qadvisor check \"$DSN\" -f markdown --docs-url 'postgresql://monitor:***@replica.example/app'"
    )
    assert engine.judge(engine.collect(settings), _settings(tmp_path)).command is None


def test_judge_applies_the_settings_options_and_ignores(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    qa201 = next(c for c in CHECKS if c.code == "QA201")
    loose = qa201.options(min_ratio=1_000_000)
    loosened = dataclasses.replace(settings, options={"QA201": loose}, ignore=("QA101",))
    report = engine.judge(engine.collect(settings), loosened)
    assert not {"QA101", "QA201"} & {f.code for f in report.findings}
    assert "QA101" not in report.checks_run and "QA201" in report.checks_run


def test_the_gate(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    report = engine.check(settings)
    assert max(f.rating for f in report.findings) == Severity.WARNING
    assert engine.gate(report, settings) == ExitCode.FINDINGS  # warning by default
    assert engine.gate(report, dataclasses.replace(settings, fail_on="critical")) == ExitCode.OK
    assert engine.gate(report, dataclasses.replace(settings, fail_on="never")) == ExitCode.OK
    clean = dataclasses.replace(report, findings=())
    blind = dataclasses.replace(clean, snapshot=dataclasses.replace(report.snapshot, queues=()))
    assert engine.gate(blind, settings) == ExitCode.OK
    skips_fail = dataclasses.replace(settings, fail_on_skip=True, fail_on="never")
    assert engine.gate(blind, skips_fail) == ExitCode.NOT_JUDGED
    # A finding is the surer verdict: it wins over a queue not judged.
    found_blind = dataclasses.replace(report, snapshot=blind.snapshot)
    assert engine.gate(found_blind, dataclasses.replace(skips_fail, fail_on="warning")) == 1


def _counting(name: str) -> Check:
    """A check that finds each number of a stream of numbers and skips; `judgeable` hands it
    the numbers alone."""

    def run(snapshot: Snapshot, options: object) -> Iterator[Finding | Skip]:
        stream: list[int | Skip] = [Skip(f"{name} a"), 1, 2]
        stream += [Skip(f"{name} b", "public.jobs"), 3, Skip(f"{name} c")]
        for n in judgeable(stream):
            yield Finding(Target("table", "public", "jobs", f"t{n}"), f"{name} {n}", {})

    run.__doc__ = "Finds numbers."
    return registry.check("ZZ901", f"counts-{name}", severity=Severity.INFO, category="test")(run)


def _said(items: Iterable[Finding | Skip]) -> list[str]:
    return [i.reason if isinstance(i, Skip) else i.message for i in items]


def test_a_check_run_yields_the_skips_of_its_judgeable_items_where_it_met_them() -> None:
    snap = S.snapshot(S.jobs_table())
    chk = _counting("x")
    assert _said(chk.run(snap, NoOptions())) == ["x a", "x 1", "x 2", "x b", "x 3", "x c"]
    report = engine.run_checks(snap, [chk])
    assert [(s.reason, s.queue) for s in report.skipped] == [
        ("x a", None), ("x b", "public.jobs"), ("x c", None),
    ]  # fmt: skip
    assert [f.message for f in report.findings] == ["x 1", "x 2", "x 3"]
    # Two runs stepped in turn keep their own skips.
    x, y = iter(_counting("x").run(snap, NoOptions())), iter(_counting("y").run(snap, NoOptions()))
    turns = [next(it) for _ in range(6) for it in (x, y)]
    assert _said(turns[::2]) == ["x a", "x 1", "x 2", "x b", "x 3", "x c"]
    assert _said(turns[1::2]) == ["y a", "y 1", "y 2", "y b", "y 3", "y c"]


def test_judgeable_items_outside_a_check_run_refuse_to_lose_a_skip() -> None:
    assert list(judgeable([1, 2])) == [1, 2]
    with pytest.raises(RuntimeError, match=r"would lose their skip \(no facts\)"):
        list(judgeable([1, Skip("no facts")]))


def _about_the_claim(snapshot: Snapshot, options: object) -> Iterator[Finding]:
    """Finds the table, about the claim of sql/claim.sql:3: once naming it by id, once only in
    its evidence (which shows the statement to a person, and places nothing)."""
    (stmt,) = snapshot.statements
    table = Target("table", "public", "jobs", "jobs")
    yield Finding(table, "by id", {}, statement_id=statement_id(stmt))
    mail = Target("table", "public", "mail", "mail")
    yield Finding(mail, "by label", {"statement": stmt.source})
    yield Finding(statement_target(snapshot, stmt), "its target", {})


def test_a_fact_missing_for_one_queue_skips_that_queue_only() -> None:
    @registry.check("ZZ903", "reads-table-facts", severity=Severity.INFO, category="test",
                    requires=("table_facts",))  # fmt: skip
    def run(snapshot: Snapshot, options: object) -> Iterator[Finding]:
        """Finds every queue."""
        for table in ("jobs", "mail"):
            yield Finding(Target("table", "public", table, table), f"public.{table}", {})

    snap = S.snapshot(S.jobs_table())
    snap.unavailable[unavailable_key("table_facts", "public.mail")] = "timed out"
    snap.unavailable[unavailable_key("horizon")] = "hidden"
    assert snap.unavailable_for("table_facts") == {"public.mail": "timed out"}
    assert snap.unavailable_for("horizon") == {None: "hidden"}
    report = engine.run_checks(snap, [run])
    assert [f.message for f in report.findings] == ["public.jobs"]
    assert report.skipped == (
        Skip("public.mail: timed out", "public.mail", code="ZZ903", fact="table_facts"),
    )


def test_a_finding_is_placed_and_ignored_by_the_statement_it_names_by_id(tmp_path: Path) -> None:
    chk = registry.check("ZZ902", "about-the-claim", severity=Severity.INFO, category="test")(
        _about_the_claim
    )
    sql = tmp_path / "sql" / "claim.sql"
    claim = "SELECT id FROM jobs WHERE status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED"
    stmt = Statement(f"{sql}:3", claim, analyse(claim), line=3, fingerprint="3f9a2c1b0d",
                     queue="public.jobs")  # fmt: skip
    snap = dataclasses.replace(S.snapshot(S.jobs_table()), statements=(stmt,))
    report = engine.run_checks(snap, [chk])
    by_message = {f.message: f for f in report.findings}
    assert by_message["its target"].statement_id == "jobs@3f9a2c1b0d"
    assert by_message["by label"].statement_id is None
    placed = engine.locations(report, tmp_path)
    at = Location("sql/claim.sql", 3)
    assert placed == {by_message["by id"].key: at, by_message["its target"].key: at}
    # The same text resolved on another queue is another statement: not placed there.
    moved = dataclasses.replace(stmt, queue="app.jobs")
    elsewhere = dataclasses.replace(report.snapshot, statements=(moved,))
    assert engine.locations(dataclasses.replace(report, snapshot=elsewhere), tmp_path) == {}

    ignoring = dataclasses.replace(snap, inline_ignores=(InlineIgnore(stmt.source, ("ZZ902",), 2),))
    kept, dropped = engine.apply_inline_ignores(engine.run_checks(ignoring, [chk]))
    assert [f.message for f in kept.findings] == ["by label"]
    assert dropped == {by_message["by id"].key, by_message["its target"].key}
    assert kept.ignored == (Ignored(stmt.source, 2, "ZZ902", 2),)


def test_a_bad_snapshot_file_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 99}')
    with pytest.raises(SnapshotFileError, match="not a qadvisor snapshot"):
        engine.check(_settings(tmp_path, snapshot_file=bad))
    with pytest.raises(SnapshotFileError, match="cannot read"):
        engine.collect(_settings(tmp_path, snapshot_file=tmp_path / "missing.json"))


def test_a_saved_snapshot_reads_back_equal(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    snap = engine.collect(settings)
    again = tmp_path / "again.json"
    again.write_text(engine.snapshot_json(snap))
    assert engine.load_snapshot(again) == snap


def test_every_format_has_a_renderer_that_needs_only_the_report(tmp_path: Path) -> None:
    assert list(RENDERERS_FORMATS) == [f.value for f in Format]
    report = engine.check(_settings(tmp_path))
    for fmt in RENDERERS_FORMATS:
        out = io.StringIO()
        render.write(report, fmt, out)
        assert out.getvalue(), fmt
    out = io.StringIO()
    render.write(report, "text", out, annotations=True)
    assert out.getvalue().count("::warning title=") == len(report.findings)
    # SARIF's rules come from the report: the checks that ran, from their docstrings.
    assert [r.code for r in report.rules] == list(report.checks_run)
    rules = json.loads(sarif.render(report))["runs"][0]["tool"]["driver"]["rules"]
    qa101 = next(r for r in rules if r["id"] == "QA101")
    chk = next(c for c in CHECKS if c.code == "QA101")
    assert qa101["shortDescription"]["text"] == chk.summary
    assert qa101["properties"]["docs"] == chk.docs_path


RENDERERS_FORMATS = tuple(render.RENDERERS)


def test_check_and_snapshot_share_the_collection(db: TestDB, tmp_path: Path) -> None:
    build_archive_queue(db)
    settings = resolve(Flags(dsn=db.dsn), env={}, cwd=tmp_path, checks=CHECKS)
    snap = engine.collect(settings)
    assert [q.qualified for q in snap.queues] == ["public.jobs"]
    saved = tmp_path / "s.json"
    saved.write_text(engine.snapshot_json(snap))
    offline = engine.check(dataclasses.replace(settings, dsn=None, snapshot_file=saved))
    online = check(db).report
    assert [f.key for f in offline.findings] == [f["key"] for f in online["findings"]]
