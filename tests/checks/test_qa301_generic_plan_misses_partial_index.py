"""QA301 generic-plan-misses-partial-index: unit tests on snapshots, then real servers.

On the servers: a claim with ``status = $1`` against the live-set partial index is critical
with ``force_generic_plan`` set on the database, quiet once rewritten with the printed literal,
a warning without the setting, and latent (info) from pg_stat_statements text alone. A healthy
literal claim on a matching partial index stays quiet for QA301, QA302 and QA303. A list bound
as parameters (``= ANY($1)``, ``IN ($1, $2)``) is found the same way, and its literal list is
proven by the server's generic plan.
"""

from __future__ import annotations

import dataclasses

import pytest

from qadvisor.api.provisional import (
    indexes_used,
    parse_explain,
)
from qadvisor.model import Finding, PlanNode, RoleSetting, Severity, Snapshot, Statement
from qadvisor.sql.dequeue import analyse, fingerprint
from tests import snapshots as S
from tests.collect.test_statements_collect import CLAIM, SELECT_CLAIM, build_claim_queue, run_claims
from tests.conftest import TestDB
from tests.helpers import (
    Pathology,
    Run,
    as_the_application,
    assert_quiet,
    check,
    record_afresh,
    rewrite_of,
)
from tests.shapes import Shape

PARTIAL = S.index(
    "jobs_pending_created_at", ("created_at",), 8 * 1024 * 1024,
    predicate="(status = 'pending'::text)",
)  # fmt: skip
CUSTOM = PlanNode(
    "Limit", total_cost=0.33, plan_rows=1,
    children=(PlanNode("LockRows", children=(
        PlanNode("Index Scan", relation="jobs", schema="public", index=PARTIAL.name,
                 total_cost=80.0, plan_rows=5000, filter="(jobs.status = 'pending'::text)"),
    )),),
)  # fmt: skip
GENERIC = PlanNode(
    "Limit", total_cost=270_000.0, plan_rows=1,
    children=(PlanNode("Sort", sort_key=("jobs.created_at",), children=(
        PlanNode("Seq Scan", relation="jobs", schema="public", total_cost=230_000.0,
                 plan_rows=5_000_000, filter="(jobs.status = $1)"),
    )),),
)  # fmt: skip
BOUND = "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"


def _snap(
    stmt: Statement, *roles: RoleSetting, session: str = "auto", table_pages: int | None = None
) -> Snapshot:
    table = S.jobs_table(indexes=(PARTIAL,))
    if table_pages is not None:
        table = dataclasses.replace(table, relpages=table_pages)
    snap = S.snapshot(table, settings={"plan_cache_mode": session})
    return dataclasses.replace(snap, statements=(stmt,), role_settings=roles)


def _stmt(text: str = BOUND, /, **kw: object) -> Statement:
    base: dict[str, object] = {
        "source": "--query 1",
        "text": text,
        "parsed": analyse(text),
        "custom_values": {"1": "'pending'"},
        "custom_plan": CUSTOM,
        "generic_plan": GENERIC,
    }
    base.update(kw)
    return Statement(**base)  # type: ignore[arg-type]


def _findings(snap: Snapshot, code: str = "QA301") -> list[Finding]:
    return [f for f in S.run(code, snap) if isinstance(f, Finding)]


def test_bound_status_is_a_warning_with_both_plans_and_the_literal_rewrite() -> None:
    (f,) = _findings(_snap(_stmt()))
    assert f.severity is Severity.WARNING and f.key == "QA301:public.--query 1"
    assert f.target.kind == "statement" and f.target.table == "jobs"
    ev = f.evidence
    assert ev["partial_index"] == "jobs_pending_created_at"
    assert ev["generic_plan_cost"] == 270_000.0 and ev["custom_plan_cost"] == 0.33
    assert ev["generic_plan_scan"].startswith("Seq Scan on public.jobs")
    assert ev["custom_plan_scan"].startswith("Index Scan using jobs_pending_created_at")
    assert ev["plan_cache_mode"] == "auto"
    assert f.fix is not None and f.fix.safety == "review"
    assert f.fix.statements == ()  # the rewrite is application code, not a migration
    rewritten = rewrite_of(f)
    # The value reached qadvisor only as $1: the rewrite names where the application's value
    # goes and writes none; the notes say which value the partial index covers.
    assert "status = <value of $1>" in rewritten and "'pending'" not in rewritten
    assert "status is 'pending'" in f.fix.notes and "ORM" in f.fix.notes


