"""Dequeue statements and the queues they claim from, on hand-built snapshots (no server): their
names, their evidence, and the streams the statement checks judge, with a skip for each
statement or queue that cannot be judged."""

from __future__ import annotations

import dataclasses

from qadvisor.api.statement_checks import (
    Dequeue,
    Locking,
    dequeue_statements,
    dequeues,
    locking_statements,
    lockings,
    over_bindings,
)
from qadvisor.derive.statement_ids import statement_id
from qadvisor.derive.statement_queues import (
    claims_on,
    claims_reading,
    job_table,
    queues_named,
    statement_evidence,
    statement_label,
    statement_queue,
    statement_start,
    statement_target,
    unplanned_claims,
    unplanned_note,
)
from qadvisor.model import (
    Binding,
    Finding,
    PlanNode,
    Queue,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Target,
)
from qadvisor.sql.dequeue import analyse
from tests import snapshots as S

CLAIM = "SELECT id FROM jobs WHERE status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED"
UNKNOWN = (
    "public.jobs: no dequeue statement of this queue is known (in pg_stat_statements, "
    "--query or --query-file)"
)


def _claim(source: str = "--query 1", sql: str = CLAIM, **kw: object) -> Statement:
    return Statement(source, sql, analyse(sql), **kw)  # type: ignore[arg-type]


def _with(*statements: Statement, snap: Snapshot | None = None) -> Snapshot:
    return dataclasses.replace(snap or S.snapshot(S.jobs_table()), statements=statements)


def _app_jobs() -> Snapshot:
    """Two queues named jobs: app.jobs and public.jobs."""
    return S.snapshot(dataclasses.replace(S.jobs_table(), schema="app"), S.jobs_table())


# --- names ------------------------------------------------------------------------------------


def test_a_statement_is_named_by_its_queue_table_and_fingerprint() -> None:
    pgss = Statement("pg_stat_statements", "x", queryid=-42, fingerprint="3f9a2c1b0d")
    assert statement_id(dataclasses.replace(pgss, queue="app.jobs")) == "jobs@3f9a2c1b0d"
    # Not resolved to a queue: the table the statement names; not even parsed: "statement".
    assert statement_id(_claim(fingerprint="3f9a2c1b0d")) == "jobs@3f9a2c1b0d"
    assert statement_id(pgss) == "statement@3f9a2c1b0d"
    # An old snapshot without fingerprints: the queryid, else where it was seen.
    assert statement_id(dataclasses.replace(pgss, fingerprint="")) == "pgss:-42"
    assert statement_id(Statement("sql/claim.sql:12", "x")) == "sql/claim.sql:12"


def test_a_statement_is_labelled_where_a_person_finds_it_again() -> None:
    pgss = Statement("pg_stat_statements", "x", queryid=7, fingerprint="3f9a2c1b0d")
    counted = dataclasses.replace(pgss, calls=12_345, mean_exec_ms=0.42)
    assert statement_label(counted) == "pg_stat_statements 3f9a2c1b0d (12,345 calls, 0.42 ms mean)"
    assert statement_label(dataclasses.replace(pgss, fingerprint="")) == "pg_stat_statements 7"
    assert statement_label(dataclasses.replace(pgss, calls=3)) == (
        "pg_stat_statements 3f9a2c1b0d (3 calls)"
    )
    body = Statement("app.claim_job()", "x", function="app.claim_job", calls=1_000)
    assert statement_label(body) == "app.claim_job() (1,000 calls)"
    assert statement_label(dataclasses.replace(body, calls=None)) == "app.claim_job()"
    assert statement_label(Statement("sql/claim.sql:12", "x", calls=5)) == "sql/claim.sql:12"


