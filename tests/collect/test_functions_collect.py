"""Claims inside functions on real servers: read from pg_proc, extracted, and planned.

The functions below are written the ways queue libraries write them (a fetch function like
procrastinate's: a CTE that picks the job with ``FOR UPDATE OF ... SKIP LOCKED`` and an UPDATE
that claims it into a row variable; ``SELECT ... FOR UPDATE INTO STRICT`` on a known job; a
FOR loop over a batch; an SQL-language function; a ``%ROWTYPE`` record; a key lock without
SKIP LOCKED; dynamic SQL). Every extracted claim is PREPAREd with its placeholder types and
EXPLAINed, in a rolled-back read-only transaction of qadvisor's own session.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import psycopg
import pytest

from qadvisor.collect import functions
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.functions import function_claims, scan_functions
from qadvisor.collect.recorded import read_recorded
from qadvisor.sql.function_claims import DYNAMIC_SQL, FunctionClaim
from qadvisor.sql.recorded_statements import match_nested
from tests.collect.test_statements_collect import take_snapshot
from tests.conftest import TestDB

SCHEMA = r"""
CREATE SCHEMA app;
SET search_path = app;
CREATE TYPE app.job_state AS ENUM ('todo', 'doing', 'succeeded', 'failed');
CREATE TABLE app.app_jobs (
    id           bigserial PRIMARY KEY,
    queue_name   character varying(128) NOT NULL,
    priority     integer NOT NULL DEFAULT 0,
    lock         text,
    state        app.job_state NOT NULL DEFAULT 'todo',
    scheduled_at timestamptz,
    attempts     integer NOT NULL DEFAULT 0,
    worker_id    bigint
);
CREATE INDEX app_jobs_todo ON app.app_jobs (priority DESC, id) WHERE state = 'todo';
INSERT INTO app.app_jobs (queue_name, priority, lock, state)
SELECT CASE WHEN g % 3 = 0 THEN 'mail' ELSE 'default' END, g % 5,
       CASE WHEN g % 7 = 0 THEN 'k' || (g % 11) END,
       CASE g % 10 WHEN 0 THEN 'todo' WHEN 1 THEN 'failed' ELSE 'succeeded' END::app.job_state
  FROM generate_series(1, 5000) AS g;
ANALYZE app.app_jobs;

