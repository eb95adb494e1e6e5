"""Every statement qadvisor sends to a server: what needs it, the lock it takes, the privilege.

``SENT`` is the one list of them. ``docs/safety.md`` is generated from it
(``python -m qadvisor.docgen.pages docs/checks``), and a test on real servers records every
statement a full run sends (``log_statement = all``) and fails on one that matches no entry
here, and on an entry no run sent that does not say when it is sent (``when``).

An entry's text is a collector SQL file (``file``: ``qadvisor/collect/sql/<file>.sql``, read
from the package, so it cannot drift) or a template (``template``). In both, ``%s`` and
``%(name)s`` are bound parameters (the server logs them as ``$n``) and, where ``composed``,
``{name}`` is a piece qadvisor writes in (a quoted identifier, a literal it built, a live
predicate it printed) or, for the entries whose ``embeds`` says so, the application's own
statement text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from qadvisor.collect.planner import (
    ANALYZE_LOCK_TIMEOUT_MS,
    PARAMETER_TYPES_SQL,
    PREPARED_NAME,
    UNCOUNTED_SQL,
    UNCOUNTED_SQL_14,
)
from qadvisor.collect.queries import query_text
from qadvisor.collect.recorded import PGSS_WORK_MEM_SQL
from qadvisor.collect.session_limits import CATALOG_LOCKS_SQL, ROLE_LOCK_TIMEOUT_SQL
from qadvisor.collect.stakeholders import PREPARED as STAKEHOLDER

# The groups, in the order of the page: what makes qadvisor send the statements.
GROUPS: dict[str, str] = {
    "session": "Opening the session (every run)",
    "collection": "Collection",
    "planning": "Planning the dequeue statements (a claim known from pg_stat_statements, "
    "a function, `--query` or `--query-file`)",
    "sample": "`--sample`",
    "role": "`qadvisor role`",
    "analyze": "`--analyze`",
    "transaction": "Transaction control (psycopg's, around the steps above)",
    "fleet": "`--all-databases` (once, in a session of its own on the database the DSN names, "
    "before each database is checked as above)",
}

NO_LOCK = "none on the application's tables (catalog reads only)"
CONNECT = "CONNECT on the database"
PLAN_LOCK = (
    "what the statement itself would take, from PREPARE to the ROLLBACK: ROW SHARE on a "
    "table it locks rows of (ROW EXCLUSIVE on one an UPDATE or DELETE writes) and on that "
    "table's indexes, ACCESS SHARE on the other tables it reads; a claim's locking level "
    "planned alone (a role without UPDATE) takes ROW SHARE, for PREPARE of it with its locks "
    "comes first; no row lock (nothing is executed)"
)
PLAN_PRIVILEGE = (
    "what EXPLAIN checks (PREPARE checks none): USAGE on its schemas and SELECT on the "
    "columns it reads; UPDATE on the queue table only to plan a claim as written (without "
    "it, the claim's scan without its row locks is planned; docs/privileges.md)"
)


@dataclass(frozen=True)
class Sent:
    """One statement (or one shape of statement) qadvisor sends."""

    name: str
    groups: tuple[str, ...]  # of GROUPS; the first is where the page describes it
    what: str  # what it is for, one sentence
    lock: str  # the lock it takes, and on what
    privilege: str  # what the role needs for it
    file: str | None = None  # a collector SQL file, without .sql
    template: str | None = None
    composed: bool = False  # ``{name}`` marks a piece written in (else braces are literal)
    embeds: str = ""  # the application text it carries, if any
    when: str = ""  # "" : every run of its group sends it; else when it is sent
    facts: tuple[str, ...] = ()  # the facts of qadvisor.facts it reads

    @property
    def text(self) -> str:
        if self.file is not None:
            return query_text(self.file)
        assert self.template is not None
        return self.template

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """What the server logs of it: comment lines left out, whitespace runs as one space,
        a bound parameter as ``$n``, a composed piece as any text."""
        shape = normalise(self.text)
        pieces = re.split(r"(%\(\w+\)s|%s|%%|\{\{|\}\}|\{\w*\})", shape)
        out = []
        for piece in pieces:
            if piece in ("%s",) or re.fullmatch(r"%\(\w+\)s", piece):
                out.append(r"\$\d+")
            elif piece == "%%":
                out.append("%%?")
            elif self.composed and piece in ("{{", "}}"):
                out.append(re.escape(piece[0]))
            elif self.composed and re.fullmatch(r"\{\w*\}", piece):
                out.append(".*?")
            else:
                out.append(re.escape(piece))
        return re.compile("".join(out), re.S)

    def matches(self, logged: str) -> bool:
        return self.pattern.fullmatch(normalise(logged)) is not None


def normalise(text: str) -> str:
    """SQL text without its comment lines, its whitespace runs as single spaces."""
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split())


def _file(name: str, group: str, what: str, lock: str, privilege: str, **kw: object) -> Sent:
    return Sent(name, (group,), what, lock, privilege, file=name, **kw)  # type: ignore[arg-type]


_PGSS = "pg_read_all_stats (part of pg_monitor) to see other roles' statement texts"
_TENANT_LOCK = (
    "ACCESS SHARE on the queue table and the index it reads, until the COMMIT of its own "
    "read-only transaction; not sent when another session's lock conflicts"
)
_TENANT_PRIVILEGE = "USAGE on the schema, SELECT on the columns it reads"

SENT: tuple[Sent, ...] = (
    # --- opening the session (collect/connect.py) ---------------------------------------------
    Sent("session_limits", ("session",),
         "The timeouts the session starts with: the role's, the database's, the server's or "
         "PGOPTIONS' statement_timeout and idle_in_transaction_session_timeout; its "
         "lock_timeout is already qadvisor's, sent in the connection's startup packet (with "
         "default_transaction_read_only) so that this first read of a catalog cannot wait "
         "on another session's lock longer.",
         NO_LOCK, CONNECT,
         template="SELECT name, setting FROM pg_settings WHERE name = ANY(%s)"),
    Sent("session_role_lock_timeout", ("session",),
         "The lock_timeout ALTER ROLE or ALTER DATABASE sets for this role and database, "
         "which the startup packet's hides: the stricter one is kept.",
         NO_LOCK, "none beyond CONNECT (pg_db_role_setting is readable by every role)",
         template=ROLE_LOCK_TIMEOUT_SQL),
    Sent("session_catalog_locks", ("session",),
         "Who holds a system catalog locked, to name them when setting up the session met "
         "a lock timeout (read through functions only, which need no statistics to plan).",
         NO_LOCK, "pg_read_all_stats to see other roles' state and query",
         template=CATALOG_LOCKS_SQL,
         when="setting up the session waited out its lock_timeout on a system catalog"),
    Sent("session_settings", ("session",),
         "Pins the session read-only, with the stricter timeouts, and prints dates in ISO form; "
         "they end with the session.",
         "none", CONNECT,
         template="SELECT set_config('default_transaction_read_only', 'on', false),"
         " set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false),"
         " set_config('idle_in_transaction_session_timeout', %s, false),"
         " set_config('DateStyle', 'ISO', false)"),
    # --- a fleet (collect/databases.py) ------------------------------------------------------
    _file("databases", "fleet",
          "The server's databases other than templates, whether each accepts connections and "
          "whether the role may connect to it: the databases --all-databases checks.",
          NO_LOCK, "none beyond CONNECT (pg_database is readable by every role)",
          when="with --all-databases"),
    # --- qadvisor role (collect/role.py): the collection above, then -------------------------
    _file("role_exists", "role",
          "Whether the monitoring role exists already (then its setup grants, and does not "
          "create it).", NO_LOCK, CONNECT, when="qadvisor role"),
    # --- collection (collect/snapshot.py and the modules it calls) ----------------------------
    _file("server", "collection", "The server, the database, the role and its standing.",
          NO_LOCK, CONNECT),
    _file("cluster", "collection",
          "The cluster's system identifier: --history measures rates only between snapshots "
          "of one cluster.", NO_LOCK,
          "none beyond CONNECT (pg_control_system() is executable by every role)"),
    _file("settings", "collection", "The server settings the checks judge.", NO_LOCK, CONNECT),
    _file("role_settings", "collection",
          "Settings pinned with ALTER ROLE / ALTER DATABASE (a role's search_path).",
          NO_LOCK, "none beyond CONNECT (pg_db_role_setting is readable by every role)"),
    _file("locks", "collection",
          "Other sessions' relation locks, read before any table is opened.",
          NO_LOCK, "none beyond CONNECT (pg_read_all_stats shows other roles' queries)"),
    _file("pgss_schema", "collection", "Where pg_stat_statements is installed.", NO_LOCK,
          CONNECT),
    Sent("pgss_work_mem", ("collection",),
         "Raises work_mem to at least 64 MB for the one read of pg_stat_statements below, in "
         "its own read-only transaction: the view materialises every entry of the server with "
         "its text before filtering, and past work_mem it writes temporary files.",
         "none", CONNECT, template=PGSS_WORK_MEM_SQL,
         when="pg_stat_statements is installed in the database"),
    _file("pgss_entries", "collection",
          "This database's statements as pg_stat_statements recorded them, read once: the "
          "claims, the calls of claiming functions and the other statements on the queue "
          "tables are chosen from them.", NO_LOCK, _PGSS,
          composed=True, when="pg_stat_statements is installed in the database",
          facts=("statements",)),
    _file("pgss_info", "collection",
          "How many entries pg_stat_statements has evicted since its statistics were reset: "
          "with evictions, a statement an index fix would break may be missing, and the fix "
          "says so.", NO_LOCK, CONNECT, composed=True,
          when="pg_stat_statements 1.9 or later is installed in the database"),
    _file("functions", "collection",
          "Functions whose bodies may claim jobs (called by a recorded statement, or "
          "with SKIP LOCKED in their body).", NO_LOCK, CONNECT, composed=True),
    _file("function_relations", "collection",
          "The relations and types those function bodies name.", NO_LOCK, CONNECT,
          when="a function's body holds a claim"),
    _file("relations", "collection",
          "The relations the statements' table names can mean, in every schema.", NO_LOCK,
          CONNECT),
    _file("search_path", "collection", "The server's search_path.", NO_LOCK, CONNECT),
    _file("search_path_file", "collection",
          "The configured search_path, when qadvisor's own came from a role or database "
          "setting.", NO_LOCK, "pg_read_all_settings (part of pg_monitor)",
          when="qadvisor's role or the database sets search_path"),
    _file("candidate_columns", "collection",
          "Status-like and timestamp columns that can mark a row as waiting, of the tables "
          "that can be queues (claimed, named, with a partial index on a status-like column, "
          "a library's shape or an indexed status whose values read as waiting), with every "
          "value the catalog holds for them (enum labels, pg_stats common values and "
          "histogram bounds, the default, CHECK constraints).",
          "ACCESS SHARE on each such table with a CHECK constraint on one column while it is "
          "read (pg_get_expr); a table another session's lock would make it wait for is left "
          "without them",
          "none beyond CONNECT (by OID)", facts=("discovery",)),
    _file("partial_indexes", "collection",
          "Partial index predicates of the tables the candidate query kept (and the claimed "
          "and named ones).",
          "ACCESS SHARE on each table with a partial index while its predicate is read "
          "(pg_get_expr); a table another session's lock would make it wait for is left out",
          CONNECT),
    _file("resolve_tables", "collection",
          "Resolves a table name as PostgreSQL would, from the catalogs alone.", NO_LOCK,
          CONNECT, when="`--table` names a table, or a round-robin claim names its rotation "
          "table"),
    _file("access", "collection",
          "The role's privileges on the queue tables (and a rotation table), by OID.",
          NO_LOCK, CONNECT, when="a queue is found"),
    _file("columns", "collection",
          "The queue tables' columns (and a round-robin claim's rotation table's).", NO_LOCK,
          CONNECT,
          when="a queue is found", facts=("table_facts",)),
    _file("indexes", "collection",
          "The queue tables' indexes, and those of a partitioned queue table's partitions: "
          "definitions, predicates, sizes and scans (and a round-robin claim's rotation "
          "table's).",
          "ACCESS SHARE on each queue table and index it reads; not sent for a table "
          "another session's lock would make it wait for (sizes estimated from relpages)",
          CONNECT, when="a queue is found", facts=("index_definitions", "sizes")),
    Sent("tables", ("collection", "sample"),
         "The queue tables' catalog facts and counters, and those of every partition of a "
         "partitioned one (its partition tree read from pg_inherits); after `--sample` "
         "seconds, the counters again (no size read, so no table is opened).",
         "ACCESS SHARE on each queue table or partition (pg_table_size) that no other "
         "session's lock conflicts with; none for the second read", CONNECT,
         file="tables", when="a queue is found",
         facts=("table_facts", "sizes", "counters")),
    _file("column_stats", "collection",
          "pg_stats of the queue tables' columns, and of a partitioned one's partitions "
          "(only those the role may read).", NO_LOCK,
          "SELECT on the column (pg_stats shows no other)", when="a queue is found",
          facts=("live_set", "archive_age")),
    _file("id_sequences", "collection",
          "The sequences that number the queue tables' ids: type, maximum, last value.",
          NO_LOCK, "SELECT or USAGE on the sequence for its last value (else it is NULL)",
          when="a queue is found", facts=("id_sequences",)),
    _file("horizon", "collection", "What holds back the xmin horizon.", NO_LOCK,
          "pg_read_all_stats to see other roles' sessions in full", facts=("horizon",)),
    _file("horizon_hidden", "collection",
          "How many sessions hold the horizon with details this role may not see.",
          NO_LOCK, CONNECT),
    _file("tenant_counts_index", "collection",
          "Waiting rows per tenant, one descent of the per-tenant partial index each.",
          _TENANT_LOCK, _TENANT_PRIVILEGE, composed=True,
          when="a queue table has a tenant column and a partial index led by it on the "
          "live predicate", facts=("tenant_counts",)),
    _file("tenant_counts_sample", "collection",
          "Waiting rows per tenant from a bounded read of the waiting rows.", _TENANT_LOCK,
          _TENANT_PRIVILEGE, composed=True,
          when="a queue table has a tenant column and no per-tenant partial index, but an "
          "index that reaches the waiting rows", facts=("tenant_counts",)),
    _file("tenant_rotation_probe", "collection",
          "The rotation table's size and idle tenants, one index descent per rotation row.",
          _TENANT_LOCK.replace("the queue table", "the rotation table, the queue table"),
          _TENANT_PRIVILEGE + ", and SELECT on the rotation table", composed=True,
          when="a round-robin claim names a rotation table and a per-tenant partial index "
          "exists", facts=("tenant_rotation",)),
    _file("tenant_rotation_list", "collection",
          "The rotation table's size and first tenants.",
          _TENANT_LOCK.replace("the queue table", "the rotation table"),
          "USAGE on its schema and SELECT on the rotation table", composed=True,
          when="a round-robin claim names a rotation table and no per-tenant partial "
          "index exists", facts=("tenant_rotation",)),
    _file("tenant_durations", "collection",
          "The mean run time of the latest finished jobs, read backwards through an index.",
          _TENANT_LOCK, _TENANT_PRIVILEGE, composed=True,
          when="a queue table with a tenant column has start and finish columns and an "
          "index led by the finish column", facts=("tenant_counts",)),
    Sent("stakeholder_search_path", ("collection",),
         "The search_path of the role that ran a recorded statement, for this transaction.",
         "none", CONNECT, template="SELECT set_config('search_path', %s, true)",
         when="a recorded statement names a queue table"),
    Sent("stakeholder_prepare", ("collection",),
         "Prepares a recorded statement that names a queue table, to read which indexes "
         "its generic plan uses. Not sent for a text PREPARE cannot take (pg_stat_statements "
         "records `interval '1 hour'` as `interval $3`).", PLAN_LOCK,
         PLAN_PRIVILEGE + " (read beforehand by OID: a statement the role may not plan is "
         "not sent)",
         template=f'PREPARE "{STAKEHOLDER}" AS {{statement}}', composed=True,
         embeds="the statement's text as pg_stat_statements recorded it",
         when="a recorded statement names a queue table"),
    Sent("stakeholder_parameters", ("collection",), "How many parameters it takes.",
         NO_LOCK, CONNECT,
         template="SELECT cardinality(parameter_types) FROM pg_prepared_statements"
         " WHERE name = %s", when="a recorded statement names a queue table"),
    Sent("generic_plan_mode", ("collection", "planning"),
         "Makes EXECUTE plan generically, for this transaction.", "none", CONNECT,
         template="SET LOCAL plan_cache_mode = force_generic_plan",
         when="a recorded statement names a queue table (and, before PostgreSQL 16, a "
         "claim with parameters is planned)"),
    Sent("stakeholder_explain", ("collection",), "Its generic plan, every parameter NULL.",
         PLAN_LOCK, PLAN_PRIVILEGE,
         template=f'EXPLAIN (FORMAT JSON) EXECUTE "{STAKEHOLDER}"{{nulls}}',
         composed=True, when="a recorded statement names a queue table"),
    Sent("stakeholder_deallocate", ("collection",), "Removes the prepared statement.",
         "none", CONNECT, template=f'DEALLOCATE "{STAKEHOLDER}"',
         when="a recorded statement names a queue table"),
    Sent("planner_switch_off", ("collection", "planning"),
         "Switches off a plan type for this transaction (enable_seqscan, enable_bitmapscan, "
         "enable_sort), so a read that would scan the archive fails on statement_timeout "
         "instead, and a probe answers for one index.", "none", CONNECT,
         template="SET LOCAL {setting} = off", composed=True,
         when="a tenant read or a probe is sent"),
    # --- planning (collect/planner.py) ----------------------------------------------------
    Sent("plan_without_row_locks", ("planning",),
         "Switches off index-only and parallel scans for this transaction, which a row lock "
         "rules out: the claim's scan planned without its row locks is the scan its LockRows "
         "reads.", "none", CONNECT,
         template="SET LOCAL {setting} = 0", composed=True,
         when="a claim is planned without its row locks (a role without UPDATE on the queue "
         "table, as docs/privileges.md's smallest role, and qadvisor role)"),
    Sent("plan_search_path", ("planning", "analyze"),
         "The search_path the statement's names were resolved under, for this transaction.",
         "none", CONNECT, template="SELECT set_config('search_path', {path}, true)",
         composed=True, when="a claim is planned with a known search_path"),
    Sent("plan_prepare", ("planning",),
         "Prepares a claim, its parameters typed from the queue table's columns where they "
         "are compared with one.", PLAN_LOCK, PLAN_PRIVILEGE,
         template=f'PREPARE "{PREPARED_NAME}"{{types}} AS {{statement}}', composed=True,
         embeds="the claim's text (from pg_stat_statements, a function body, --query or "
         "--query-file), `LIMIT $n` given back its 1", facts=("plans",)),
    Sent("plan_parameter_types", ("planning",),
         "The types the server resolved for the parameters (an enum's labels, a domain's "
         "base type).", NO_LOCK, CONNECT,
         template=PARAMETER_TYPES_SQL.format(name=f"'{PREPARED_NAME}'"),
         when="the claim has parameters"),
    Sent("custom_plan_mode", ("planning",), "Makes EXECUTE plan with the values given.",
         "none", CONNECT, template="SET LOCAL plan_cache_mode = force_custom_plan"),
    Sent("plan_explain_execute", ("planning",),
         "The custom plan (and before PostgreSQL 16 the generic one) with representative "
         "values qadvisor wrote as literals.", PLAN_LOCK, PLAN_PRIVILEGE,
         template=f'EXPLAIN (VERBOSE, FORMAT JSON) EXECUTE "{PREPARED_NAME}"{{values}}',
         composed=True, facts=("plans",)),
    Sent("plan_explain_generic", ("planning",), "The generic plan, from the text itself.",
         PLAN_LOCK, PLAN_PRIVILEGE,
         template="EXPLAIN (GENERIC_PLAN, VERBOSE, FORMAT JSON) {statement}", composed=True,
         embeds="the claim's text, as PREPARE took it",
         when="PostgreSQL 16 or later, and the claim has parameters", facts=("plans",)),
    Sent("plan_deallocate", ("planning",),
         "Removes the prepared statement (a prepared statement outlives a rollback).",
         "none", CONNECT, template=f'DEALLOCATE "{PREPARED_NAME}"'),
    Sent("plan_probe", ("planning",),
         "Asks the planner whether the claim's conditions can use one partial index: the "
         "claim's FROM and WHERE, ordered by the index's key, every other plan type off.",
         "ACCESS SHARE on the tables the probe reads and their indexes, to the ROLLBACK",
         "SELECT on the columns the claim filters on, USAGE on the schema",
         template="EXPLAIN (FORMAT JSON) SELECT 1 FROM {from_where} ORDER BY {key} LIMIT 1",
         composed=True, embeds="the claim's FROM and WHERE, its parameters as literals",
         when="the queue table has a partial index on a column the claim filters on",
         facts=("plans",)),
    # --- --analyze (collect/planner.py) -------------------------------------------------------
    Sent("analyze_lock_timeout", ("analyze",),
         f"A lock timeout of {ANALYZE_LOCK_TIMEOUT_MS} ms (or the session's, if stricter) for "
         "this transaction.",
         NO_LOCK, CONNECT,
         template="SELECT set_config('lock_timeout', least(nullif(setting::int, 0),"
         f" {ANALYZE_LOCK_TIMEOUT_MS})::text"
         " || 'ms', true) FROM pg_settings WHERE name = 'lock_timeout'"),
    Sent("analyze_uncounted", ("analyze",),
         "Counting off for this transaction where the role may set track_counts, so the scan "
         "below moves no read counter (idx_scan, idx_tup_fetch) of the application's tables.",
         NO_LOCK, "SET on track_counts (a superuser, or GRANT SET ON PARAMETER) to switch "
         "it off; without it nothing is set",
         template=UNCOUNTED_SQL, when="PostgreSQL 15 or later"),
    Sent("analyze_uncounted_14", ("analyze",),
         "The same on PostgreSQL 14, where only a superuser may set track_counts.",
         NO_LOCK, "superuser to switch it off; without it nothing is set",
         template=UNCOUNTED_SQL_14, when="PostgreSQL 14"),
    Sent("analyze_scan", ("analyze",),
         "Runs what finds the claim's rows: its SELECT with every FOR UPDATE/SHARE removed "
         "and the custom plan's values written in, in a read-only transaction rolled back. "
         "An UPDATE or DELETE is never executed.",
         "ACCESS SHARE on the tables it reads and their indexes, to the ROLLBACK (waiting "
         "at most the lock timeout above); no row lock", "SELECT on the columns it reads, "
         "USAGE on the schemas",
         template="EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) {scan}", composed=True,
         embeds="the claim's row-finding SELECT, printed from its parse tree without its "
         "locking clauses", when="`--analyze`, and the claim finds its rows in a SELECT"),
    # --- transaction control (psycopg: Connection.transaction) --------------------------------
    Sent("begin", ("transaction",),
         "Opens a transaction: read-only, since the session's default is.", "none", CONNECT,
         template="BEGIN"),
    Sent("rollback", ("transaction",), "Ends a planning transaction: nothing it did stays.",
         "none", CONNECT, template="ROLLBACK"),
    Sent("commit", ("transaction",), "Ends a read-only tenant read.", "none", CONNECT,
         template="COMMIT", when="a queue table has a tenant column"),
    Sent("savepoint", ("transaction",), "Around each probe, so a failed one costs only itself.",
         "none", CONNECT, template='SAVEPOINT "_pg3_{n}"', composed=True,
         when="a probe is sent"),
    Sent("release_savepoint", ("transaction",), "After a probe that worked.", "none",
         CONNECT, template='RELEASE "_pg3_{n}"', composed=True, when="a probe is sent"),
    Sent("rollback_to_savepoint", ("transaction",), "After a probe that failed.", "none",
         CONNECT, template='ROLLBACK TO SAVEPOINT "_pg3_{n}"', composed=True,
         when="a probe fails"),
)  # fmt: skip

BY_NAME: dict[str, Sent] = {s.name: s for s in SENT}


def matching(logged: str) -> list[Sent]:
    """The entries a statement the server logged is one of (none: it is not listed)."""
    return [s for s in SENT if s.matches(logged)]