def test_forced_generic_plans_for_the_role_make_it_critical() -> None:
    row = RoleSetting(None, "worker", "plan_cache_mode", "force_generic_plan")
    (f,) = _findings(_snap(_stmt(role="worker"), row))
    assert f.severity is Severity.CRITICAL
    assert f.evidence["plan_cache_mode_source"] == (
        "ALTER ROLE worker SET plan_cache_mode = force_generic_plan"
    )
    # Another role's setting does not apply to this statement.
    (f,) = _findings(_snap(_stmt(role="reporting"), row))
    assert f.severity is Severity.WARNING
    # Set for the whole server.
    (f,) = _findings(_snap(_stmt(), session="force_generic_plan"))
    assert f.severity is Severity.CRITICAL and "server" in f.evidence["plan_cache_mode_source"]


def test_pg_stat_statements_text_is_latent_unless_the_server_confirms_it() -> None:
    pgss = {"source": "pg_stat_statements", "from_normalised_text": True, "queryid": 7,
            "calls": 10_000, "mean_exec_ms": 0.2, "shared_blks_per_call": 4.0}  # fmt: skip
    (f,) = _findings(_snap(_stmt(**pgss)))
    assert f.severity is Severity.INFO and "Latent" in f.message
    assert f.key == "QA301:public.pgss:7"
    # Runtime evidence: each call reads about the whole table.
    pages = S.jobs_table().relpages
    (f,) = _findings(_snap(_stmt(**{**pgss, "shared_blks_per_call": float(pages)})))
    assert f.severity is Severity.WARNING and "shared blocks per call" in f.evidence["confirmed_by"]
    # A cached plan (few plans per call) that costs what the generic one does is confirmation.
    cheap = {"generic_plan": dataclasses.replace(GENERIC, total_cost=0.33)}
    (f,) = _findings(_snap(_stmt(**{**pgss, **cheap, "plans_per_call": 0.001})))
    assert f.severity is Severity.WARNING and "plans per call" in f.evidence["confirmed_by"]
    # A cached plan when the generic one costs 818,000x more: plan_cache_mode = auto would
    # never have kept it, and 4 blocks per call is what the index plan reads. The counters
    # contradict the finding: the application's text is not the one planned (a literal
    # shown as $n). Info, with the counter that disagrees.
    (f,) = _findings(_snap(_stmt(**{**pgss, "plans_per_call": 0.001})))
    assert f.severity is Severity.INFO and f.evidence["confirmed_by"] is None
    assert "plan_cache_mode = auto keeps a generic plan only" in f.evidence["contradicted_by"]
    assert "Not confirmed" in f.message and "4 shared blocks per call" in f.message
    # ... unless the blocks per call say the whole table is read: a session that forces it.
    whole = {"plans_per_call": 0.001, "shared_blks_per_call": 100.0}
    (f,) = _findings(_snap(_stmt(**{**pgss, **whole}), table_pages=120))
    assert f.severity is Severity.WARNING and "forces it" in f.evidence["confirmed_by"]
    # Forced on the database: critical.
    row = RoleSetting("app", None, "plan_cache_mode", "force_generic_plan")
    (f,) = _findings(_snap(_stmt(**pgss), row))
    assert f.severity is Severity.CRITICAL


PGSS: dict[str, object] = {
    "source": "pg_stat_statements", "from_normalised_text": True, "queryid": 7,
    "calls": 10_000, "mean_exec_ms": 0.2, "shared_blks_per_call": 4.0,
}  # fmt: skip


def _costing(ratio: float) -> PlanNode:
    """GENERIC at ``ratio`` times CUSTOM's total cost."""
    return dataclasses.replace(GENERIC, total_cost=CUSTOM.total_cost * ratio)


def _judged(pages: int | None = None, /, **kw: object) -> Finding:
    (f,) = _findings(_snap(_stmt(**{**PGSS, **kw}), table_pages=pages))
    return f


