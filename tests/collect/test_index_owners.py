"""Which of a queue table's indexes a constraint of the table owns: the checks never drop
those, and a --prove copy builds them back as constraints. Another table's foreign key that
references a plain unique index does not own it (the index is unique, which the checks read
too, so it is not dropped either)."""

from __future__ import annotations

from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB

QUEUE = """
CREATE TABLE jobs (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status     text NOT NULL,
    dedupe_key text,
    ref        bigint NOT NULL,
    during     tstzrange,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT jobs_dedupe_key_key UNIQUE (dedupe_key),
    CONSTRAINT jobs_during_excl EXCLUDE USING gist (during WITH &&)
);
CREATE UNIQUE INDEX jobs_ref_idx ON jobs (ref);
CREATE INDEX jobs_status_created_at_idx ON jobs (status, created_at);
CREATE TABLE job_results (job_ref bigint REFERENCES jobs (ref), body text);
INSERT INTO jobs (status, ref)
SELECT CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'done' END, g FROM generate_series(1, 500) g;
ANALYZE jobs;
"""


def test_only_the_tables_own_constraints_own_an_index(db: TestDB) -> None:
    db.execute(QUEUE)
    snap = take_snapshot(db)
    (table,) = [t for t in snap.tables if t.name == "jobs"]
    owned = {i.name: i.is_constraint for i in table.indexes}
    assert owned == {
        "jobs_pkey": True,
        "jobs_dedupe_key_key": True,
        "jobs_during_excl": True,
        "jobs_ref_idx": False,  # job_results' foreign key references it
        "jobs_status_created_at_idx": False,
    }
    assert {i.name for i in table.indexes if i.is_unique} == {
        "jobs_pkey",
        "jobs_dedupe_key_key",
        "jobs_ref_idx",
    }


def test_each_key_columns_direction_is_read(db: TestDB) -> None:
    # An existing (priority DESC, id) index is the one a claim ordered so needs: a fix that
    # compares key directions must see them, or it proposes that index again.
    db.execute(
        QUEUE.replace("ref        bigint NOT NULL,", "ref bigint NOT NULL, priority int,")
        + "CREATE INDEX jobs_pending_priority_id_idx ON jobs (priority DESC, id) "
        "WHERE status = 'pending';"
    )
    snap = take_snapshot(db)
    (table,) = [t for t in snap.tables if t.name == "jobs"]
    directions = {i.name: i.descending for i in table.indexes}
    assert directions["jobs_pending_priority_id_idx"] == (True, False)
    assert directions["jobs_status_created_at_idx"] == (False, False)
