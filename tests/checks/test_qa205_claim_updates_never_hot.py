"""QA205 claim-updates-never-hot: workers' heartbeats on a real server, seen in
pg_stat_statements, kept from being HOT by an index on the heartbeat column; the printed fix
applied as printed, and the server's counters show the heartbeats HOT afterwards. Then unit
tests on hand-built snapshots."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg

from qadvisor.model import (
    Column,
    Finding,
    LivePredicate,
    PlanNode,
    Severity,
    Stakeholder,
    Statement,
    TableStats,
)
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S
from tests.conftest import TestDB, flush_stats
from tests.helpers import Run, assert_quiet
from tests.shapes import Shape

CLAIM = (
    "UPDATE jobs SET status = 'running', heartbeat_at = now() WHERE id = (SELECT id FROM jobs "
    "WHERE status = 'queued' ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
)
HEARTBEAT = "UPDATE jobs SET heartbeat_at = now() WHERE id = %s"
CLAIMS, BEATS = 100, 15


def build_queue(db: TestDB, *, heartbeat_index: bool = True) -> None:
    """50,000 finished jobs and 300 waiting ones, the live set's partial index and, where
    asked, an index on the heartbeat column over every row (a dashboard's, say)."""
    db.execute(
        """
        CREATE TABLE jobs (
            id           bigserial PRIMARY KEY,
            status       text        NOT NULL DEFAULT 'queued',
            run_at       timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz,
            created_at   timestamptz NOT NULL DEFAULT now(),
            finished_at  timestamptz,
            payload      text        NOT NULL DEFAULT repeat('x', 40)
        );
        INSERT INTO jobs (status, run_at, heartbeat_at, finished_at)
        SELECT 'done', now() - interval '1 hour', now() - interval '1 hour', now()
          FROM generate_series(1, 50000);
        INSERT INTO jobs (run_at) SELECT now() + g * interval '1 second'
          FROM generate_series(1, 300) AS g;
        CREATE INDEX jobs_queued_run_at_idx ON jobs (run_at) WHERE status = 'queued';
        """
    )
    if heartbeat_index:
        db.execute("CREATE INDEX jobs_heartbeat_at_idx ON jobs (heartbeat_at)")
    db.execute("VACUUM ANALYZE jobs")


def run_workers(shape: Shape, *, reset: bool = True) -> list[int]:
    """Workers claim jobs and beat the heart of each one they run, as the application does
    (its statements recorded afresh); the claimed ids."""
    if reset:
        shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        conn.autocommit = True
        ids = [conn.execute(CLAIM).fetchone()[0] for _ in range(CLAIMS)]  # type: ignore[index]
        beat(conn, ids)
        flush_stats(conn)
    return ids


def beat(conn: psycopg.Connection[Any], ids: list[int]) -> None:
    for _ in range(BEATS):
        for i in ids:
            conn.execute(HEARTBEAT, [i])


def counters(db: TestDB) -> tuple[int, int]:
    row = db.wait_for_stats("jobs", lambda r: r["n_tup_upd"] > 0)
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


def found(run: Run) -> dict[str, Any]:
    hits = run.findings("QA205")
    assert len(hits) == 1, [s for s in run.report["skipped"] if s["code"] == "QA205"]
    return hits[0]


def test_heartbeats_kept_from_hot_by_an_index_are_found_fixed_as_printed_and_go_hot(
    shape: Shape,
) -> None:
    build_queue(shape.db)
    ids = run_workers(shape)
    shape.db.wait_for_stats("jobs", lambda r: r["n_tup_upd"] >= CLAIMS * (BEATS + 1))
    f = found(shape.check())
    ev = f["evidence"]
    assert f["severity"] == "warning", f["message"]
    assert ev["updates"] >= CLAIMS * (BEATS + 1) and ev["hot_updates"] == 0
    (beats,) = ev["statements"]
    assert beats["sets"] == ["heartbeat_at"] and beats["calls"] == CLAIMS * BEATS
    assert beats["rows"] == CLAIMS * BEATS and beats["stopped_by"] == ["jobs_heartbeat_at_idx"]
    # The claim sets the heartbeat too, but it moves its row out of the live set through
    # the status, which the live set's partial index reads: never HOT, and not reported.
    assert all("status" not in s["sets"] for s in ev["statements"])
    written = {i["index"] for i in ev["indexes_each_update_writes"]}
    assert written == {"jobs_pkey", "jobs_heartbeat_at_idx"}
    (step,) = f["fix"]["steps"]
    assert step["kind"] == "review"
    assert step["sql"] == f"DROP INDEX CONCURRENTLY {shape.schema}.jobs_heartbeat_at_idx;"

    shape.apply_fix(f, review=True)  # exactly as printed
    assert_quiet(shape.check(), "QA205", shape.queue)
    # The server agrees: the same heartbeats are now heap-only.
    before_upd, before_hot = counters(shape.db)
    with shape.db.connect() as conn:
        conn.autocommit = True
        beat(conn, ids)
        flush_stats(conn)
    row = shape.db.wait_for_stats("jobs", lambda r: r["n_tup_upd"] >= before_upd + len(ids) * BEATS)
    hot = int(row["n_tup_hot_upd"]) - before_hot
    assert hot >= 0.9 * len(ids) * BEATS, (hot, row)


def test_claims_and_heartbeats_with_no_index_on_the_heartbeat_are_quiet(shape: Shape) -> None:
    # The claims change the status (never HOT while the live set's index reads it); the
    # heartbeats set a column no index reads.
    build_queue(shape.db, heartbeat_index=False)
    run_workers(shape)
    upd, hot = counters(shape.db)
    assert upd >= 1_000 and hot > 0.5 * upd, (upd, hot)
    assert_quiet(shape.check(), "QA205", shape.queue)


def test_without_the_heartbeats_the_claims_alone_are_quiet(shape: Shape) -> None:
    """Only claims update: none of them is HOT (the status is indexed), which is expected."""
    build_queue(shape.db)
    shape.dba.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    shape.dba.execute("SELECT pg_stat_statements_reset()")
    with shape.db.connect() as conn:
        conn.autocommit = True
        for _ in range(3):  # every waiting job claimed, and put back: 1,500 updates
            for _ in range(300):
                conn.execute(CLAIM)
            conn.execute("UPDATE jobs SET status = 'queued' WHERE status = 'running'")
        flush_stats(conn)
    upd, hot = counters(shape.db)
    assert upd >= 1_000 and hot < 0.1 * upd, (upd, hot)
    assert_quiet(shape.check(), "QA205", shape.queue)


# --- unit tests on hand-built snapshots --------------------------------------------------------

BEAT_TEXT = "UPDATE jobs SET heartbeat_at = now() WHERE id = $1"
CLAIM_TEXT = (
    "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = "
    "'pending' ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)"
)


def judged(
    updates: int = 20_000,
    hot: int = 100,
    statements: tuple[Stakeholder, ...] = (),
    *,
    indexes: tuple[Any, ...] | None = None,
    unavailable: dict[str, str] | None = None,
    live_known: bool = True,
    planned: bool = False,
) -> list[object]:
    live = S.index("jobs_live", ("created_at",), 8192, predicate="(status = 'pending')")
    beat = S.index("jobs_heartbeat", ("heartbeat_at",), 40 << 20)
    table = S.jobs_table(indexes=indexes if indexes is not None else (live, beat))
    table = replace(
        table,
        columns=(*table.columns, Column("heartbeat_at", "timestamp with time zone")),
        stats=TableStats(n_tup_upd=updates, n_tup_hot_upd=hot),
    )
    reads = PlanNode("Index Scan", relation="jobs", schema="public", index="jobs_live")
    claim = Statement(text=CLAIM_TEXT, source="--query 1", parsed=analyse(CLAIM_TEXT),
                      custom_plan=reads if planned else None)  # fmt: skip
    snap = replace(
        S.snapshot(table) if live_known else S.snapshot(table, live=None),
        statements=(claim,),
        stakeholders=statements,
        unavailable=unavailable or {},
    )
    return S.run("QA205", snap)


def beats(calls: int = 18_000, rows: int | None = 18_000) -> Stakeholder:
    return Stakeholder("pg_stat_statements", BEAT_TEXT, "public.jobs", 7, calls, rows=rows)


def test_a_heartbeat_on_an_indexed_column_warns_and_few_recorded_give_info() -> None:
    (f,) = judged(statements=(beats(),))
    assert isinstance(f, Finding) and f.severity == Severity.WARNING, f
    assert f.evidence["indexes_stopping_hot"][0]["index"] == "jobs_heartbeat"
    (step,) = f.fix.steps if f.fix else ()
    assert step.sql == "DROP INDEX CONCURRENTLY public.jobs_heartbeat;"
    (f,) = judged(statements=(beats(calls=50, rows=50),))
    assert isinstance(f, Finding) and f.severity == Severity.INFO


def test_a_high_hot_share_or_few_updates_are_quiet() -> None:
    assert judged(hot=15_000, statements=(beats(),)) == []
    assert judged(updates=300, hot=0, statements=(beats(),)) == []


def test_an_index_another_statement_reads_stays_and_is_named() -> None:
    reader = Stakeholder(
        "pg_stat_statements", "SELECT count(*) FROM jobs WHERE heartbeat_at < now()",
        "public.jobs", 8, 40, indexes_used=("jobs_heartbeat",),
    )  # fmt: skip
    (f,) = judged(statements=(beats(), reader))
    assert isinstance(f, Finding) and f.fix is not None
    assert f.fix.steps == () and "jobs_heartbeat stays" in f.fix.notes


def test_a_claim_that_could_not_be_planned_is_named_beside_the_drop() -> None:
    # The snapshot's claim has no plan (the role could not make one): whether it reads the
    # index is unknown, and the DROP's note says so instead of "no recorded claim reads it".
    (f,) = judged(statements=(beats(),))
    assert isinstance(f, Finding) and f.fix is not None
    assert "1 claim(s) on the table could not be planned (--query 1" in f.fix.notes
    assert "so whether they read it is unknown" in f.fix.notes
    (f,) = judged(statements=(beats(),), planned=True)
    assert isinstance(f, Finding) and f.fix is not None
    assert "could not be planned" not in f.fix.notes
    assert "no recorded claim or statement reads jobs_heartbeat" in f.fix.notes


def test_updates_nobody_recorded_are_a_skip_not_an_all_clear() -> None:
    (s,) = judged(statements=(), unavailable={"pg_stat_statements": "not installed"})
    assert not isinstance(s, Finding) and "not installed" in str(s)


def test_a_brin_index_stops_no_hot_update_from_16() -> None:
    live = S.index("jobs_live", ("created_at",), 8192, predicate="(status = 'pending')")
    brin = replace(
        S.index("jobs_heartbeat", ("heartbeat_at",), 1 << 20),
        definition="CREATE INDEX jobs_heartbeat ON public.jobs USING brin (heartbeat_at)",
    )
    assert judged(statements=(beats(),), indexes=(live, brin)) == []


def test_an_unknown_live_set_is_a_skip_only_when_an_update_sets_an_indexed_column() -> None:
    (s,) = judged(statements=(beats(),), live_known=False)
    assert not isinstance(s, Finding) and "live predicate's column is unknown" in str(s), s
    assert judged(updates=300, hot=0, statements=(beats(),), live_known=False) == []


def test_an_update_of_what_a_generated_live_flag_reads_sets_the_flag() -> None:
    # graphile-worker's shape: is_available is stored, generated from locked_at and attempts;
    # a failure's update sets run_at, which the live index's keys hold, and locked_at, which
    # turns the flag: it changes the live predicate's column, as a claim does.
    live = S.index("jobs_main", ("priority", "run_at"), 8192, predicate="(is_available = true)")
    table = S.jobs_table(indexes=(live,))
    table = replace(
        table,
        columns=(
            *table.columns,
            Column("run_at", "timestamp with time zone"),
            Column("locked_at", "timestamp with time zone"),
            Column("attempts", "smallint"),
            Column(
                "is_available", "boolean", generated="((locked_at IS NULL) AND (attempts < 25))"
            ),
        ),
        stats=TableStats(n_tup_upd=20_000, n_tup_hot_upd=100),
    )
    claim = Statement(text=CLAIM_TEXT, source="--query 1", parsed=analyse(CLAIM_TEXT))
    fail = Stakeholder(
        "pg_stat_statements",
        "UPDATE jobs SET run_at = now() + interval '1 minute', locked_at = NULL WHERE id = $1",
        "public.jobs", 7, 18_000, rows=18_000,
    )  # fmt: skip
    flag = LivePredicate("is_available", "true", (), "partial index jobs_main")
    snap = replace(S.snapshot(table, live=flag), statements=(claim,), stakeholders=(fail,))
    assert S.run("QA205", snap) == []
    # Without the generated column the same update would keep run_at's index from HOT.
    plain = replace(table, columns=tuple(c for c in table.columns if c.name != "is_available"))
    snap = replace(S.snapshot(plain, live=flag), statements=(claim,), stakeholders=(fail,))
    (f,) = S.run("QA205", snap)
    assert isinstance(f, Finding)


# Its fixes are review steps only (they end a session or delete rows once the application
# is changed): tests/fixes/test_fix_steps.py runs none of them, this module does.
FIX_REVIEW_ONLY = {"QA205": "drops the index as printed and sees the heartbeats go HOT"}