@pytest.mark.parametrize(
    ("counters", "severity", "near"),
    [
        # Blocks per call against 0.5 x the table's pages, margin 20 %: 0.4 to 0.6.
        ({"shared_blks_per_call": 0.61}, Severity.WARNING, None),
        ({"shared_blks_per_call": 0.59}, Severity.INFO, "shared blocks per call is within"),
        ({"shared_blks_per_call": 0.41}, Severity.INFO, "shared blocks per call is within"),
        ({"shared_blks_per_call": 0.39}, Severity.INFO, None),
        # Plans per call against 0.1 (a cheap generic plan, so few plans would confirm).
        ({"plans_per_call": 0.079, "ratio": 1.0}, Severity.WARNING, None),
        ({"plans_per_call": 0.081, "ratio": 1.0}, Severity.INFO, "plans per call is within"),
        ({"plans_per_call": 0.119, "ratio": 1.0}, Severity.INFO, "plans per call is within"),
        ({"plans_per_call": 0.121, "ratio": 1.0}, Severity.INFO, None),
        # Calls against 50.
        ({"plans_per_call": 0.001, "ratio": 1.0, "calls": 60}, Severity.WARNING, None),
        ({"plans_per_call": 0.001, "ratio": 1.0, "calls": 59}, Severity.INFO, "calls is within"),
        ({"plans_per_call": 0.001, "ratio": 1.0, "calls": 41}, Severity.INFO, "calls is within"),
        ({"plans_per_call": 0.001, "ratio": 1.0, "calls": 39}, Severity.INFO, None),
        # The cost ratio against 1.1, margin 5 %: 1.045 to 1.155.
        ({"plans_per_call": 0.001, "ratio": 1.04}, Severity.WARNING, None),
        ({"plans_per_call": 0.001, "ratio": 1.05}, Severity.INFO, "cost"),
        ({"plans_per_call": 0.001, "ratio": 1.15}, Severity.INFO, "cost"),
        ({"plans_per_call": 0.001, "ratio": 1.16}, Severity.INFO, None),  # contradicted
    ],
)
def test_a_counter_within_the_margin_of_its_threshold_confirms_nothing(
    counters: dict[str, float], severity: Severity, near: str | None
) -> None:
    pages = S.jobs_table().relpages
    kw: dict[str, object] = dict(counters)
    if "shared_blks_per_call" in kw:
        kw["shared_blks_per_call"] = float(counters["shared_blks_per_call"]) * pages
    if "ratio" in kw:
        kw["generic_plan"] = _costing(counters["ratio"])
        del kw["ratio"]
    # The same snapshot twice: the same answer.
    f, again = _judged(**kw), _judged(**kw)
    assert (f.severity, f.message) == (again.severity, again.message)
    assert f.severity is severity, f.message
    if near is None:
        assert f.evidence["near_threshold"] is None, f.evidence["near_threshold"]
    else:
        assert near in (f.evidence["near_threshold"] or ""), f.evidence
        assert "Too close to a threshold" in f.message


@pytest.mark.parametrize(
    ("pages", "severity", "evidence"),
    [
        # A cached plan far costlier than the custom one, reading the whole table: the
        # session forces it when the table is big enough to tell (32 pages, margin 20 %).
        (39, Severity.WARNING, "confirmed_by"),
        (38, Severity.INFO, "near_threshold"),
        (26, Severity.INFO, "near_threshold"),
        (25, Severity.INFO, "contradicted_by"),
    ],
)
def test_a_table_near_the_size_that_tells_plans_apart_confirms_nothing(
    pages: int, severity: Severity, evidence: str
) -> None:
    f = _judged(pages, plans_per_call=0.001, shared_blks_per_call=float(pages))
    assert f.severity is severity, f.message
    assert f.evidence[evidence], f.evidence
    others = {"confirmed_by", "contradicted_by", "near_threshold"} - {evidence}
    assert all(f.evidence[k] is None for k in others), f.evidence


def test_a_contradicted_finding_prints_no_cost_ratio_as_if_measured() -> None:
    f = _judged(plans_per_call=0.001)
    assert f.evidence["contradicted_by"] and "x less" not in f.message
    assert f.evidence["generic_to_custom_cost_ratio"] > 1000
    # Unconfirmed, not contradicted: the ratio is printed, as an estimate.
    assert "an estimated 818,182x less" in _judged().message


def test_quiet_when_literal_or_when_the_generic_plan_keeps_the_index() -> None:
    literal = BOUND.replace("$1", "'pending'")
    assert_quiet(S.report("QA301", _snap(_stmt(literal, custom_values={}, generic_plan=CUSTOM))),
                 "QA301")  # fmt: skip
    assert_quiet(S.report("QA301", _snap(_stmt(generic_plan=CUSTOM))), "QA301")
    # The custom plan does not use the index either: not this check's finding.
    assert_quiet(S.report("QA301", _snap(_stmt(custom_plan=GENERIC))), "QA301")


