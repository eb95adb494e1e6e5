"""Discovery leaves out, on the server, the tables that cannot be queues, and keeps every one
that can: a table no claim reads is read further only through a partial index, an indexed
status whose values read as waiting, or a known library's shape, even one with no index.

The database holds one table of each kind and no claim, so structure alone decides.
"""

from __future__ import annotations

from qadvisor.collect import queries as q
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.derive import discover
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB

TABLES = """
-- GoodJob's shape, not one index: the shape alone says it is a queue.
CREATE TABLE good_jobs (
    id bigserial, queue_name text, active_job_id uuid, scheduled_at timestamptz,
    performed_at timestamptz, finished_at timestamptz, serialized_params jsonb
);
INSERT INTO good_jobs (queue_name, finished_at)
SELECT 'default', CASE WHEN g % 5 = 0 THEN NULL ELSE now() END FROM generate_series(1, 500) g;
-- An indexed status with waiting and finished values.
CREATE TABLE tasks (id bigserial PRIMARY KEY, status text NOT NULL);
INSERT INTO tasks (status)
SELECT CASE WHEN g % 4 = 0 THEN 'queued' ELSE 'done' END FROM generate_series(1, 500) g;
CREATE INDEX ON tasks (status);
-- A partial index on a live predicate, the status itself unindexed.
CREATE TABLE mails (id bigserial PRIMARY KEY, state text NOT NULL, sent_at timestamptz);
INSERT INTO mails (state) SELECT 'pending' FROM generate_series(1, 50);
CREATE INDEX ON mails (id) WHERE state = 'pending';
-- Ordinary tables: an indexed active/inactive status, an unindexed nullable *_at.
CREATE TABLE users (id bigserial PRIMARY KEY, status text NOT NULL, deleted_at timestamptz);
INSERT INTO users (status)
SELECT CASE WHEN g % 3 = 0 THEN 'inactive' ELSE 'active' END FROM generate_series(1, 500) g;
CREATE INDEX ON users (status);
CREATE TABLE notes (id bigserial PRIMARY KEY, body text, updated_at timestamptz);
INSERT INTO notes (body) SELECT 'n' FROM generate_series(1, 50);
-- A soft delete: a partial index on deleted_at IS NULL is no sign of a queue by itself.
CREATE TABLE accounts (id bigserial PRIMARY KEY, email text NOT NULL, deleted_at timestamptz);
INSERT INTO accounts (email) SELECT 'user' || g FROM generate_series(1, 50) g;
CREATE UNIQUE INDEX ON accounts (email) WHERE deleted_at IS NULL;
-- A status whose values read as waiting, with no index: nothing else marks it.
CREATE TABLE exports (id bigserial PRIMARY KEY, status text NOT NULL);
INSERT INTO exports (status)
SELECT CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'done' END FROM generate_series(1, 50) g;
ANALYZE;
"""


def test_only_tables_that_can_be_queues_are_read_and_each_of_them_is(db: TestDB) -> None:
    db.execute(TABLES)
    with connect(db.dsn, SessionLimits()) as conn:
        rows = q.rows(conn, "candidate_columns", discover.candidate_filter([]))
    read = {r["table"] for r in rows}
    assert read == {"good_jobs", "tasks", "mails"}
    # Every column of a kept table that can mark a live row comes back, indexed or not.
    assert {r["column"] for r in rows if r["table"] == "mails"} == {"state", "sent_at"}

    snap = take_snapshot(db)
    live = {f"{x.schema}.{x.table}": x.live for x in snap.queues}
    assert set(live) == {"public.good_jobs", "public.tasks", "public.mails"}
    assert live["public.good_jobs"] is not None
    assert (live["public.good_jobs"].column, live["public.good_jobs"].op) == (
        "finished_at",
        "is null",
    )
    assert live["public.tasks"] is not None and live["public.tasks"].values == ("queued",)
    assert live["public.mails"] is not None and live["public.mails"].values == ("pending",)
    # Left out before their columns were read, so not listed among the rejected either.
    assert not {r.table for r in snap.rejected} & {"users", "notes", "exports", "accounts"}


def test_a_table_named_with_table_is_read_whatever_it_looks_like(db: TestDB) -> None:
    db.execute(TABLES)
    relid = db.execute("SELECT 'exports'::regclass::oid")[0][0]
    with connect(db.dsn, SessionLimits()) as conn:
        rows = q.rows(conn, "candidate_columns", discover.candidate_filter([], [relid]))
    assert {r["table"] for r in rows} == {"good_jobs", "tasks", "mails", "exports"}