-- Picks the best job whose lock is free (the shape procrastinate's fetch function has).
CREATE FUNCTION app.app_fetch_job(target_queue_names character varying[], p_worker_id bigint)
RETURNS app.app_jobs LANGUAGE plpgsql AS $fetch$
DECLARE
    claimed app_jobs;
BEGIN
    WITH candidate AS (
        SELECT jobs.*
          FROM app_jobs AS jobs
         WHERE NOT EXISTS (
                 SELECT 1 FROM app_jobs AS running
                  WHERE jobs.lock IS NOT NULL
                    AND running.lock = jobs.lock
                    AND running.state = 'doing')
           AND jobs.state = 'todo'
           AND (target_queue_names IS NULL OR jobs.queue_name = ANY(target_queue_names))
           AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
         ORDER BY jobs.priority DESC, jobs.id
         LIMIT 1
           FOR UPDATE OF jobs SKIP LOCKED
    )
    UPDATE app_jobs
       SET state = 'doing', worker_id = p_worker_id
      FROM candidate
     WHERE app_jobs.id = candidate.id
    RETURNING app_jobs.* INTO claimed;
    RETURN claimed;
END;
$fetch$;

-- Locks one known job by its key, then moves it: no SKIP LOCKED is right here.
CREATE FUNCTION app.app_retry_job(job_id bigint, retry_at timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    current_state app.job_state;
    retried bigint;
BEGIN
    SELECT state FROM app_jobs WHERE id = job_id AND state IN ('doing', 'failed')
       FOR UPDATE INTO STRICT current_state;
    UPDATE app_jobs SET state = 'todo', attempts = attempts + 1, scheduled_at = retry_at
     WHERE id = job_id
    RETURNING id INTO retried;
    RETURN retried;
END;
$$;

CREATE FUNCTION app.app_claim_batch(batch integer) RETURNS SETOF bigint
LANGUAGE plpgsql AS $body$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT id, queue_name FROM app_jobs
              WHERE state = 'todo' ORDER BY priority DESC, id
              LIMIT batch FOR UPDATE SKIP LOCKED
    LOOP
        -- A $$ string inside this body, and a comment with FOR UPDATE; in it.
        PERFORM 1 FROM app_jobs
          WHERE queue_name = r.queue_name AND id < r.id AND lock = $$x;$$ FOR NO KEY UPDATE;
        UPDATE app_jobs SET state = 'doing' WHERE id = r.id;
        RETURN NEXT r.id;
    END LOOP;
END;
$body$;

CREATE FUNCTION app.app_claim_sql(q text, n integer) RETURNS SETOF app.app_jobs
LANGUAGE sql AS $$
    UPDATE app_jobs SET state = 'doing'
     WHERE id IN (SELECT id FROM app_jobs
                   WHERE state = 'todo' AND queue_name = q
                   ORDER BY priority DESC, id LIMIT n
                     FOR UPDATE SKIP LOCKED)
    RETURNING *;
$$;

CREATE FUNCTION app.app_claim_row(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    job app_jobs%ROWTYPE;
BEGIN
    SELECT * INTO job FROM app_jobs
     WHERE state = 'todo' AND queue_name = q
     ORDER BY priority DESC, id LIMIT 1
       FOR UPDATE SKIP LOCKED;
    PERFORM 1 FROM app_jobs WHERE lock = job.lock AND id <> job.id FOR UPDATE SKIP LOCKED;
    UPDATE app_jobs SET state = 'doing' WHERE id = job.id;
    RETURN job.id;
END;
$$;

CREATE FUNCTION app.app_lock_job(p_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM app_jobs WHERE id = p_id FOR UPDATE;
END;
$$;

CREATE FUNCTION app.app_claim_dynamic(tbl text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    claimed bigint;
BEGIN
    EXECUTE format('SELECT id FROM %I WHERE state = $1 LIMIT 1 FOR UPDATE SKIP LOCKED', tbl)
       INTO claimed USING 'todo';
    RETURN claimed;
END;
$$;

-- RETURNS TABLE (id ...) makes id a variable: PL/pgSQL refuses a bare id as ambiguous,
-- unless the body says which one it means.
CREATE FUNCTION app.app_claim_ambiguous() RETURNS TABLE (id bigint) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY SELECT id FROM app_jobs WHERE state = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED;
END;
$$;
CREATE FUNCTION app.app_claim_column() RETURNS TABLE (id bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT id FROM app_jobs WHERE state = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED;
END;
$$;

CREATE FUNCTION app.app_claim_atomic(min_priority integer) RETURNS SETOF bigint
LANGUAGE sql
BEGIN ATOMIC
    UPDATE app.app_jobs SET state = 'doing'
     WHERE id IN (SELECT id FROM app.app_jobs WHERE state = 'todo' AND priority >= min_priority
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id;
END;

-- Not a candidate: no SKIP LOCKED, never called.
CREATE FUNCTION app.app_count() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM app_jobs
$$;
"""

# The statements the application runs (top level): the calls.
CALLS: list[tuple[str, tuple[Any, ...]]] = [
    ("SELECT id, state FROM app_fetch_job(%s, %s)", (["default"], 7)),
    ("SELECT app.app_retry_job(%s, now())", (1,)),  # job 1 failed
    ("SELECT * FROM app_claim_batch(%s)", (2,)),
    ("SELECT id FROM app_claim_sql(%s, %s)", ("mail", 1)),
    ("SELECT app_claim_row(%s)", ("default",)),
    ("SELECT app_lock_job(%s)", (1,)),
    ("SELECT app_claim_atomic(%s)", (3,)),
]

# (function, line, context, skip) of every claim, as a reader of the bodies above sees them.
EXPECTED = [
    ("app.app_claim_ambiguous", 3, "RETURN QUERY", "both a variable"),
    ("app.app_claim_atomic", 2, "SQL statement", None),
    ("app.app_claim_batch", 5, "FOR loop", None),
    ("app.app_claim_batch", 10, "PERFORM", None),
    ("app.app_claim_column", 4, "RETURN QUERY", None),
    ("app.app_claim_dynamic", 5, "EXECUTE", DYNAMIC_SQL),
    ("app.app_claim_row", 5, "SQL statement", None),
    ("app.app_claim_row", 9, "PERFORM", None),
    ("app.app_claim_sql", 2, "SQL statement", None),
    ("app.app_fetch_job", 5, "SQL statement", None),
    ("app.app_lock_job", 3, "PERFORM", None),
    ("app.app_retry_job", 6, "SQL statement", None),
]


def build(db: TestDB) -> None:
    db.execute(SCHEMA)
    db.execute("CREATE EXTENSION pg_stat_statements")


def run_calls(db: TestDB, track: str) -> None:
    with db.connect() as conn:
        # Only this database's entries: the schema's DDL out, other tests' databases alone.
        conn.execute(
            "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database"
            " WHERE datname = current_database()"
        )
        conn.execute("SET search_path = app")
        conn.execute(f"SET pg_stat_statements.track = '{track}'")
        for query, params in CALLS:
            with conn.transaction(force_rollback=True):
                conn.execute(query, params)


def pgss_rows(db: TestDB) -> list[dict[str, Any]]:
    with psycopg.connect(db.dsn, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(
            "SELECT query, toplevel, calls FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()


def summary(claims: list[FunctionClaim]) -> list[tuple[str, int, str, str | None]]:
    out = []
    for c in sorted(claims, key=lambda c: (c.function, c.line)):
        skip = c.skip
        if skip is not None and "both a variable" in skip:
            skip = "both a variable"
        out.append((c.function, c.line, c.context, skip))
    return out


PREPARED = "qadvisor_test_claim"


def plan(conn: psycopg.Connection[Any], text: str, types: tuple[str, ...]) -> Any:
    """The generic plan of ``text`` PREPAREd with ``types``, in a rolled-back transaction,
    with names resolved as the application's session resolves them (search_path app)."""
    head = f"PREPARE {PREPARED}({', '.join(types)}) AS " if types else f"PREPARE {PREPARED} AS "
    nulls = f"({', '.join('NULL' for _ in types)})" if types else ""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL search_path = app")
            conn.execute((head + text).encode())
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            row = conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE {PREPARED}{nulls}").fetchone()
            assert row is not None
            return row[0]
    finally:
        conn.execute("DEALLOCATE ALL")


def relations(plan_json: Any) -> set[str]:
    return set(_relations(plan_json[0]["Plan"]))


def _relations(node: dict[str, Any]) -> list[str]:
    found = [node["Relation Name"]] if "Relation Name" in node else []
    for child in node.get("Plans", []):
        found += _relations(child)
    return found


def test_claims_in_functions_are_found_and_every_one_plans(db: TestDB) -> None:
    build(db)
    run_calls(db, "top")
    rows = pgss_rows(db)
    # With track = top the application's statements are only the calls.
    assert all(r["toplevel"] for r in rows)
    assert not any("FOR UPDATE" in r["query"] for r in rows)
    with connect(db.dsn, SessionLimits()) as conn:
        scan = scan_functions(conn, rows)
        assert not scan.truncated and scan.error is None
        assert "app.app_count()" not in scan.functions
        assert summary(list(scan.claims)) == EXPECTED
        assert not any("qadvisor could not read" in (c.skip or "") for c in scan.claims)
        planned = [c for c in scan.claims if c.skip is None]
        for claim in planned:
            assert "app_jobs" in relations(plan(conn, claim.text, claim.param_types)), claim
        # qadvisor's session is still read-only and nothing it prepared is left.
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)

    fetch = next(c for c in scan.claims if c.function == "app.app_fetch_job")
    assert fetch.signature == "app.app_fetch_job(character varying[], bigint)"
    assert fetch.params == ("target_queue_names", "p_worker_id")
    assert fetch.param_types == ("character varying[]", "bigint")
    assert "jobs.queue_name = ANY($1)" in fetch.text and "worker_id = $2" in fetch.text
    retry = next(c for c in scan.claims if c.function == "app.app_retry_job")
    assert retry.params == ("job_id",) and "FOR UPDATE" in retry.text
    batch = [c for c in scan.claims if c.function == "app.app_claim_batch"]
    assert batch[1].params == ("r.queue_name", "r.id")
    assert batch[1].param_types == ("character varying(128)", "bigint")
    row = [c for c in scan.claims if c.function == "app.app_claim_row"]
    assert row[1].params == ("job.lock", "job.id") and row[1].param_types == ("text", "bigint")


def test_the_refused_name_conflict_is_what_plpgsql_itself_says(db: TestDB) -> None:
    build(db)
    with db.connect() as conn, pytest.raises(psycopg.errors.AmbiguousColumn) as raised:
        conn.execute("SET search_path = app")
        conn.execute("SELECT * FROM app_claim_ambiguous()")
    assert 'column reference "id" is ambiguous' in str(raised.value)
    with db.connect() as conn:
        conn.execute("SET search_path = app")
        conn.execute("SELECT * FROM app_claim_column()")  # use_column: runs


def test_claim_lines_are_the_lines_plpgsql_reports(db: TestDB) -> None:
    build(db)
    with connect(db.dsn, SessionLimits()) as conn:
        calls = [{"query": "SELECT app.app_retry_job($1, now())"}]
        (retry,) = [c for c in function_claims(conn, calls) if c.function == "app.app_retry_job"]
    with db.connect() as conn, pytest.raises(psycopg.errors.NoDataFound) as raised:
        conn.execute("SET search_path = app")
        conn.execute("SELECT app_retry_job(0, now())")  # no such job: INTO STRICT fails
    context = raised.value.diag.context or ""
    assert f"line {retry.line} at SQL statement" in context, context


def test_a_function_without_skip_locked_is_read_when_a_statement_calls_it(db: TestDB) -> None:
    build(db)
    with connect(db.dsn, SessionLimits()) as conn:
        uncalled = {c.function for c in function_claims(conn, [])}
        called = {
            c.function for c in function_claims(conn, [{"query": "SELECT app.app_lock_job($1)"}])
        }
        other_schema = {
            c.function for c in function_claims(conn, [{"query": "SELECT public.app_lock_job($1)"}])
        }
    assert "app.app_lock_job" not in uncalled and "app.app_retry_job" not in uncalled
    assert "app.app_fetch_job" in uncalled  # its body holds SKIP LOCKED
    assert called == uncalled | {"app.app_lock_job"}
    assert other_schema == uncalled


def test_an_unqualified_call_is_the_public_function_when_there_is_one(db: TestDB) -> None:
    build(db)
    unqualified = [{"query": "SELECT app_lock_job($1)"}]
    with connect(db.dsn, SessionLimits()) as conn:
        before = {c.function for c in function_claims(conn, unqualified)}
        db.execute(
            """
            CREATE TABLE public.app_jobs (id bigint PRIMARY KEY);
            CREATE FUNCTION public.app_lock_job(p_id bigint) RETURNS void LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM 1 FROM public.app_jobs WHERE id = p_id FOR UPDATE;
            END;
            $$;
            """
        )
        after = {c.function for c in function_claims(conn, unqualified)}
        qualified = {
            c.function for c in function_claims(conn, [{"query": "SELECT app.app_lock_job(1)"}])
        }
    assert "app.app_lock_job" in before  # no public one: any schema's
    assert "public.app_lock_job" in after and "app.app_lock_job" not in after
    assert "app.app_lock_job" in qualified and "public.app_lock_job" not in qualified


def test_nested_statements_recorded_with_track_all_plan_as_their_claim(db: TestDB) -> None:
    build(db)
    run_calls(db, "all")
    nested = [r for r in pgss_rows(db) if not r["toplevel"] and "FOR UPDATE OF jobs" in r["query"]]
    assert len(nested) == 1
    recorded = nested[0]["query"]
    assert "ANY(target_queue_names)" in recorded and "$" in recorded
    with connect(db.dsn, SessionLimits()) as conn:
        # As recorded, the text names the function's variables: it cannot be planned.
        with pytest.raises(psycopg.errors.UndefinedColumn) as failed:
            conn.execute("SET search_path = app")
            plan(conn, recorded, ())
        assert 'column "target_queue_names" does not exist' in str(failed.value)
        claims = function_claims(conn, pgss_rows(db))
        claim = match_nested(recorded, claims)
        assert claim is not None and claim.function == "app.app_fetch_job"
        assert "app_jobs" in relations(plan(conn, claim.text, claim.param_types))
        # Each nested row-locking statement of the functions called finds its claim.
        locking = [
            r["query"]
            for r in pgss_rows(db)
            if not r["toplevel"] and ("FOR UPDATE" in r["query"] or "FOR NO KEY" in r["query"])
        ]
        matched = {(m.function, m.line) for q in locking if (m := match_nested(q, claims))}
    assert matched == {
        ("app.app_fetch_job", 5),
        ("app.app_retry_job", 6),
        ("app.app_claim_batch", 5),
        ("app.app_claim_batch", 10),
        ("app.app_claim_sql", 2),
        ("app.app_claim_row", 5),
        ("app.app_claim_row", 9),
        ("app.app_lock_job", 3),
    }
    assert len(locking) == len(matched)  # BEGIN ATOMIC bodies are not recorded as nested


def test_pg_stat_statements_rows_say_whether_a_statement_ran_nested(db: TestDB) -> None:
    build(db)
    db.execute("CREATE TABLE app.app_events (job_id bigint NOT NULL REFERENCES app.app_jobs (id))")
    run_calls(db, "all")
    with db.connect() as conn:
        conn.execute("SET pg_stat_statements.track = 'all'")
        with conn.transaction(force_rollback=True):
            conn.execute("INSERT INTO app.app_events (job_id) VALUES (1)")  # an RI check
            conn.execute(
                "SELECT id FROM app.app_jobs WHERE state = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED"
            )
    with connect(db.dsn, SessionLimits()) as conn:
        rows = read_recorded(conn).value.row_locking()
    by_text = {r["query"]: r["toplevel"] for r in rows}
    fk_check = [t for t in by_text if "FOR KEY SHARE OF" in t]
    assert len(fk_check) == 1 and by_text[fk_check[0]] is False
    assert by_text["SELECT id FROM app.app_jobs WHERE state = $1 LIMIT $2 FOR UPDATE SKIP LOCKED"]
    nested_fetch = [t for t in by_text if "FOR UPDATE OF jobs SKIP LOCKED" in t]
    assert len(nested_fetch) == 1 and by_text[nested_fetch[0]] is False


def test_a_monitoring_role_reads_the_same_claims(db: TestDB) -> None:
    build(db)
    db.execute(
        """
        DROP ROLE IF EXISTS qa_fn_monitor;
        CREATE ROLE qa_fn_monitor LOGIN IN ROLE pg_monitor;
        """
    )
    calls = [{"query": q} for q, _ in CALLS]
    try:
        with connect(db.dsn, SessionLimits()) as conn:
            as_owner = scan_functions(conn, calls)
        with connect(db.server.dsn(db.name, user="qa_fn_monitor"), SessionLimits()) as conn:
            # No USAGE on schema app, no SELECT on its tables: the catalogs still tell.
            assert conn.execute("SELECT has_schema_privilege('app', 'USAGE')").fetchone() == (
                False,
            )
            as_monitor = scan_functions(conn, calls)
    finally:
        db.execute("DROP OWNED BY qa_fn_monitor; DROP ROLE qa_fn_monitor")
    assert as_monitor.error is None
    assert as_monitor == as_owner
    assert summary(list(as_monitor.claims)) == EXPECTED


def test_the_number_of_functions_read_is_bounded(
    db: TestDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(db)
    monkeypatch.setattr(functions, "MAX_FUNCTIONS", 2)
    calls = [{"query": "SELECT app_count()"}, {"query": "SELECT app_lock_job($1)"}]
    with connect(db.dsn, SessionLimits()) as conn:
        scan = scan_functions(conn, calls)
        uncalled = scan_functions(conn, [])
    assert scan.truncated and len(scan.functions) == 2
    # The called one first; a called function whose body locks nothing takes no place.
    assert scan.functions == ("app.app_lock_job(bigint)", "app.app_claim_ambiguous()")
    why = {"functions": "only the first 2 candidate functions were read for claims"}
    assert scan.unavailable == uncalled.unavailable == why


# Every PL/pgSQL statement form in one body that PostgreSQL compiles (CREATE FUNCTION checks
# the syntax); the claims in it sit in the places a reader must not lose track of.
EVERY_FORM = r"""
SET search_path = app;
CREATE FUNCTION app.app_every_form(p_queue text, VARIADIC p_ids bigint[] DEFAULT '{}')
RETURNS SETOF bigint LANGUAGE plpgsql AS $every$
#variable_conflict error
#print_strict_params on
<<fn_block>>
DECLARE
    k CONSTANT integer := 3;
    n integer NOT NULL DEFAULT 0;
    label_text text COLLATE "C" := 'a;b';
    ids bigint[] := ARRAY[1, 2];
    r record;
    row_var app_jobs%ROWTYPE;
    same_id app_jobs.id%TYPE;
    c_todo NO SCROLL CURSOR (wanted text) FOR
        SELECT id FROM app_jobs WHERE queue_name = wanted AND state = 'todo'
         FOR UPDATE SKIP LOCKED;
    c_any refcursor;
    first_arg ALIAS FOR $1;
    msg text;
BEGIN
    ASSERT k = 3, 'k is ' || k;
    n = n + 1;
    ids[1] := 5;
    IF n > 0 THEN
        NULL;
    ELSEIF n < 0 THEN
        RAISE NOTICE 'negative %', n USING HINT = 'check';
    ELSE
        RAISE EXCEPTION USING MESSAGE = 'none';
    END IF;
    CASE n WHEN 1, 2 THEN n := n + 1; ELSE NULL; END CASE;
    CASE WHEN n > (CASE WHEN k > 1 THEN 1 ELSE 0 END) THEN NULL; END CASE;
    <<outer_loop>>
    WHILE n < 10 LOOP
        n := n + 1;
        CONTINUE outer_loop WHEN n % 2 = 0;
        EXIT outer_loop WHEN n > 8;
    END LOOP outer_loop;
    FOR i IN REVERSE 10 .. 1 BY 3 LOOP n := n + i; END LOOP;
    FOREACH same_id IN ARRAY ids LOOP n := n + 1; END LOOP;
    FOREACH same_id SLICE 0 IN ARRAY p_ids LOOP n := n + 1; END LOOP;
    FOR r IN c_todo(first_arg) LOOP
        RETURN NEXT r.id;
    END LOOP;
    OPEN c_any SCROLL FOR SELECT id FROM app_jobs WHERE queue_name = p_queue
        FOR NO KEY UPDATE SKIP LOCKED;
    FETCH NEXT FROM c_any INTO same_id;
    MOVE BACKWARD 1 FROM c_any;
    CLOSE c_any;
    SELECT * INTO STRICT row_var FROM app_jobs WHERE id = same_id FOR SHARE;
    GET DIAGNOSTICS n = ROW_COUNT;
    BEGIN
        PERFORM pg_sleep(0);
        UPDATE app_jobs SET attempts = attempts + k WHERE id = row_var.id;
    EXCEPTION
        WHEN lock_not_available OR serialization_failure THEN
            GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
            RAISE WARNING '%: %', SQLSTATE, msg;
        WHEN OTHERS THEN
            RAISE;
    END;
    RETURN QUERY EXECUTE 'SELECT id FROM app.app_jobs WHERE queue_name = $1' USING p_queue;
    RETURN QUERY SELECT id FROM app_jobs WHERE id = ANY(fn_block.ids) AND label_text <> ''
        FOR KEY SHARE;
    RETURN;
END fn_block;
$every$;
"""


def line_of(snippet: str) -> int:
    """The line of EVERY_FORM's body (the text between the $every$ quotes) holding snippet."""
    body = EVERY_FORM.split("$every$")[1]
    return next(n for n, line in enumerate(body.splitlines(), 1) if snippet in line)


def test_every_statement_form_postgresql_accepts_is_read(db: TestDB) -> None:
    build(db)
    db.execute(EVERY_FORM)
    with connect(db.dsn, SessionLimits()) as conn:
        claims = [
            c
            for c in function_claims(conn, [{"query": "SELECT * FROM app_every_form($1)"}])
            if c.function == "app.app_every_form"
        ]
        found = [(c.line, c.context, c.params, c.param_types, c.skip) for c in claims]
        assert found == [
            (line_of("SELECT id FROM app_jobs WHERE queue_name = wanted"), "cursor",
             ("wanted",), ("text",), None),  # a cursor argument is a variable of its query
            (line_of("OPEN c_any"), "OPEN ... FOR", ("p_queue",), ("text",), None),
            (line_of("SELECT * INTO STRICT row_var"), "SQL statement", ("same_id",),
             ("bigint",), None),
            (line_of("RETURN QUERY SELECT"), "RETURN QUERY", ("fn_block.ids", "label_text"),
             ("bigint[]", "text"), None),
        ]  # fmt: skip
        for claim in claims:
            if claim.skip is None:
                assert "app_jobs" in relations(plan(conn, claim.text, claim.param_types))


def test_claims_are_plain_data(db: TestDB) -> None:
    """A claim holds strings, numbers and tuples of strings only (no parse trees, no rows of
    the connection): it outlives the session that read it and goes through JSON unchanged."""
    build(db)
    with connect(db.dsn, SessionLimits()) as conn:
        claims = function_claims(conn, [])
    # No statement calls a function: the claims are those of the bodies holding SKIP LOCKED.
    skip_locked = [e for e in EXPECTED if e[0] not in ("app.app_lock_job", "app.app_retry_job")]
    assert summary(claims) == skip_locked
    for claim in claims:
        fields = dataclasses.asdict(claim)
        for name, value in fields.items():
            plain = value is None or isinstance(value, str | int)
            if isinstance(value, tuple):
                plain = all(isinstance(item, str) for item in value)
            assert plain, (claim.function, name, type(value))
        loaded = json.loads(json.dumps(fields))
        # JSON gives lists for tuples; the values are JSON's, whatever their field.
        restored: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in loaded.items()
        }
        again = FunctionClaim(**restored)
        assert again == claim
        assert hash(again) == hash(claim)
        with pytest.raises(dataclasses.FrozenInstanceError):
            claim.text = ""  # type: ignore[misc]


def test_a_call_that_quotes_the_function_name_is_counted(db: TestDB) -> None:
    # Drivers and ORMs quote identifiers: `SELECT * FROM "app"."app_claim_column"()` calls
    # the function as surely as the bare name does. With track = top the call is all that
    # pg_stat_statements has of the claim: its calls and the role that ran it.
    build(db)
    with db.connect() as conn:
        conn.execute(
            "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database"
            " WHERE datname = current_database()"
        )
        conn.execute("SET pg_stat_statements.track = 'top'")
        for query in ('SELECT * FROM "app"."app_claim_column"()', 'SELECT "app_claim_row" (%s)'):
            with conn.transaction(force_rollback=True):
                conn.execute("SET LOCAL search_path = app")
                conn.execute(query, ["default"] if "%s" in query else None)
    snap = take_snapshot(db)
    claims = {s.function: s for s in snap.statements if s.function}
    assert claims["app.app_claim_column()"].calls == 1
    assert claims["app.app_claim_row(text)"].calls == 1


def test_a_claims_nested_entry_is_the_claim_not_another_statement_on_the_queue(
    db: TestDB,
) -> None:
    # With track = all pg_stat_statements records each row-locking statement inside a
    # function too, naming the function's variables: that entry is the function's statement
    # (a claim planned with the variables typed, or left out with why), never one of the
    # other statements on the queue table, which cannot be planned.
    build(db)
    run_calls(db, "all")
    snap = take_snapshot(db)
    claims = [s for s in snap.statements if s.function and s.custom_plan is not None]
    assert {s.function for s in claims} >= {"app.app_fetch_job(character varying[], bigint)"}
    fetch = next(s for s in claims if s.function and s.function.startswith("app.app_fetch_job"))
    assert fetch.calls == 1  # its nested entry's
    # (Of the functions read: those holding SKIP LOCKED; one whose lock waits is read only
    # when a row-locking statement calls it.)
    locking = [s for s in snap.stakeholders if re.search(r"(?i)\bskip\s+locked\b", s.text)]
    assert not locking, [(s.text, s.plan_error) for s in locking]