# --- on real servers ---------------------------------------------------------------------------


def test_forced_on_the_database_is_critical_and_the_printed_rewrite_is_quiet(
    shape: Shape,
) -> None:
    db = shape.db
    build_claim_queue(db)
    shape.dba.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    run = shape.check("--query", CLAIM)
    assert run.rc == 1
    (f,) = run.findings("QA301")
    assert f["severity"] == "critical" and f["key"] == f"QA301:{shape.queue}@{fingerprint(CLAIM)}"
    ev = f["evidence"]
    assert ev["plan_cache_mode"] == "force_generic_plan"
    assert ev["plan_cache_mode_source"] == (
        f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan"
    )
    assert ev["custom_plan_scan"].startswith("Index Scan using jobs_queued_created_at_idx")
    assert "jobs_queued_created_at_idx" not in ev["generic_plan_scan"]
    assert ev["generic_plan_cost"] > 10 * ev["custom_plan_cost"]
    assert f["fix"]["statements"] == []
    assert "status = <value of $1>" in rewrite_of(f) and "'queued'" not in rewrite_of(f)
    # The application knows its value ('queued') and writes it where the rewrite says.
    rewritten = as_the_application(rewrite_of(f), {1: "'queued'"})
    (plan,) = shape.plan_rewrites(f, {1: "'queued'"})
    assert "jobs_queued_created_at_idx" in plan

    # The proof is the server's: planned generically while force_generic_plan is still set,
    # the rewrite uses the partial index and the application's statement does not.
    schema = shape.schema
    assert "jobs_queued_created_at_idx" in generic_plan_indexes(db, schema, rewritten.rstrip(";"))
    assert "jobs_queued_created_at_idx" not in generic_plan_indexes(
        db, schema, CLAIM, "text", "'queued'"
    )
    assert_quiet(shape.check("--query", rewritten), "QA301", shape.queue)


def generic_plan_indexes(
    db: TestDB, schema: str, statement: str, types: str = "", values: str = ""
) -> tuple[str, ...]:
    """The indexes of ``schema``.jobs that the statement's cached plan uses in a new session
    of the database as ``db``'s role (which takes its plan_cache_mode), prepared and
    explained in a transaction that is rolled back."""
    with db.connect() as conn:
        assert conn.execute("SHOW plan_cache_mode").fetchone() == ("force_generic_plan",)
        with conn.transaction(force_rollback=True):
            conn.execute(f"PREPARE proof{f'({types})' if types else ''} AS {statement}")
            row = conn.execute(
                f"EXPLAIN (FORMAT JSON) EXECUTE proof{f'({values})' if values else ''}"
            ).fetchone()
            conn.execute("DEALLOCATE proof")
    assert row is not None
    plan, _ = parse_explain(row[0])
    return indexes_used(plan, schema, "jobs")


def test_without_the_setting_it_is_a_warning(shape: Shape) -> None:
    build_claim_queue(shape.db)
    (f,) = shape.check("--query", CLAIM).findings("QA301")
    assert f["severity"] == "warning" and f["evidence"]["plan_cache_mode"] == "auto"


def test_from_pg_stat_statements_it_is_latent_until_the_database_forces_generic_plans(
    shape: Shape,
) -> None:
    db = shape.db
    build_claim_queue(db)
    shape.dba.execute("CREATE EXTENSION pg_stat_statements")
    run_claims(db)
    (f,) = shape.check().findings("QA301")
    # The key is the claim's shape: the same for the normalised text as for the application's.
    assert (
        f["severity"] == "info"
        and f["target"]["name"] == f"jobs@{fingerprint(SELECT_CLAIM.replace('%s', '$1'))}"
    )
    assert f["evidence"]["calls"] == 3
    shape.dba.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    (f,) = shape.check().findings("QA301")
    assert f["severity"] == "critical"


@pytest.mark.judges("QA301", "QA302", "QA303")
def test_a_healthy_literal_claim_on_a_matching_partial_index_is_quiet(shape: Shape) -> None:
    build_claim_queue(shape.db)
    run = shape.check("--query", CLAIM.replace("$1", "'queued'"))
    for code in ("QA301", "QA302", "QA303"):
        assert_quiet(run, code, shape.queue)


