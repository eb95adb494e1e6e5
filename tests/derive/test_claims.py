"""Which row-locking statements are claims: unit tests on parsed statements."""

from __future__ import annotations

from qadvisor.derive.claims import judge
from qadvisor.sql.dequeue import analyse, fingerprint


def verdict(
    sql: str, keys: tuple[tuple[str, ...], ...] = (("id",),), toplevel: bool | None = None
) -> tuple[bool, str]:
    parsed = analyse(sql)
    assert parsed is not None
    j = judge(parsed, keys, toplevel)
    return j.is_claim, j.reason


def test_skip_locked_is_a_claim() -> None:
    assert verdict("SELECT id FROM jobs WHERE status = $1 LIMIT $2 FOR UPDATE SKIP LOCKED") == (
        True,
        "locks with SKIP LOCKED",
    )


def test_the_foreign_key_check_of_an_ri_trigger_is_not() -> None:
    ri = (
        'SELECT 1 FROM ONLY "public"."procrastinate_jobs" x WHERE "id" OPERATOR(pg_catalog.=) $1 '
        "FOR KEY SHARE OF x"
    )
    assert verdict(ri, toplevel=False) == (
        False,
        "is a foreign-key check run by PostgreSQL's RI triggers",
    )


def test_a_lock_of_one_row_by_its_key_is_not() -> None:
    is_claim, reason = verdict(
        "SELECT * FROM job_runs WHERE run_id = $1 FOR UPDATE", (("run_id",),)
    )
    assert (
        not is_claim and reason == "locks one row by its key (run_id = $1): waiting for it is right"
    )
    # ... by a composite key too, in any order of the conditions
    is_claim, _ = verdict(
        "SELECT * FROM t WHERE b = 2 AND a = $1 FOR UPDATE", (("id",), ("a", "b"))
    )
    assert not is_claim


def test_an_order_by_limit_without_skip_locked_is_a_claim() -> None:
    assert verdict("SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE")[0]


def test_a_lock_that_chooses_nothing_is_not() -> None:
    is_claim, reason = verdict("SELECT id FROM jobs WHERE tenant_id = $1 FOR UPDATE")
    assert not is_claim and "without choosing" in reason


def test_a_key_lock_with_skip_locked_is_a_claim_attempt() -> None:
    is_claim, reason = verdict("SELECT id FROM jobs WHERE id = $1 FOR UPDATE SKIP LOCKED")
    assert is_claim and "id = $1" in reason


def test_fingerprints_ignore_constants_spelling_and_list_lengths() -> None:
    written = (
        "SELECT id FROM jobs WHERE status IN ('a', 'b') ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    recorded = (
        "select id from JOBS where status in ($1, $2) order by id limit $3 for update skip locked"
    )
    squashed = (  # PostgreSQL 18 squashes constant lists
        "SELECT id FROM jobs WHERE status IN ($1 /*, ... */) ORDER BY id LIMIT $2 "
        "FOR UPDATE SKIP LOCKED"
    )
    assert fingerprint(written) == fingerprint(recorded) == fingerprint(squashed)
    assert len(fingerprint(written)) == 10
    # A quoted name is another table; another order is another statement.
    assert fingerprint(written.replace("jobs", '"JOBS"')) != fingerprint(written)
    assert fingerprint(written.replace("ORDER BY id", "ORDER BY created_at")) != fingerprint(
        written
    )


def test_an_ri_check_recorded_at_top_level_with_its_constant_normalised_is_not_a_claim() -> None:
    # pg-boss's inserts reach pg_stat_statements over the extended protocol: toplevel = true.
    ri = (
        'SELECT $2 FROM ONLY "pgboss"."queue" x WHERE "name" OPERATOR(pg_catalog.=) $1 '
        "FOR KEY SHARE OF x"
    )
    assert verdict(ri, (("name",),), toplevel=True)[0] is False


def test_a_skip_locked_lock_of_finished_rows_takes_no_waiting_job() -> None:
    from qadvisor.derive.claims import selects_other_rows
    from qadvisor.model import LivePredicate

    live = LivePredicate("state", "in", ("created", "retry"))
    resolver = analyse(
        "SELECT j.id FROM pgboss.job_common j WHERE j.blocking AND j.state = 'completed' "
        "ORDER BY j.name, j.id FOR UPDATE OF j SKIP LOCKED LIMIT 100"
    )
    assert resolver is not None
    assert selects_other_rows(resolver, live) == (
        "it locks rows with j.state = 'completed', none of them waiting "
        "(state IN ('created', 'retry'))"
    )
    # From pg_stat_statements the literal is a $n: it may be a waiting state.
    recorded = analyse(resolver.text.replace("'completed'", "$2"))
    assert recorded is not None and selects_other_rows(recorded, live) == ""
    fetch = analyse("SELECT id FROM jobs WHERE state = 'retry' LIMIT 1 FOR UPDATE SKIP LOCKED")
    assert fetch is not None and selects_other_rows(fetch, live) == ""
