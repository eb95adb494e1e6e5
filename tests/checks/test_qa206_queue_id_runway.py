"""QA206 queue-id-runway."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qadvisor.model import Finding, IdSequence, ServerInfo, Severity, Skip
from tests import snapshots as S
from tests.conftest import TestDB
from tests.helpers import assert_quiet
from tests.shapes import Shape

INT_MAX = 2**31 - 1


def sequence(**kw: object) -> IdSequence:
    values: dict[str, object] = {
        "column": "id", "column_type": "integer", "schema": "public", "name": "jobs_id_seq",
        "data_type": "integer", "max_value": INT_MAX, "increment": 1, "last_value": 1000,
    }  # fmt: skip
    values.update(kw)
    return IdSequence(**values)  # type: ignore[arg-type]


def judged(seq: IdSequence, inserts: int = 0, reset: str | None = None) -> list[object]:
    table = S.jobs_table()
    table = replace(table, id_sequences=(seq,), stats=replace(table.stats, n_tup_ins=inserts))
    snap = S.snapshot(table)
    server = ServerInfo("18.6", 180006, "app", "monitor", collected_at="2026-12-02T10:00:00+00:00",
                        stats_reset=reset)  # fmt: skip
    return S.run("QA206", replace(snap, server=server))


def test_the_share_used_and_the_days_left_set_the_severity() -> None:
    (f,) = judged(sequence(last_value=int(INT_MAX * 0.95)))
    assert isinstance(f, Finding) and f.severity == Severity.CRITICAL
    (f,) = judged(sequence(last_value=int(INT_MAX * 0.6)))
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    assert "the rate ids are used at is unknown" in f.message
    # 1 % used, 100 M ids in 10 days: the remaining 2.1 G last about 210 days.
    (f,) = judged(
        sequence(last_value=int(INT_MAX * 0.01)),
        inserts=100_000_000,
        reset="2026-11-22T10:00:00+00:00",
    )
    assert isinstance(f, Finding) and f.severity == Severity.WARNING
    assert f.evidence["ids_per_day"] == 10_000_000.0
    assert 200 < f.evidence["days_left"] < 215
    assert f.fix is not None and f.fix.statements == ()  # both for review
    assert [s.sql for s in f.fix.steps] == [
        "ALTER TABLE public.jobs ALTER COLUMN id TYPE bigint;",
        "ALTER SEQUENCE public.jobs_id_seq AS bigint;",
    ]


def test_without_a_rate_a_little_used_range_is_not_judged() -> None:
    (s,) = judged(sequence(last_value=5000))
    assert isinstance(s, Skip) and "run with --sample" in s.reason
    # With a slow measured rate it is judged, and quiet.
    assert judged(sequence(last_value=5000), inserts=1000, reset="2026-11-02T10:00:00+00:00") == []


def test_an_unread_sequence_is_a_skip_not_an_all_clear() -> None:
    (s,) = judged(sequence(readable=False, last_value=None))
    assert isinstance(s, Skip) and "is unknown" in s.reason


def test_bigint_is_quiet_and_a_widened_serial_keeps_its_integer_sequence() -> None:
    assert judged(sequence(column_type="bigint", data_type="bigint", max_value=2**63 - 1)) == []
    (f,) = judged(sequence(column_type="bigint", last_value=int(INT_MAX * 0.7)))
    assert isinstance(f, Finding) and f.fix is not None
    assert [s.sql for s in f.fix.steps] == ["ALTER SEQUENCE public.jobs_id_seq AS bigint;"]


# --- on real servers --------------------------------------------------------------------------


def build(db: TestDB, id_column: str, used: int) -> None:
    """A queue numbered by ``id_column``, its sequence moved to ``used``, 30,000 rows inserted
    since the statistics were reset."""
    db.execute(
        f"""
        CREATE TABLE jobs (
            id {id_column} PRIMARY KEY,
            status     text        NOT NULL DEFAULT 'queued',
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX jobs_queued ON jobs (created_at) WHERE status = 'queued';
        """
    )
    db.execute(f"SELECT setval(pg_get_serial_sequence('jobs', 'id'), {used})")


ROWS = 30_000
USED = 1_200_000_000  # of 2,147,483,647: 56 %


def insert_since_reset(shape: Shape, rows: int = ROWS) -> None:
    shape.dba.execute("SELECT pg_stat_reset()")
    shape.db.execute(
        f"INSERT INTO jobs (status) SELECT CASE WHEN g % 10 = 0 THEN 'queued' ELSE 'done' END "
        f"FROM generate_series(1, {rows}) AS g"
    )
    shape.db.execute("ANALYZE jobs")
    shape.db.wait_for_stats("jobs", lambda r: r["n_tup_ins"] >= rows)


@pytest.mark.parametrize("id_column", ["serial", "integer GENERATED ALWAYS AS IDENTITY"])
def test_an_integer_id_burning_fast_is_found_widened_as_printed_and_gone(
    shape: Shape, id_column: str
) -> None:
    build(shape.db, id_column, USED)
    insert_since_reset(shape)
    run = shape.check()
    found = run.findings("QA206")
    assert len(found) == 1, [s for s in run.report["skipped"] if s["code"] == "QA206"]
    (f,) = found
    ev = f["evidence"]
    assert ev["column_type"] == "integer" and ev["sequence"] == f"{shape.queue}_id_seq"
    assert ev["ids_used"] == USED + ROWS and ev["ids_used_from"].startswith("the last value")
    # Over half the range: a warning whatever the rate; the rate (the inserts over the time
    # since the reset, which a loaded machine stretches) makes it critical within 30 days.
    days = ev["days_left"]
    expected = "critical" if days is not None and days < 30 else "warning"
    assert f["severity"] == expected, f["message"]
    if ev["rate_from"] is not None:
        assert ev["rate_from"].startswith(f"{ROWS:,} rows inserted since the statistics reset")
    shape.apply_fix(f, review=True)
    types = shape.dba.execute(
        "SELECT format_type(a.atttypid, NULL), format_type(s.seqtypid, NULL), s.seqmax "
        "FROM pg_attribute a, pg_sequence s WHERE a.attrelid = %s::regclass AND a.attname = 'id' "
        "AND s.seqrelid = pg_get_serial_sequence(%s, 'id')::regclass",
        [shape.queue, shape.queue],
    )
    assert types == [("bigint", "bigint", 2**63 - 1)]
    assert_quiet(shape.check(), "QA206", shape.queue)
    shape.db.execute("INSERT INTO jobs DEFAULT VALUES")  # the queue still takes jobs


def test_a_bigint_id_is_quiet(shape: Shape) -> None:
    build(shape.db, "bigint GENERATED ALWAYS AS IDENTITY", USED)
    insert_since_reset(shape)
    assert_quiet(shape.check(), "QA206", shape.queue)


# Its fixes are review steps only (they end a session or delete rows once the application
# is changed): tests/fixes/test_fix_steps.py runs none of them, this module does.
FIX_REVIEW_ONLY = {"QA206": "runs the bigint migration as printed"}
