"""Discovery of queue tables: pure decisions, then the real catalog."""

from __future__ import annotations

from qadvisor import discover
from qadvisor.discover import CandidateColumn, LockingStatement, PartialIndex
from qadvisor.model import LivePredicate
from tests.conftest import TestDB
from tests.helpers import build_archive_queue, check


def col(
    table: str, name: str, values: tuple[str, ...] | None = None, **kw: object
) -> CandidateColumn:
    base: dict[str, object] = {"type": "text", "not_null": True, "enum_labels": None,
                               "indexed": False, "common_values": values}  # fmt: skip
    base.update(kw)
    return CandidateColumn("public", table, hash(table) & 0xFFFF, name, **base)  # type: ignore[arg-type]


def test_partial_index_predicate_is_the_live_predicate() -> None:
    (d,) = discover.decide(
        [col("jobs", "status")],
        [
            PartialIndex(
                "public", "jobs", hash("jobs") & 0xFFFF, "jobs_q", "(status = 'queued'::text)"
            )
        ],
        [],
    )
    assert d.live == LivePredicate("status", "in", ("queued",), "partial index jobs_q")
    assert "partial index" in d.reason


def test_status_values_and_an_index_make_a_queue_but_values_alone_do_not() -> None:
    values = ("done", "pending", "failed")
    (d,) = discover.decide([col("jobs", "status", values, indexed=True)], [], [])
    assert d.live is not None and d.live.values == ("pending",)
    assert discover.decide([col("jobs", "status", values)], [], []) == []


def test_orders_with_a_status_column_are_not_a_queue() -> None:
    assert (
        discover.decide([col("orders", "status", ("shipped", "paid"), indexed=True)], [], []) == []
    )


def test_skip_locked_statements_count_as_evidence() -> None:
    (d,) = discover.decide(
        [col("jobs", "state", ("queued", "done"))],
        [],
        [LockingStatement(None, "jobs", True, 10)],
    )
    assert "1 SKIP LOCKED statement(s)" in d.reason


def test_library_shape_is_recognised_without_its_table_name() -> None:
    labels = ("available", "scheduled", "executing", "retryable", "completed", "discarded",
              "cancelled")  # fmt: skip
    c = col("background_work", "state", None, enum_labels=labels, type="oban_job_state")
    cols = frozenset({"id", "state", "queue", "worker", "args", "scheduled_at", "attempt"})
    (d,) = discover.decide([c], [], [], {c.relid: cols})
    assert d.live == LivePredicate("state", "in", ("available",), "queue library Oban")
    good_job = col("work", "finished_at", None, type="timestamp without time zone",
                   not_null=False)  # fmt: skip
    gj_cols = frozenset({"id", "finished_at", "performed_at", "scheduled_at", "queue_name",
                         "active_job_id"})  # fmt: skip
    (d,) = discover.decide([good_job], [], [], {good_job.relid: gj_cols})
    assert d.live is not None and d.live.op == "is null"


def test_explicit_tables_win() -> None:
    (d,) = discover.decide([], [], [], None, [("public", "anything", 42)])
    assert d.table == "anything" and d.live is None and d.reason.startswith("named with --table")


def test_finds_queues_by_index_statements_and_enum(db: TestDB) -> None:
    build_archive_queue(db, archive=20_000)
    db.execute(
        """
        CREATE TYPE job_state AS ENUM ('available', 'running', 'completed', 'discarded');
        CREATE TABLE work_items (id bigserial PRIMARY KEY, state job_state NOT NULL,
                                 run_at timestamptz NOT NULL DEFAULT now());
        CREATE INDEX work_items_ready ON work_items (run_at) WHERE state = 'available';
        CREATE TABLE users (id serial PRIMARY KEY, status text, created_at timestamptz);
        INSERT INTO users (status) SELECT 'active' FROM generate_series(1, 100);
        ANALYZE;
        """
    )
    report = check(db).report
    found = {q["table"]: q for q in report["queues"]}
    assert set(found) == {"jobs", "work_items"}
    assert found["work_items"]["live_predicate"] == "state = 'available'"
    assert "partial index work_items_ready" in found["work_items"]["reason"]
    assert found["jobs"]["live_predicate"] == "status = 'pending'"


def test_pg_stat_statements_dequeue_is_found(db: TestDB) -> None:
    db.execute("CREATE EXTENSION pg_stat_statements")
    db.execute(
        """
        CREATE TABLE tasks (id bigserial PRIMARY KEY, state text NOT NULL);
        INSERT INTO tasks (state) SELECT 'ready' FROM generate_series(1, 50);
        ANALYZE tasks;
        """
    )
    with db.connect() as conn:
        for _ in range(3):
            conn.execute("SELECT id FROM tasks WHERE state = %s ORDER BY id LIMIT 1 "
                         "FOR UPDATE SKIP LOCKED", ("ready",))  # fmt: skip
        conn.execute("SELECT pg_stat_force_next_flush()")
    (q,) = check(db).report["queues"]
    assert q["table"] == "tasks" and "SKIP LOCKED" in q["reason"]