def test_the_start_of_a_statement_is_one_line_cut_at_the_width() -> None:
    text = "SELECT id\n  FROM jobs\n WHERE status = 'pending'"
    assert statement_start(Statement("s", text)) == "SELECT id FROM jobs WHERE status = 'pending'"
    cut = statement_start(Statement("s", text), width=20)
    assert cut == "SELECT id FROM jo..." and len(cut) == 20
    # A cut that falls after a space does not leave it before the dots.
    assert statement_start(Statement("s", "SELECT id FROM jobs x"), width=13) == "SELECT id..."


def test_the_evidence_of_a_statement_is_its_label_text_and_search_path() -> None:
    stmt = _claim("sql/claim.sql:3")
    assert statement_evidence(stmt) == {"statement": "sql/claim.sql:3", "statement_text": CLAIM}
    planned = dataclasses.replace(stmt, search_path='"$user", public')
    assert statement_evidence(planned)["planned_with_search_path"] == '"$user", public'


# --- the queue of a statement -----------------------------------------------------------------


def test_an_unqualified_name_means_a_queue_of_that_name_in_any_schema_public_first() -> None:
    app = Queue("app", "jobs", None, "test")
    public = Queue("public", "jobs", None, "test")
    mail = Queue("public", "mail", None, "test")
    unqualified = analyse(CLAIM)
    qualified = analyse(CLAIM.replace("FROM jobs", "FROM app.jobs"))
    assert unqualified is not None and qualified is not None
    assert queues_named(unqualified, [app, mail, public]) == [public, app]
    assert queues_named(qualified, [app, mail, public]) == [app]
    assert queues_named(unqualified, [mail]) == []


def test_the_queue_of_a_statement_is_the_resolved_one_else_the_one_its_name_means() -> None:
    snap = _app_jobs()
    app, public = snap.queues
    resolved = _claim(queue="app.jobs")
    assert statement_queue(snap, resolved) == (app, snap.tables[0])
    assert statement_queue(snap, _claim()) == (public, snap.tables[1])
    # Resolved to a table that is no discovered queue, or whose facts are missing: none.
    assert statement_queue(snap, _claim(queue="app.other")) is None
    without_facts = dataclasses.replace(snap, tables=snap.tables[1:])
    assert statement_queue(without_facts, resolved) is None
    # An unresolved name falls back to the queue that has facts.
    assert statement_queue(without_facts, _claim()) == (public, snap.tables[1])
    assert statement_queue(snap, Statement("--query 1", "SELECT 1")) is None


