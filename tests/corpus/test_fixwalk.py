"""tests/corpus/fixwalk.py on hand-written reports: the walk finds what it is for."""

from __future__ import annotations

from typing import Any

from tests.corpus.fixwalk import foreign_literals, literals, used_indexes_dropped, verdicts

CLAIM = "SELECT id FROM jobs WHERE status = $1 ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
PLAN = {"node_type": "Limit", "children": [{"node_type": "Index Scan", "index": "jobs_full"}]}
TARGET = {"kind": "index", "schema": "public", "table": "jobs", "name": "jobs_full"}


def _report(*steps: dict[str, Any], notes: str = "") -> dict[str, Any]:
    fix = {"notes": notes, "steps": list(steps)}
    return {"findings": [{"code": "QA999", "severity": "info", "target": TARGET, "fix": fix}]}


def _rewrite(sql: str, before: str | None = CLAIM) -> dict[str, Any]:
    return {"kind": "rewrite", "sql": sql, "before": before, "note": ""}


def _snapshot(**kw: Any) -> dict[str, Any]:
    claim = {"source": "pg_stat_statements", "fingerprint": "abc", "text": CLAIM,
             "queue": "public.jobs", "custom_plan": PLAN}  # fmt: skip
    return {"statements": [claim], "stakeholders": [], **kw}


def test_literals_read_placeholders_as_parameters() -> None:
    assert literals("SELECT 1 WHERE a = 'x' AND b = <value of $2>") == {"n:1", "s:x"}
    assert literals("SELECT (") is None


def test_a_rewrite_with_a_value_the_statement_does_not_have_is_reported() -> None:
    placeholder = CLAIM.replace("$1", "<value of $1>")
    assert foreign_literals(_report(_rewrite(placeholder)), _snapshot()) == []
    (problem,) = foreign_literals(_report(_rewrite(CLAIM.replace("$1", "'pending'"))), _snapshot())
    assert "['s:pending']" in problem
    (problem,) = foreign_literals(_report(_rewrite("SELECT 1", before=None)), _snapshot())
    assert "did not see" in problem


def test_a_drop_of_an_index_a_plan_reads_is_reported() -> None:
    drop = {"kind": "migration", "sql": "DROP INDEX CONCURRENTLY public.jobs_full;", "note": ""}
    (problem,) = used_indexes_dropped(_report(drop), _snapshot())
    assert "claim pg_stat_statements abc's plan reads" in problem
    # Named by the step that builds the index the claim moves to: allowed.
    create = {"kind": "migration", "sql": "CREATE INDEX CONCURRENTLY x ON public.jobs (a);",
              "note": "Statements whose ...: pg_stat_statements abc (3 calls)."}  # fmt: skip
    assert used_indexes_dropped(_report(create, drop), _snapshot()) == []
    # Another statement reads it (a stakeholder), or a note spells the DROP.
    reader = {"queue": "public.jobs", "indexes_used": ["jobs_full"], "text": "DELETE FROM jobs"}
    snap = _snapshot(statements=[], stakeholders=[reader])
    (problem,) = used_indexes_dropped(
        _report(notes="then DROP INDEX CONCURRENTLY public.jobs_full."), snap
    )
    assert "'DELETE FROM jobs' reads" in problem
    assert verdicts(_report()) == [("QA999", "public.jobs_full", "info")]


def test_a_drop_of_an_index_only_a_generic_plan_the_server_never_ran_reads_is_reviewed() -> None:
    # The claim's custom plan reads another index; its generic plan reads jobs_full, which
    # the server never scanned while the claim ran 12 times: a DROP for review is allowed, a
    # DROP as a migration is not; a scan counted (or unknown) makes it a reader again.
    other = {"node_type": "Limit", "children": [{"node_type": "Index Scan", "index": "jobs_live"}]}
    claim = {"source": "pg_stat_statements", "fingerprint": "abc", "text": CLAIM, "calls": 12,
             "queue": "public.jobs", "custom_plan": other, "generic_plan": PLAN}  # fmt: skip

    def snap(scans: int | None) -> dict[str, Any]:
        table = {"schema": "public", "name": "jobs",
                 "indexes": [{"name": "jobs_full", "idx_scan": scans}]}  # fmt: skip
        return _snapshot(statements=[claim], tables=[table], server={"is_standby": False})

    sql = "DROP INDEX CONCURRENTLY public.jobs_full;"
    reviewed = {"kind": "review", "sql": sql, "note": ""}
    migration = {"kind": "migration", "sql": sql, "note": ""}
    assert used_indexes_dropped(_report(reviewed), snap(0)) == []
    (problem,) = used_indexes_dropped(_report(migration), snap(0))
    assert "as a migration, which claim pg_stat_statements abc's generic plan reads" in problem
    for scans in (4, None):
        (problem,) = used_indexes_dropped(_report(reviewed), snap(scans))
        assert "claim pg_stat_statements abc's plan reads" in problem