def test_a_driver_forcing_generic_plans_is_confirmed_by_plans_per_call(shape: Shape) -> None:
    # The application's own session forces generic plans (invisible to qadvisor): only the
    # runtime counters tell, here plans/calls far below 1 with track_planning on.
    db = shape.db
    build_claim_queue(db)
    shape.dba.execute("CREATE EXTENSION pg_stat_statements")
    shape.dba.execute(f"ALTER DATABASE {db.name} SET pg_stat_statements.track_planning = on")
    with db.connect() as app:
        app.execute("SET plan_cache_mode = force_generic_plan")
        for _ in range(100):
            app.execute(SELECT_CLAIM, ["queued"], prepare=True)
    (f,) = shape.check().findings("QA301")
    assert f["severity"] == "warning", f["message"]
    assert f["evidence"]["calls"] == 100 and f["evidence"]["plans_per_call"] < 0.1
    assert "plans per call" in f["evidence"]["confirmed_by"]


def test_few_plans_per_call_with_a_costlier_generic_plan_is_a_contradiction_not_a_warning(
    shape: Shape,
) -> None:
    # The application writes the status as a literal and prepares the statement, so its one
    # cached plan uses the partial index; pg_stat_statements shows the literal as $1. Planned
    # with $1, the generic plan misses the index and costs far more: under auto the server
    # would never have kept such a plan, and the blocks per call are an index probe's.
    db = shape.db
    build_claim_queue(db)
    shape.dba.execute("CREATE EXTENSION pg_stat_statements")
    shape.dba.execute(f"ALTER DATABASE {db.name} SET pg_stat_statements.track_planning = on")
    literal = SELECT_CLAIM.replace("%s", "'queued'")
    with db.connect() as app:
        for _ in range(100):
            app.execute(literal, prepare=True)
    (f,) = shape.check().findings("QA301")
    ev = f["evidence"]
    assert ev["calls"] == 100 and ev["plans_per_call"] < 0.1
    assert f["severity"] == "info", f["message"]
    assert ev["confirmed_by"] is None and "costs no more than" in ev["contradicted_by"]
    assert ev["shared_blks_per_call"] < 0.5 * ev["table_pages"]
    assert "Not confirmed" in f["message"] and "shared blocks per call" in f["message"]


# Lists bound as parameters, as Ecto and many ORMs send them, against a partial index on the
# two live states.
LIST_CLAIMS = {
    "any": (
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status = "
        "ANY($1) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
        {1: "ARRAY['queued', 'retry']"},
        ("text[]", "'{queued,retry}'"),
    ),
    "in": (
        "UPDATE jobs SET status = 'running' WHERE id = (SELECT id FROM jobs WHERE status IN "
        "($1, $2) ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
        {1: "'queued'", 2: "'retry'"},
        ("text, text", "'queued', 'retry'"),
    ),
}


@pytest.mark.parametrize("form", sorted(LIST_CLAIMS))
def test_a_status_list_bound_as_parameters_is_found_and_its_literal_list_is_proven(
    shape: Shape, form: str
) -> None:
    claim, values, (types, bound) = LIST_CLAIMS[form]
    db = shape.db
    build_claim_queue(db)
    db.execute(
        "DROP INDEX jobs_queued_created_at_idx; "
        "CREATE INDEX jobs_live_idx ON jobs (created_at) WHERE status IN ('queued', 'retry'); "
        "ANALYZE jobs"
    )
    shape.dba.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    (f,) = shape.check("--query", claim).findings("QA301")
    assert f["severity"] == "critical", f["message"]
    ev = f["evidence"]
    assert ev["partial_index"] == "jobs_live_idx"
    assert ev["custom_plan_scan"].startswith("Index Scan using jobs_live_idx")
    assert "jobs_live_idx" not in ev["generic_plan_scan"]
    # The live values were bound for the custom plan, never written into the rewrite.
    assert "'queued'" not in rewrite_of(f) and "'retry'" not in rewrite_of(f)
    if form == "any":
        assert "ARRAY['queued', 'retry']" in f["fix"]["notes"]
    # The proof is the server's: the statement as the application sends it misses the index
    # in its generic plan; filled with its list as literals, the generic plan uses it.
    schema = shape.schema
    assert "jobs_live_idx" not in generic_plan_indexes(db, schema, claim, types, bound)
    rewritten = as_the_application(rewrite_of(f), values)
    assert "jobs_live_idx" in generic_plan_indexes(db, schema, rewritten.rstrip(";"))
    assert_quiet(shape.check("--query", rewritten), "QA301", shape.queue)


