"""qadvisor reads SQL with sqlglot; PostgreSQL's own parser (pglast, a test dependency) must
read every statement and function body the suite holds the same way."""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.sql import dequeue
from tests.sql import postgres_parser
from tests.sql.postgres_parser import (
    compare,
    function_lock_sites,
    postgres_reading,
    suite_functions,
    suite_statements,
)

# Statements PostgreSQL parses and qadvisor's parser refuses (the product leaves each out of
# planning with the parser's message, and says so), with why the refusal is accepted.
REFUSED = {
    "tests/collect/test_hidden_values.py": "ORDER BY ... USING <: an operator ordering, which "
    "sqlglot does not parse; the test checks that such a claim is left out with why",
}


def test_every_statement_of_the_suite_is_read_as_postgresql_reads_it() -> None:
    compared, misread, refused = 0, [], []
    for where, text in suite_statements():
        verdict = compare(text)
        if verdict is None:
            continue  # PostgreSQL refuses it too: a fragment, or a refusal test's input
        compared += 1
        misread += [f"{where}: {m}\n    {text}" for m in verdict.misread]
        if verdict.refused and where.split(":")[0] not in REFUSED:
            refused.append(f"{where}: {verdict.refused}\n    {text}")
    assert compared >= 200, f"only {compared} statements compared: is the harvest broken?"
    assert not misread, "qadvisor reads these otherwise than PostgreSQL:\n" + "\n".join(misread)
    assert not refused, "qadvisor's parser refuses these:\n" + "\n".join(refused)


def test_every_function_body_of_the_suite_is_split_as_postgresql_splits_it() -> None:
    compared, wrong = 0, []
    for where, text in suite_functions():
        sites = function_lock_sites(text)
        if sites is None:
            continue  # libpg_query cannot compile it (types it looks up in a catalog)
        compared += 1
        theirs, ours = sites
        if theirs != ours:
            wrong.append(f"{where}: PostgreSQL {sorted(theirs)}\n    qadvisor {sorted(ours)}")
    assert compared >= 10, f"only {compared} function bodies compared"
    assert not wrong, "row-locking statements of function bodies read otherwise:\n" + "\n".join(
        wrong
    )


CLAIM = (
    "WITH next AS (SELECT id FROM app.jobs WHERE status = $2 ORDER BY id LIMIT $1 "
    "FOR NO KEY UPDATE OF jobs SKIP LOCKED), c AS (SELECT 1 FROM next FOR UPDATE) "
    "UPDATE app.jobs SET status = 'running', locked_at = now() FROM next WHERE jobs.id = next.id"
)


def test_postgresql_reading_of_a_claim() -> None:
    r = postgres_reading(CLAIM)
    assert r is not None
    assert r.kind == "update"
    # The second lock is over a WITH query's name only: it locks no row.
    assert r.locks == {("no key update", "skip locked")}
    assert r.relations == {("app", "jobs")}  # OF jobs and the WITH names are no tables
    assert r.parameters == (1, 2)
    assert r.updates == {("app", "jobs", frozenset({"status", "locked_at"}))}
    assert postgres_reading("SELECT 1; SELECT 2") is None
    assert postgres_reading("SELECT FROM WHERE") is None


def test_a_misreading_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert compare(CLAIM) == postgres_parser.Verdict()
    real = dequeue.analyse

    def wrong(sql: str) -> dequeue.DequeueStatement | None:
        parsed = real(sql)
        assert parsed is not None
        lock = dataclasses.replace(parsed.lock, wait_policy=None)
        return dataclasses.replace(parsed, lock=lock, parameters=(1,))

    monkeypatch.setattr(dequeue, "analyse", wrong)
    verdict = compare(CLAIM)
    assert verdict is not None and len(verdict.misread) == 2, verdict


def test_a_function_body_split_otherwise_is_seen() -> None:
    fn = (
        "CREATE FUNCTION claim(q text) RETURNS bigint LANGUAGE plpgsql AS $$ DECLARE r bigint; "
        "BEGIN SELECT id INTO r FROM jobs WHERE queue = q FOR UPDATE SKIP LOCKED; "
        "EXECUTE format('SELECT id FROM %I FOR UPDATE', q); RETURN r; END $$"
    )
    sites = function_lock_sites(fn)
    assert sites is not None
    theirs, ours = sites
    assert theirs == ours == {"SELECT id FROM jobs WHERE queue = q FOR UPDATE SKIP LOCKED"}
