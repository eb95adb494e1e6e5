"""The facts checks read, and what the collector needs to read each one.

A check names the facts it reads (``@check(..., requires=("live_set", ...))``). This table says,
for each fact, where it comes from, which privilege the role needs (with the GRANT that gives
it) and which lock of another session keeps it from being read at once. The collector words its
records of hidden facts with these GRANTs; ``docs/privileges.md`` is generated from this table
and the checks' declarations (``python -m qadvisor.docgen.pages``), and a test keeps it in sync.

A GRANT is a template: ``{role}`` is the role qadvisor connects as, ``{schema}`` a schema,
``{table}`` a schema-qualified table, ``{columns}`` a list of columns, all quoted as needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from qadvisor.sql.printing import ident, qualified


@dataclass(frozen=True)
class Fact:
    name: str
    title: str  # what it is, a few words
    source: str  # where the collector reads it
    privilege: str  # what the role needs to see it
    # GRANT templates by what they give: "usage", "select", "update", "read_all_stats".
    grants: dict[str, str] = field(default_factory=dict)
    # The lock qadvisor takes to read it ("" for none); a lock of another session that
    # conflicts with it, held or requested, keeps the fact from being read.
    lock: str = ""
    when_locked: str = ""  # what happens then
    # Grants needed only in a case that the words say (by kind): the smallest role has none.
    only_when: dict[str, str] = field(default_factory=dict)

    def grant(
        self,
        kind: str,
        role: str,
        schema: str = "",
        table: str = "",
        columns: Iterable[str] = (),
    ) -> str:
        """One GRANT of this fact with the names filled in, quoted where PostgreSQL needs it
        (``table`` is qualified with ``schema``)."""
        return self.grants[kind].format(
            role=ident(role),
            schema=ident(schema) if schema else "",
            table=qualified(schema, table) if table else "",
            columns=", ".join(ident(c) for c in columns),
        )


_USAGE = "GRANT USAGE ON SCHEMA {schema} TO {role};"
_SELECT_COLUMNS = "GRANT SELECT ({columns}) ON {table} TO {role};"
_READ_ALL_STATS = "GRANT pg_read_all_stats TO {role};"

FACTS: dict[str, Fact] = {
    f.name: f
    for f in (
        Fact(
            "table_facts",
            "catalog facts and counters of the queue table",
            "pg_class, pg_attribute and the pg_stat_get_* functions, by OID",
            "none beyond CONNECT",
        ),
        Fact(
            "sizes",
            "table and index sizes",
            "pg_table_size and pg_relation_size",
            "none beyond CONNECT",
            lock="ACCESS SHARE on the table or index",
            when_locked="the size is estimated from pg_class.relpages x block_size, and the "
            "evidence says so",
        ),
        Fact(
            "index_definitions",
            "definitions and predicates of the queue table's indexes",
            "pg_get_indexdef and pg_get_expr",
            "none beyond CONNECT",
            lock="ACCESS SHARE on the table",
            when_locked="the indexes of that table are not read, and a skip names the lock",
        ),
        Fact(
            "live_set",
            "the live-set estimate (rows waiting to be claimed)",
            "reltuples of a partial index on the live predicate, else pg_stats of the live column "
            "(of a partitioned queue table, its partitions' pg_stats, else its own, which only "
            "a manual ANALYZE of it writes)",
            "SELECT on the live column, unless a partial index on the live predicate counts "
            "the live rows (pg_stats shows a column only to roles that may read it; a GRANT on "
            "a partitioned table does not reach its partitions' statistics, which need it on "
            "each partition)",
            {"select": _SELECT_COLUMNS},
        ),
        Fact(
            "statements",
            "dequeue statements from pg_stat_statements",
            "pg_stat_statements, at whatever version from 1.4 on an upgrade of PostgreSQL "
            "left it (before 1.8 it counts no plans, before 1.9 no evictions: what that "
            "leaves unknown is said)",
            "pg_read_all_stats (part of pg_monitor) to see the statements of other roles; "
            "or give the claim with --query / --query-file",
            {"read_all_stats": _READ_ALL_STATS},
        ),
        Fact(
            "counters",
            "activity counters of the queue tables (dead and live tuples, vacuum times, index "
            "scans)",
            "pg_stat_get_* by OID (what pg_stat_user_tables shows); on a standby they count "
            "the standby's own activity, so a standby has none to give",
            "none beyond CONNECT",
        ),
        Fact(
            "plans",
            "custom and generic plans of the dequeue statements",
            "PREPARE and EXPLAIN in a rolled-back read-only transaction",
            "USAGE on the schema and SELECT on the columns the claim's locking level reads "
            "(PostgreSQL checks a statement's privileges for EXPLAIN too; the session stays "
            "read-only). With UPDATE on the queue table the claim is planned as written; "
            "without it, its locking level alone without its row locks (the scan its "
            "LockRows reads, the same plan); a select list that reads columns the role may "
            "not SELECT is left out of the plan. UPDATE is needed only for a claim that "
            "locks its rows in no SELECT (a plain UPDATE ... WHERE)",
            {
                "usage": _USAGE,
                "select": "GRANT SELECT ON {table} TO {role};",
                "columns": _SELECT_COLUMNS,
                "update": "GRANT UPDATE ON {table} TO {role};",
            },
            lock="ROW SHARE (ROW EXCLUSIVE for an UPDATE or DELETE claim planned as written; ROW "
            "SHARE for a locking level planned alone, which is PREPAREd with its locks first) on "
            "the table and its indexes",
            when_locked="the statement is not planned, and a skip names the lock",
            only_when={"update": "for a claim that locks its rows in no SELECT"},
        ),
        Fact(
            "id_sequences",
            "the sequences that number the queue tables' ids (type, maximum, last value)",
            "pg_sequence and pg_depend by OID, pg_sequence_last_value, else the id column's "
            "largest value in pg_stats",
            "SELECT (or USAGE) on the sequence for its last value, else SELECT on the id column "
            "(pg_stats); SELECT on a sequence reads it and cannot advance it",
            {"sequence": "GRANT SELECT ON SEQUENCE {table} TO {role};"},
        ),
        Fact(
            "archive_age",
            "how old the oldest finished row of a queue table is",
            "pg_stats of the finish timestamp (finished_at, completed_at, ...), else of the "
            "timestamp the live predicate waits on (dequeued_at IS NULL), else of the creation "
            "timestamp (created_at, inserted_at, ...): the smallest value ANALYZE saw",
            "SELECT on that timestamp column (pg_stats shows a column only to roles that may "
            "read it)",
            {"select": _SELECT_COLUMNS},
        ),
        Fact(
            "tenant_counts",
            "live rows per tenant and recent job durations",
            "bounded reads of the queue table through its indexes",
            "USAGE on the schema and SELECT on the columns read (tenant, live predicate, "
            "start and finish of a job)",
            {"usage": _USAGE, "select": _SELECT_COLUMNS},
            lock="ACCESS SHARE on the table and its indexes",
            when_locked="the tenants are not counted, and a skip names the lock",
        ),
        Fact(
            "tenant_rotation",
            "idle tenants in the rotation table of a round-robin dequeue",
            "a bounded read of the rotation table, one index probe per row",
            "what tenant_counts needs, plus USAGE on the rotation table's schema and SELECT on "
            "the rotation table (planning the round-robin claim reads it too)",
            {"usage": _USAGE, "select": "GRANT SELECT ON {table} TO {role};"},
            lock="ACCESS SHARE on the rotation table and the queue table",
            when_locked="the rotation is not probed, and a skip names the lock",
        ),
        Fact(
            "horizon",
            "what holds back the xmin horizon",
            "pg_stat_activity, pg_prepared_xacts, pg_replication_slots, pg_stat_replication",
            "pg_read_all_stats (part of pg_monitor): without it other roles' sessions show "
            "their transaction ids but not their state, type or start",
            {"read_all_stats": _READ_ALL_STATS},
        ),
        Fact(
            "discovery",
            "the status values that tell a queue table from another table",
            "pg_stats of status-like columns",
            "SELECT on the status column (or name the table with --table and give its claim)",
            {"select": _SELECT_COLUMNS},
        ),
    )
}