def test_the_table_a_statement_claims_from_is_its_queue_else_a_queue_it_reads() -> None:
    snap = S.snapshot(S.jobs_table())
    assert job_table(snap, _claim()) == ("public", "jobs")
    # The lock is on tenants (no queue); the statement reads jobs, which is one.
    via = (
        "SELECT t.id FROM tenants t WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.tenant_id = t.id)"
        " LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    assert job_table(snap, _claim(sql=via)) == ("public", "jobs")
    # Neither is a queue: the table it locks, as written.
    other = "SELECT id FROM app.mail WHERE sent_at IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED"
    assert job_table(snap, _claim(sql=other)) == ("app", "mail")
    assert job_table(snap, Statement("--query 1", "SELECT 1")) is None
    target = statement_target(snap, _claim(sql=via, fingerprint="0a1b2c3d4e"))
    assert target == Target("statement", "public", "jobs", "tenants@0a1b2c3d4e")
    unparsed = statement_target(snap, Statement("--query 2", "SELECT 1"))
    assert unparsed == Target("statement", None, None, "--query 2")


# --- the streams the statement checks judge ---------------------------------------------------


def test_each_dequeue_on_a_queue_is_judged_with_its_parsed_statement_and_table() -> None:
    snap = _with(_claim())
    (d,) = dequeues(snap)
    assert isinstance(d, Dequeue)
    assert d.statement is snap.statements[0] and d.parsed is d.statement.parsed
    assert (d.queue, d.table) == (snap.queues[0], snap.tables[0])
    assert list(dequeue_statements(snap)) == [(d.statement, d.queue, d.table)]


def test_what_the_plan_checks_cannot_judge_is_a_skip_each() -> None:
    broken = Statement("--query 1", "SELECT 1", plan_error="takes no row lock")
    unnamed = Statement("--query 4", "SELECT", plan_error="syntax error")  # never parsed
    elsewhere = _claim("--query 2", CLAIM.replace("jobs", "mail"))
    nowhere = _claim("--query 3", CLAIM.replace("jobs", "mail"), plan_error="no such table")
    half = _claim("--query 5", plan_error="EXPLAIN ANALYZE timed out")
    snap = _with(broken, unnamed, elsewhere, nowhere, half)
    items = list(dequeues(snap))
    assert items[:5] == [
        Skip("--query 1: takes no row lock"),
        Skip("--query 4: syntax error"),
        Skip("--query 2: mail is not a discovered queue table (name it with --table)"),
        Skip("--query 3: no such table"),
        # A plan that failed in part is a skip of its queue, and the statement is still judged.
        Skip("--query 5: EXPLAIN ANALYZE timed out", "public.jobs"),
    ]
    (judged,) = items[5:]
    assert isinstance(judged, Dequeue) and judged.statement is half
    # A statement resolved to a table that is not a queue is named by that table.
    resolved = _claim("--query 6", CLAIM.replace("jobs", "mail"), queue="app.mail")
    assert next(dequeues(_with(resolved, half))) == Skip(
        "--query 6: app.mail is not a discovered queue table (name it with --table)"
    )


def test_a_queue_no_statement_claims_from_is_not_judged() -> None:
    snap = _app_jobs()
    items = list(dequeues(_with(_claim(queue="app.jobs"), snap=snap)))
    assert [type(i) for i in items] == [Dequeue, Skip]
    assert items[1] == Skip(UNKNOWN, "public.jobs")
    locked = list(lockings(_with(_claim(queue="app.jobs"), snap=snap)))
    assert locked[1:] == [Skip(UNKNOWN, "public.jobs")]


def test_without_any_statement_one_skip_says_why() -> None:
    snap = S.snapshot(S.jobs_table())
    asked = Skip(
        "no dequeue statement of the queue tables in pg_stat_statements: give the "
        "application's with --query or --query-file"
    )
    assert list(dequeues(snap)) == [asked] == list(lockings(snap))
    missing = dataclasses.replace(
        snap, unavailable={"pg_stat_statements": "pg_stat_statements is not installed"}
    )
    assert list(dequeues(missing)) == [Skip("pg_stat_statements is not installed")]
    # With statements given, the missing extension is no reason: they are judged.
    given = _with(_claim(), snap=missing)
    assert [type(i) for i in dequeues(given)] == [Dequeue]
    # No queue and no statement: nothing to judge, nothing to skip.
    assert list(dequeues(dataclasses.replace(snap, queues=(), tables=()))) == []


def test_the_lock_checks_judge_a_statement_whatever_its_plan() -> None:
    # PostgreSQL refuses a lock next to a window function: no plan, still a lock to judge.
    window = (
        "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id) AS n FROM jobs) "
        "j FOR UPDATE"
    )
    refused = _claim("--query 1", window, plan_error="FOR UPDATE is not allowed")
    other = _claim("--query 2", CLAIM.replace("jobs", "mail"))
    unparsed = Statement("--query 3", "SELECT 1", plan_error="takes no row lock")
    snap = _with(refused, other, unparsed)
    items = list(lockings(snap))
    assert items == [
        Locking(refused, refused.parsed, ("public", "jobs")),  # type: ignore[arg-type]
        # Not a queue table, but the lock checks judge the shape of any claim.
        Locking(other, other.parsed, (None, "mail")),  # type: ignore[arg-type]
        Skip("--query 3: takes no row lock"),
    ]
    assert list(locking_statements(snap)) == [
        (refused, ("public", "jobs")),
        (other, (None, "mail")),
        Skip("--query 3: takes no row lock"),
    ]
    # The plan checks skip the refused statement: it has no plan to judge.
    assert next(dequeues(snap)) == Skip("--query 1: FOR UPDATE is not allowed", "public.jobs")


# --- hidden values bound more than one way ---------------------------------------------------

HIDDEN = "SELECT id FROM jobs WHERE status = $1 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
SORTS = PlanNode("Sort", plan_rows=5000)
READS = PlanNode("Index Scan", plan_rows=1)


def _hidden(plan: PlanNode, *others: tuple[str, PlanNode]) -> Dequeue:
    stmt = Statement(
        "pg_stat_statements", HIDDEN, parsed=analyse(HIDDEN), custom_plan=plan,
        custom_values={"1": "'pending'"}, binding="status: 'pending' (the queue's live values)",
        other_bindings=tuple(Binding(b, {"1": "'held'"}, p) for b, p in others),
    )  # fmt: skip
    table = S.jobs_table()
    assert stmt.parsed is not None
    return Dequeue(stmt, stmt.parsed, Queue("public", "jobs", None, "test"), table)


def _sorts(d: Dequeue) -> Finding | None:
    plan = d.statement.custom_plan
    found = plan is not None and plan.node_type == "Sort"
    return Finding(Target("statement", "public", "jobs", "x"), "sorts.", {}) if found else None


def test_a_problem_every_binding_has_is_the_finding_naming_the_binding() -> None:
    f = over_bindings(_hidden(SORTS, ("status: 'held' (partial index i)", SORTS)), _sorts)
    assert isinstance(f, Finding) and f.severity is None  # the check's own severity
    assert f.evidence["binding"].startswith("status: 'pending'")
    assert "bindings_without_it" not in f.evidence


def test_a_problem_only_some_bindings_have_is_info_naming_both() -> None:
    for d in (
        _hidden(SORTS, ("status: 'held' (partial index i)", READS)),
        _hidden(READS, ("status: 'held' (partial index i)", SORTS)),
    ):
        f = over_bindings(d, _sorts)
        assert isinstance(f, Finding) and f.severity is Severity.INFO
        with_it = f.evidence["binding"]
        (without,) = f.evidence["bindings_without_it"]
        assert {with_it[:15], without[:15]} == {"status: 'pendin", "status: 'held' "}
        assert with_it in f.message and without in f.message


def test_no_binding_with_a_problem_and_no_hypothesis_change_nothing() -> None:
    assert (
        over_bindings(_hidden(READS, ("status: 'held' (partial index i)", READS)), _sorts) is None
    )
    plain = _hidden(SORTS)
    plain = dataclasses.replace(plain, statement=dataclasses.replace(plain.statement, binding=""))
    f = over_bindings(plain, _sorts)
    assert isinstance(f, Finding) and "binding" not in f.evidence


def test_a_tables_claims_those_reading_an_index_and_those_not_planned() -> None:
    scan = PlanNode("Index Scan", relation="jobs", schema="public", index="jobs_live")
    reader = _claim("--query 1", generic_plan=scan)
    unplanned = _claim("--query 2", CLAIM.replace("LIMIT 1", "LIMIT 5"), plan_error="no GRANT")
    elsewhere = _claim("--query 3", CLAIM.replace("jobs", "mail"))
    table = S.jobs_table()
    snap = dataclasses.replace(S.snapshot(table), statements=(reader, unplanned, elsewhere))
    assert claims_on(snap, table) == [reader, unplanned]
    assert claims_reading(snap, table, "jobs_live") == [reader]
    assert claims_reading(snap, table, "jobs_pkey") == []
    assert unplanned_claims(snap, table) == [unplanned]
    assert unplanned_note([unplanned]) == (
        "1 claim(s) on the table could not be planned (--query 2: no GRANT)"
    )