# pgqueuer's shape, small: its dequeue writes the status as a literal and binds its own
# parameters (the entrypoint, the worker), takes the rows, marks them picked and logs them; the
# driver prepares it and reuses its cached plan. pg_stat_statements shows 'queued' as $3,
# numbered after the statement's own $1 and $2. Planned as pgqueuer wrote it, the generic plan
# uses the partial index; planned from pg_stat_statements' text, it cannot.
PGQ_DEQUEUE = (
    "WITH next AS (SELECT id FROM jobs WHERE entrypoint = %s AND status = 'queued' "
    "ORDER BY priority DESC, id LIMIT 10 FOR UPDATE SKIP LOCKED), "
    "claimed AS (UPDATE jobs SET status = 'picked', updated = now(), worker = %s "
    "WHERE id IN (SELECT id FROM next) RETURNING *), "
    "logged AS (INSERT INTO jobs_log (job_id, status) SELECT id, status FROM claimed) "
    "SELECT id FROM claimed"
)


def build_pgqueuer_shape(db: TestDB) -> None:
    db.execute(
        """
        CREATE TABLE jobs (
            id bigserial PRIMARY KEY,
            entrypoint text NOT NULL,
            status text NOT NULL DEFAULT 'queued',
            priority int NOT NULL DEFAULT 0,
            updated timestamptz NOT NULL DEFAULT now(),
            worker text,
            payload text NOT NULL DEFAULT repeat('p', 60)
        );
        CREATE TABLE jobs_log (id bigserial PRIMARY KEY, job_id bigint NOT NULL,
                               status text NOT NULL, created timestamptz DEFAULT now());
        CREATE INDEX ON jobs_log (job_id);
        CREATE INDEX ON jobs_log (created);
        INSERT INTO jobs (entrypoint) SELECT 'default' FROM generate_series(1, 5000);
        CREATE INDEX jobs_queued_ep_prio_id_idx ON jobs (entrypoint, priority DESC, id)
            WHERE status = 'queued';
        CREATE INDEX ON jobs (status);
        CREATE INDEX ON jobs (updated, id);
        CREATE INDEX ON jobs (priority, id);
        CREATE INDEX ON jobs (entrypoint, status);
        CREATE INDEX ON jobs (status, updated);
        CREATE INDEX ON jobs (entrypoint, updated);
        """
    )
    db.execute("VACUUM ANALYZE jobs")


def test_blocks_a_writing_claim_spends_on_its_writes_are_no_read_of_the_table(
    shape: Shape,
) -> None:
    db = shape.db
    build_pgqueuer_shape(db)
    record_afresh(shape.dba, planning_in=db)
    with db.connect() as app:
        for _ in range(100):
            app.execute(PGQ_DEQUEUE, ("default", "w1"), prepare=True)
    ((pages,),) = db.execute("SELECT relpages FROM pg_class WHERE relname = 'jobs'")
    (f,) = shape.check().findings("QA301")
    ev = f["evidence"]
    # The cached plan reused (few plans per call) and blocks per call far over half the
    # table's pages: read as a generic plan reading the table, this was a warning. The blocks
    # are the claim's writes (ten rows a call through eight indexes, and the log).
    assert ev["calls"] == 100 and ev["plans_per_call"] < 0.1
    assert ev["shared_blks_per_call"] > pages > 32
    assert f["severity"] == "info", f["message"]
    assert ev["confirmed_by"] is None
    said = ev["contradicted_by"]
    assert "its writes of 10 rows per call through the table's 8 indexes" in said
    assert "$3 numbered after the statement's own $1 to $2" in said


# The pathology whose fixes tests/fixes/test_fix_steps.py runs on a server: the migrations
# as printed, one statement per call, the rewrites planned in place of the statement.


def _fix_pathology(db: TestDB) -> Run:
    build_claim_queue(db)
    db.execute(f"ALTER DATABASE {db.name} SET plan_cache_mode = force_generic_plan")
    return check(db, "--query", CLAIM)


FIX_PATHOLOGIES = {
    "generic-plan": Pathology(frozenset({"QA301"}), _fix_pathology, {1: "'queued'"}),
}
