"""Plain data: the snapshot collected from a server, and the findings checks derive from it.

A snapshot is serializable (``to_dict`` / ``from_dict``) so that it can be saved with
``qadvisor snapshot`` and checked again later without a server. Nothing here talks to
PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from qadvisor.statement import DequeueStatement, PredicateOp

SNAPSHOT_FORMAT = 1

# The closed sets of the snapshot and the findings; Snapshot.from_dict refuses other values.
LiveOp = Literal[
    "in", "not in", "is null", "is not null", "true", "false", "<", "<=", ">", ">=", "all", "or"
]
HolderKind = Literal["transaction", "prepared transaction", "replication slot", "standby"]
TargetKind = Literal["table", "index", "statement", "server", "database", "horizon"]
# "safe": can run as printed on a live system; "review": read the notes first.
FixSafety = Literal["safe", "review"]
# A fix's step: "migration", DDL or a setting to run as printed; "rewrite", a statement of
# the application's to change in its code (running it would do the application's work);
# "review", a statement for a person to judge before running it (it ends a session, deletes).
StepKind = Literal["migration", "rewrite", "review"]
# The strongest table lock a step takes, as PostgreSQL's "Explicit Locking" page names the
# modes; "none": no table lock (a setting, a function call, a new table nobody uses yet);
# "unknown": a pack's plain statement, whose lock qadvisor was not told.
StepLock = Literal[
    "none", "ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE",
    "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE", "unknown",
]  # fmt: skip


class Severity(enum.IntEnum):
    """Ordered so that ``max()`` and comparisons with ``--fail-on`` work."""

    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}: use critical, warning or info") from None


# --- snapshot -------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerInfo:
    version: str
    version_num: int
    database: str
    user: str
    is_superuser: bool = False
    # In recovery (a hot standby): the catalog is the primary's, the activity counters,
    # pg_stat_statements and sessions are the standby's own, and no DDL runs here.
    is_standby: bool = False
    # The server's clock when the snapshot was read, and when this database's statistics were
    # last reset (None: never, so the counters' start is unknown): rates of counters.
    collected_at: str | None = None
    stats_reset: str | None = None
    # Which cluster and database this is, and since when the server runs: a snapshot of
    # another database, or one taken before a restart (crash recovery resets the counters),
    # is not measured against this one (--history). None: not read (an older snapshot).
    system_identifier: str | None = None
    database_oid: int | None = None
    started_at: str | None = None


@dataclass(frozen=True)
class RoleSetting:
    """A GUC set with ALTER DATABASE / ALTER ROLE (pg_db_role_setting)."""

    database: str | None
    role: str | None
    name: str
    value: str


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool = False
    enum_labels: tuple[str, ...] = ()
    # A stored generated column's expression: an update that sets a column it reads changes
    # this column too.
    generated: str | None = None


@dataclass(frozen=True)
class ColumnStats:
    """One row of pg_stats, reduced to what estimates need."""

    column: str
    null_frac: float
    n_distinct: float
    avg_width: int
    most_common_vals: tuple[str, ...] | None = None
    most_common_freqs: tuple[float, ...] | None = None
    # The largest value ANALYZE saw (the last histogram bound, else the largest common value),
    # as text; read for integer columns only.
    upper_bound: str | None = None
    # The smallest value ANALYZE saw: of a date or timestamp column in UTC as PostgreSQL
    # prints a timestamp, of an integer column the number (epoch time, when it is one).
    lower_bound: str | None = None
    # pg_stats' histogram_bounds (as text; not of wide columns) and correlation.
    histogram_bounds: tuple[str, ...] | None = None
    correlation: float | None = None


@dataclass(frozen=True)
class Index:
    name: str
    definition: str
    columns: tuple[str | None, ...]  # key columns in order; None for an expression
    predicate: str | None
    is_unique: bool
    is_primary: bool
    is_constraint: bool
    is_valid: bool
    bytes: int
    reltuples: float
    idx_scan: int | None
    idx_tup_read: int | None
    idx_tup_fetch: int | None
    include_columns: tuple[str, ...] = ()
    # Per key column: stored in descending order (pg_index.indoption).
    descending: tuple[bool, ...] = ()
    # None: measured with pg_relation_size; else how ``bytes`` was estimated instead (another
    # session's lock kept the index from being opened).
    bytes_source: str | None = None
    # pg_index.indisready: writes maintain it. False only for an index whose concurrent build
    # stopped before it was filled (a failed CREATE INDEX CONCURRENTLY's first phases).
    is_ready: bool = True
    # An index of a partition: the name of the partitioned queue table's index it is a
    # partition of (None: an index of this partition alone, or of a table that is none).
    partition_of: str | None = None

    @property
    def is_partial(self) -> bool:
        return self.predicate is not None


@dataclass(frozen=True)
class TableStats:
    """Cumulative counters of pg_stat_user_tables; timestamps are ISO text."""

    n_live_tup: int = 0
    n_dead_tup: int = 0
    n_tup_ins: int = 0
    n_tup_upd: int = 0
    n_tup_del: int = 0
    n_tup_hot_upd: int = 0
    n_mod_since_analyze: int = 0
    n_ins_since_vacuum: int = 0
    last_vacuum: str | None = None
    last_autovacuum: str | None = None
    last_analyze: str | None = None
    last_autoanalyze: str | None = None
    vacuum_count: int = 0
    autovacuum_count: int = 0
    analyze_count: int = 0
    autoanalyze_count: int = 0


@dataclass(frozen=True)
class IdSequence:
    """A sequence that numbers a column of a queue table (serial or identity), from
    pg_sequence by OID; ``last_value`` is None when the role may not read it or it was never
    used."""

    column: str
    column_type: str  # format_type of the column
    schema: str
    name: str
    data_type: str  # the sequence's own type: its AS
    max_value: int
    increment: int
    last_value: int | None = None
    identity: bool = False  # GENERATED ... AS IDENTITY, else a serial's owned sequence
    readable: bool = True  # the role may read its last value (SELECT or USAGE on it)

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    reltuples: float
    relpages: int
    bytes: int
    reloptions: dict[str, str]
    stats: TableStats
    columns: tuple[Column, ...]
    indexes: tuple[Index, ...]
    column_stats: tuple[ColumnStats, ...] = ()
    # pg_stats shows a table's rows only to roles that may SELECT its columns.
    stats_visible: bool = True
    # None: measured with pg_table_size; else how ``bytes`` was estimated instead.
    bytes_source: str | None = None
    id_sequences: tuple[IdSequence, ...] = ()
    # A partitioned table (relkind 'p'): its partition key as pg_get_partkeydef prints it,
    # "RANGE (created_at)". It holds no rows itself: the sizes, reltuples, counters and
    # indexes above are its leaf partitions' summed (derive/partitions.py says how).
    partition_key: str | None = None
    # Of a partitioned queue table: every table below it, each with its own facts; a leaf
    # holds rows, one with a ``partition_key`` of its own is partitioned again.
    partitions: tuple[Table, ...] = ()
    # Of a partition: the table it is a partition of ("schema.table") and its bound as
    # pg_get_expr prints it ("FOR VALUES FROM ('2026-11-08 00:00:00+00') TO (...)", "DEFAULT").
    partition_of: str | None = None
    partition_bound: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def leaves(self) -> tuple[Table, ...]:
        """The partitions that hold its rows (none for a table that is not partitioned)."""
        return tuple(p for p in self.partitions if p.partition_key is None)

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary key's columns in order; () without one (or with an expression)."""
        pk = next((i for i in self.indexes if i.is_primary), None)
        if pk is None or not all(pk.columns):
            return ()
        return tuple(c for c in pk.columns if c is not None)

    def stats_of(self, column: str) -> ColumnStats | None:
        return next((s for s in self.column_stats if s.column == column), None)


@dataclass(frozen=True)
class LivePredicate:
    """What makes a row part of the live set (claimable), as column + operator + values.

    ``op`` is one of: "in" / "not in" (``values`` are the values of ``column`` that are /
    are not live), "is null", "true" / "false" (a boolean column), or a range "<", "<=",
    ">", ">=" with one value (an enum whose order is the job's life cycle:
    ``state < 'active'``), or "all" (``column`` is empty): every row is live, the set of a
    claim without a condition (a table a job is moved into when it can run and deleted from
    when it is claimed). A check that reads the live column reads none then, the live rows
    are the table's, and an index on the live set is a plain one.

    "or" (``column`` is empty) is a union of ``parts``, each a predicate on one column: a
    design with no status column where which of its timestamps are set says where a job is,
    and whose claim also takes jobs whose lock went stale (``next_run_at IS NOT NULL OR
    locked_at IS NOT NULL``). A part may be "is not null", which stands alone nowhere else.
    """

    column: str
    op: LiveOp
    values: tuple[str, ...] = ()
    # Where it came from: "partial index <name>", "status values", "queue library <name>".
    source: str = ""
    parts: tuple[LivePredicate, ...] = ()

    @classmethod
    def every_row(cls, source: str = "") -> LivePredicate:
        return cls("", "all", (), source)

    @classmethod
    def any_of(cls, parts: tuple[LivePredicate, ...], source: str = "") -> LivePredicate:
        return cls("", "or", (), source, parts)

    @property
    def whole_table(self) -> bool:
        return self.op == "all"

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns it reads: none for the whole table, each part's for a union."""
        if self.op == "or":
            return tuple(dict.fromkeys(p.column for p in self.parts))
        return () if self.whole_table else (self.column,)


def live_op(op: PredicateOp) -> LiveOp | None:
    """The LivePredicate operator a statement's condition operator means: ``=`` and ``ANY``
    are IN (one value or several), ``<>`` is NOT IN; IN, NOT IN, IS NULL, the booleans and
    the ranges are themselves; None for the rest (IS NOT NULL, other forms)."""
    if op in ("=", "any"):
        return "in"
    if op == "<>":
        return "not in"
    if op in ("in", "not in", "is null", "true", "false", "<", "<=", ">", ">="):
        return op
    return None


@dataclass(frozen=True)
class Rejected:
    """A table that looked like a queue to discovery but was not taken, and why."""

    schema: str
    table: str
    reason: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Queue:
    schema: str
    table: str
    live: LivePredicate | None
    reason: str

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Sample:
    """The counters again, ``seconds`` after the snapshot, for rates."""

    seconds: float
    tables: dict[str, TableStats]  # by "schema.table"


@dataclass(frozen=True)
class PlanNode:
    """One node of an EXPLAIN (FORMAT JSON) plan, reduced to what checks read."""

    node_type: str
    relation: str | None = None
    schema: str | None = None
    alias: str | None = None
    index: str | None = None
    index_cond: str | None = None
    filter: str | None = None
    sort_key: tuple[str, ...] = ()
    # An Incremental Sort's leading sort keys that its input already arrives in.
    presorted_key: tuple[str, ...] = ()
    parent_relationship: str | None = None
    subplan_name: str | None = None
    startup_cost: float = 0.0
    total_cost: float = 0.0
    plan_rows: float = 0.0
    # Filled only by --analyze (EXPLAIN ANALYZE in a rolled-back transaction).
    actual_rows: float | None = None
    actual_loops: float | None = None
    actual_total_ms: float | None = None
    rows_removed_by_filter: float | None = None
    shared_blocks: int | None = None
    children: tuple[PlanNode, ...] = ()
    # A scan of a partition of a partitioned queue table: ``relation`` and ``index`` name the
    # queue table and its index, these the partition and the partition's index EXPLAIN named.
    partition: str | None = None
    partition_index: str | None = None
    # An Append or Merge Append: the partitions the executor pruned when it started (run-time
    # partition pruning, "Subplans Removed"); None when EXPLAIN said nothing of it.
    subplans_removed: int | None = None

    def walk(self) -> typing.Iterator[PlanNode]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True)
class Binding:
    """One plausible set of values for parameters pg_stat_statements hid, and its custom
    plan: another hypothesis than the statement's own ``custom_values``."""

    binding: str  # where the values came from: "state: 'available' (the queue's live values)"
    custom_values: dict[str, str] = field(default_factory=dict)
    custom_plan: PlanNode | None = None
    index_probes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Statement:
    """A dequeue statement found in pg_stat_statements or given with --query / --query-file."""

    source: str  # "pg_stat_statements", "--query", or "path/to/file.sql:12"
    text: str  # as found
    parsed: DequeueStatement | None = None
    # pg_stat_statements turns literals into $n too, so its text cannot tell a literal status
    # from a bound one: findings from such text alone are latent unless the server confirms.
    from_normalised_text: bool = False
    queryid: int | None = None
    role: str | None = None  # the role that ran it (pg_stat_statements.userid)
    roles: tuple[str, ...] = ()  # every role that ran it
    calls: int | None = None
    mean_exec_ms: float | None = None
    shared_blks_per_call: float | None = None
    plans_per_call: float | None = None  # with pg_stat_statements.track_planning on
    # Rows returned or changed per call (pg_stat_statements' rows / calls): 0 for a claim
    # that found nothing to take
    rows_per_call: float | None = None
    # Literal values put in place of parameters for the custom plan: {"1": "'pending'"}.
    custom_values: dict[str, str] = field(default_factory=dict)
    custom_plan: PlanNode | None = None
    generic_plan: PlanNode | None = None
    analyzed_plan: PlanNode | None = None  # --analyze: custom plan with actual numbers
    analyzed_ms: float | None = None
    plan_error: str | None = None  # why a plan could not be made
    # What of it was planned when the role could not plan it whole (its locking level alone,
    # without its row locks or its select list), and why; None: planned as written.
    planned_as: str | None = None
    # Its shape's hash (dequeue.fingerprint): the same for pg_stat_statements text, a file's
    # literal text, a restored copy and another major version. Finding keys use it.
    fingerprint: str = ""
    # The queue ("schema.table") it is judged against, after resolving its names.
    queue: str | None = None
    # Each table name as written ("jobs", "app.tenants") -> the "schema.table" it means.
    names: dict[str, str] = field(default_factory=dict)
    # The unique keys (column lists of valid, non-partial unique indexes) of each table it
    # reads, by "schema.table", from the catalog: whether a row it locks is the job's own.
    unique_keys: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    search_path: str | None = None  # the search_path it was planned under
    resolved_by: str | None = None  # how its names were resolved (whose search_path)
    toplevel: bool | None = None  # pg_stat_statements: run by the client, not nested
    line: int | None = None  # line of a --query-file where it starts
    function: str | None = None  # the function whose body holds it
    # Types of its parameters for PREPARE, when known beforehand (a function's variables).
    param_types: tuple[str, ...] = ()
    # The planner asked, per partial index of the queue table: can the statement's conditions
    # use it? "proved", "not proved", or "undecided: ..." (see collect/planner.py).
    index_probes: dict[str, str] = field(default_factory=dict)
    # Where custom_values came from where the text hid them and the evidence offered values
    # for the column (a partial index's predicate, the live values); "" when nothing was
    # hypothesised.
    binding: str = ""
    # The other plausible bindings, each planned: a check warns only when all have the
    # problem.
    other_bindings: tuple[Binding, ...] = ()


@dataclass(frozen=True)
class LeftOut:
    """A row-locking statement that was not judged as a claim, and why."""

    source: str
    text: str
    reason: str
    queue: str | None = None  # the table it locks, when resolved


@dataclass(frozen=True)
class Stakeholder:
    """A statement the server recorded on a queue table that is not a claim (a purge, a reaper,
    a listing): what a fix that drops or replaces an index must not break. ``indexes_used``
    are the queue table's indexes its generic plan reads; ``plan_error`` says why it could
    not be planned (then nobody knows which indexes it needs)."""

    source: str
    text: str
    queue: str  # "schema.table" of the queue table it names
    queryid: int | None = None
    calls: int | None = None
    mean_exec_ms: float | None = None
    shared_blks_per_call: float | None = None
    indexes_used: tuple[str, ...] = ()
    plan_error: str | None = None
    rows: int | None = None  # rows it returned or changed, summed over its calls


@dataclass(frozen=True)
class TenantCount:
    tenant: str
    rows: int


@dataclass(frozen=True)
class TenantFacts:
    """Per-tenant shape of a queue's live set, from bounded queries that use an index."""

    schema: str
    table: str
    tenant_column: str
    # Live rows per tenant, largest first, counted with a cap per tenant (see ``count_cap``).
    live_by_tenant: tuple[TenantCount, ...] = ()
    count_cap: int | None = None
    tenants_counted: int = 0  # tenants with live rows seen (at most ``tenant_limit``)
    # The rotation table of a round-robin dequeue (the outer side of the LATERAL).
    rotation_schema: str | None = None
    rotation_table: str | None = None
    rotation_rows: int | None = None
    idle_tenants: int | None = None  # rotation rows whose tenant has nothing live
    # Mean seconds between start and finish of recent finished jobs, when the table has them.
    mean_job_seconds: float | None = None
    error: str | None = None
    # Added for the tenant checks (optional, so older snapshots still load):
    # True when every live row was counted (no per-tenant cap, tenant limit or scan cap hit).
    counts_complete: bool | None = None
    rotation_probed: int | None = None  # rotation rows checked for idleness (capped)
    # The rotation table's shape (--prove builds a copy of it): its columns, and its indexes'
    # definitions.
    rotation_columns: tuple[Column, ...] = ()
    rotation_indexes: tuple[str, ...] = ()
    rotation_tenant_column: str | None = None  # the rotation's column the claim joins on
    duration_jobs: int | None = None  # finished jobs ``mean_job_seconds`` was taken over
    # How the facts were collected and what was left out, for the findings' evidence.
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class HorizonHolder:
    """Something that keeps VACUUM from removing dead rows of this database's tables."""

    kind: HolderKind
    name: str  # pid, gid, slot name or standby application name
    xmin_age: int | None  # transactions started since its snapshot (age of its xmin)
    age_s: float | None = None  # seconds since the transaction started / was prepared
    state: str | None = None  # "idle in transaction", "active", "inactive" (slot)...
    application_name: str | None = None
    user: str | None = None


@dataclass(frozen=True)
class HiddenFact:
    """A fact the collector did not read for one queue (``queue`` "schema.table") or for the
    whole database (None): hidden from the role (``grants`` are the GRANTs that show it) or
    behind another session's lock (``blocker_pid``; None for a prepared transaction).

    ``fact`` is a name of ``qadvisor.facts.FACTS``; a check that requires it reports a skip
    for that queue with ``reason``.
    """

    fact: str
    queue: str | None
    reason: str
    grants: tuple[str, ...] = ()
    blocker_pid: int | None = None


@dataclass(frozen=True)
class InlineIgnore:
    """``-- qadvisor: ignore CODE`` in a --query-file, on or directly above a statement."""

    source: str  # the statement's source, "sql/claim.sql:12"
    codes: tuple[str, ...]
    line: int  # the line of the comment


@dataclass(frozen=True)
class Reading:
    """A queue table's figures as one snapshot read them: what --history measures rates
    between and draws over time."""

    reltuples: float
    bytes: int
    stats: TableStats
    index_bytes: dict[str, int] = field(default_factory=dict)
    # Each id sequence ("schema.name") -> its last value, where the role could read it.
    id_values: dict[str, int] = field(default_factory=dict)
    # The autovacuum trigger (dead tuples) under that snapshot's settings and reloptions.
    vacuum_trigger: float | None = None


@dataclass(frozen=True)
class Earlier:
    """An earlier snapshot of the same database, from the --history directory."""

    source: str  # its file's name in the directory
    collected_at: str  # the server's clock when it was read (ISO)
    tables: dict[str, Reading]  # by "schema.table"


@dataclass(frozen=True)
class NotMixedIn:
    """A file of the --history directory that is not measured against this snapshot, and
    why (another database, a restart or a statistics reset since, not a snapshot)."""

    source: str
    reason: str


@dataclass(frozen=True)
class History:
    """The earlier snapshots --history read beside this one: those whose counters run on
    into this snapshot's (same cluster and database, no restart or reset between), oldest
    first, and those left out with why."""

    directory: str
    earlier: tuple[Earlier, ...] = ()
    not_mixed_in: tuple[NotMixedIn, ...] = ()

    def summary(self) -> str:
        """ "3 earlier snapshots in DIR, from 2026-12-01T09:00:00Z; 1 not mixed in (...)"."""
        n = len(self.earlier)
        text = f"{n} earlier snapshot{'' if n == 1 else 's'} in {self.directory}"
        if self.earlier:
            text += f", from {self.earlier[0].collected_at}"
        if self.not_mixed_in:
            why = "; ".join(f"{m.source}: {m.reason}" for m in self.not_mixed_in[-3:])
            text += f"; {len(self.not_mixed_in)} not mixed in ({why})"
        return text


@dataclass(frozen=True)
class Snapshot:
    server: ServerInfo
    settings: dict[str, str]
    role_settings: tuple[RoleSetting, ...]
    queues: tuple[Queue, ...]
    tables: tuple[Table, ...]
    sample: Sample | None = None
    statements: tuple[Statement, ...] = ()
    tenants: tuple[TenantFacts, ...] = ()
    horizon: tuple[HorizonHolder, ...] = ()
    # Tables that looked like queues but were not taken, with the reason.
    rejected: tuple[Rejected, ...] = ()
    # Row-locking statements seen but not judged as claims (foreign-key checks, key locks).
    left_out: tuple[LeftOut, ...] = ()
    # Maintenance statements on the queue tables (reapers, pruners, movers: their
    # ``parsed.maintenance`` says which and why), with their pg_stat_statements counters.
    # They lock like claims but take no job for a worker: no claim check judges them, and
    # they make no table a queue.
    maintenance: tuple[Statement, ...] = ()
    # Other recorded statements on the queue tables, with the indexes their plans read: what
    # an index fix must keep working.
    stakeholders: tuple[Stakeholder, ...] = ()
    # Facts that could not be collected, with the reason: a check that needs one reports a
    # skip with it. Keyed by unavailable_key(fact, queue), read by ``unavailable_for``.
    unavailable: dict[str, str] = field(default_factory=dict)
    format: int = SNAPSHOT_FORMAT
    # Facts hidden from the role or behind another session's lock, with the GRANT or the lock.
    hidden: tuple[HiddenFact, ...] = ()
    # The application's own ignores, read from its --query-file comments at collection, so a
    # saved snapshot keeps them.
    inline_ignores: tuple[InlineIgnore, ...] = ()
    # Why pg_stat_statements may not hold every statement the database ran (it evicted entries
    # to make room, or cannot say whether it did): a fix cannot know it breaks none of them.
    # None when it evicted none (or is not read: see ``unavailable``).
    pgss_evicted: str | None = None
    # When pg_stat_statements' statistics were last reset (ISO; None: unknown or not read):
    # its calls are counted since then, the activity counters since ``server.stats_reset``.
    pgss_since: str | None = None
    # --history: the earlier snapshots of this database read beside this one; None without
    # it. A snapshot is saved to the directory without it.
    history: History | None = None

    def unavailable_for(self, fact: str) -> dict[str | None, str]:
        """Why ``fact`` could not be collected, by the queue it is missing for ("schema.table";
        None: the whole database)."""
        out: dict[str | None, str] = {}
        for key, reason in self.unavailable.items():
            name, _, queue = key.partition(_QUEUE_OF_FACT)
            if name == fact:
                out[queue or None] = reason
        return out

    def table(self, schema: str, name: str) -> Table | None:
        return next((t for t in self.tables if t.schema == schema and t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
            raise ValueError("its 'format' is missing or unknown")
        return _build(cls, data)


# --- findings -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    # "horizon": what holds the xmin horizon back (QA202), named by its kind and name.
    kind: TargetKind
    schema: str | None
    table: str | None
    name: str | None

    @property
    def key_part(self) -> str:
        parts = [p for p in (self.schema, self.name or self.table) if p]
        return ".".join(parts) if parts else self.kind


# qadvisor's placeholders open with a lower-case word right after '<', which SQL's comparisons,
# printed with a space after the operator, never do.
_UNFILLED = re.compile(r"<[a-z][\w$ ,.'-]*>")


@dataclass(frozen=True)
class FixStep:
    """One step of a fix. ``sql`` is the statement as printed: for a rewrite, the statement
    as it should be, with ``before`` the statement as it is and ``source`` where it was seen
    (a statement label, ``file.sql:12``, a function)."""

    kind: StepKind
    sql: str
    lock: StepLock = "unknown"
    # May it run inside a transaction block? None: not known (a pack's plain statement).
    in_transaction_block: bool | None = None
    note: str = ""
    before: str | None = None
    source: str | None = None

    @property
    def left_to_fill(self) -> tuple[str, ...]:
        """The parts of ``sql`` left for the DBA or the application to write (``<value of
        $2>``, ``<condition true only for finished rows>``), each once: a step that holds one
        never runs as printed, and nothing fills it with a guess."""
        return tuple(dict.fromkeys(m.group(0) for m in _UNFILLED.finditer(self.sql)))


@dataclass(frozen=True)
class Fix:
    """What to do about a finding: its steps, with notes on the whole.

    ``statements`` are the migration steps' statements, the ones that run as printed. A fix
    built from ``statements`` alone (the form before steps existed) has one migration step
    per statement, its lock unknown; one built from ``steps`` derives ``statements``.
    """

    statements: tuple[str, ...] = ()
    notes: str = ""
    safety: FixSafety = "review"
    steps: tuple[FixStep, ...] = ()

    def __post_init__(self) -> None:
        migrations = tuple(s.sql for s in self.steps if s.kind == "migration")
        if not self.steps:
            plain = tuple(FixStep("migration", s) for s in self.statements)
            object.__setattr__(self, "steps", plain)
        elif self.statements and self.statements != migrations:
            raise ValueError("Fix: statements must be the migration steps' statements")
        else:
            object.__setattr__(self, "statements", migrations)
        if self.safety == "safe" and any(s.kind != "migration" for s in self.steps):
            raise ValueError("Fix: a fix with a rewrite or review step cannot be safe")

    def of_kind(self, kind: StepKind) -> tuple[FixStep, ...]:
        return tuple(s for s in self.steps if s.kind == kind)


@dataclass(frozen=True)
class ProofMeasure:
    """One figure measured on the scratch copy before and after a fix."""

    measure: str  # what the figure is: "claim ms", "shared buffers per claim", "index bytes"
    subject: str  # what was measured: a statement's label, an index, a table
    # The median of its runs (the value, for a figure measured once); None: no figure (not
    # measured, or a statement that took no row)
    before: float | None
    after: float | None
    ratio: float | None  # before / after; None where no ratio is claimed
    plan_before: str | None = None  # the plan's main node, for a statement
    plan_after: str | None = None
    # The lowest and highest of its runs; None for a figure measured once.
    before_spread: tuple[float, float] | None = None
    after_spread: tuple[float, float] | None = None
    # "lower" or "higher": the runs after lie wholly beyond those before and their medians
    # differ by MIN_CHANGE; "none": no measurable change; None: not compared.
    change: str | None = None


@dataclass(frozen=True)
class ProofReproduction:
    """A statement's cost on the copy before any fix, held against what the checked server's
    pg_stat_statements recorded per call: the copy reproduces it when rows and shared
    buffers per call are within ``within`` times of the server's."""

    statement: str  # its label
    rows_there: float | None  # per call, on the checked server
    rows_copy: float | None  # per run, on the copy (the median)
    blocks_there: float | None
    blocks_copy: float | None
    within: float  # the factor stated
    reproduced: bool | None  # None: the server recorded no counters to hold it against


@dataclass(frozen=True)
class SeriesPoint:
    """One reading of a copy driven over time."""

    seconds: float  # since the drive started
    dead_tuples: int  # n_dead_tup
    autovacuum_runs: int  # autovacuum_count since the drive started
    claim_ms: float | None  # the claim's time when read then; None: not timed then


@dataclass(frozen=True)
class ProofSeries:
    """A copy's life under the queue's churn, read at intervals (a vacuum proof)."""

    copy: str  # "without the fix" or "with the fix"
    trigger: float  # dead tuples past which autovacuum vacuums the table on it
    dead_per_s: float  # the churn driven
    points: tuple[SeriesPoint, ...]


@dataclass(frozen=True)
class Proof:
    """A fix applied to a scratch copy of the queue at its measured shape (``--prove``):
    whether the finding came back on the copy, whether it went with the fix, and what was
    measured. ``notes`` say what could not be measured or did not help."""

    server_version: str  # of the scratch server
    checked_version: str  # of the checked server, as the snapshot names it
    rows: int  # rows of the copy
    table_rows: int  # rows the snapshot measured
    scaled_down: bool
    live_rows: int  # of the copy's rows, those in the live set (kept whole when scaled down)
    # The finding came back on the copy before the fix, and the copy ran the statement it is
    # about as the checked server did (``reproduction``)
    reproduced: bool
    # The check is quiet after the fix AND a measure moved beyond its spread; None: not
    # reproduced, so nothing to prove, or the fix was not run (notes say why)
    finding_gone: bool | None
    measures: tuple[ProofMeasure, ...] = ()
    notes: tuple[str, ...] = ()
    # The check no longer reports it on the copy after the fix (whatever the measures say);
    # None where the fix was not run or nothing was reproduced
    check_quiet: bool | None = None
    reproduction: tuple[ProofReproduction, ...] = ()
    series: tuple[ProofSeries, ...] = ()


# Between a fact's name and the queue it is missing for, in a key of Snapshot.unavailable
# (saved snapshots hold the keys as they are: "horizon", "tenants:app.jobs").
_QUEUE_OF_FACT = ":"


def unavailable_key(fact: str, queue: str | None = None) -> str:
    """The key of ``Snapshot.unavailable`` for ``fact`` missing for one queue ("schema.table")
    or, without one, for the whole database."""
    return f"{fact}{_QUEUE_OF_FACT}{queue}" if queue else fact


@dataclass(frozen=True)
class Finding:
    """What a check found, and the same finding in the report.

    A check gives the first fields (its target, message and evidence; its own severity where
    it rates this finding apart from its default). The engine adds what only it knows with
    ``dataclasses.replace``: the check's code, name and docs page, the severity settled (the
    check's default where the check gave none, or the config file's), the statement the
    finding is about; --prove adds the proof and a fleet the database.
    """

    target: Target
    message: str
    evidence: dict[str, Any]
    explanation: str = ""
    fix: Fix | None = None
    # The check's own rating of this finding; None: the check's default. A report's findings
    # always have one (see ``rating``).
    severity: Severity | None = None
    # The id (statement_id) of the statement the finding is about, when the target is not that
    # statement (a statement target names it): the finding is then shown at the statement's
    # --query-file line, and that statement's inline ignores drop it. Not a published field:
    # the evidence shows the statement.
    statement_id: str | None = None
    # What the engine adds: none of it is a check's to give.
    code: str = field(default="", kw_only=True)
    name: str = field(default="", kw_only=True)
    docs: str = field(default="", kw_only=True)
    # --prove: the fix applied to a scratch copy; None without --prove or without a fix.
    proof: Proof | None = field(default=None, kw_only=True)
    # In a fleet's combined report, the database it was found in (its label): the key then
    # names it, so the same finding in two databases has two identities. None in the report
    # of one database, whose keys stay as they are.
    database: str | None = field(default=None, kw_only=True)

    @property
    def rating(self) -> Severity:
        """The severity the report gives it, which the engine settled."""
        if self.severity is None:
            raise ValueError(f"{self.message!r} was not reported: its severity is not settled")
        return self.severity

    @property
    def key(self) -> str:
        return f"{self.database}/{self.own_key}" if self.database is not None else self.own_key

    @property
    def own_key(self) -> str:
        """The key within its database's report, whether or not the database is named."""
        return f"{self.code}:{self.target.key_part}"


@dataclass(frozen=True)
class Skip:
    """A check could not judge: the whole snapshot (``queue`` None) or one queue.

    A check gives the reason and the queue ("schema.table"); a check yields one for each queue
    it could not judge, so a queue without a finding and without a skip of that check is a
    queue the check judged healthy. The engine adds the check's code and, when a fact the
    check requires was missing, the fact and the GRANTs that would show it.
    """

    reason: str
    queue: str | None = None
    code: str = field(default="", kw_only=True)
    fact: str | None = field(default=None, kw_only=True)
    grants: tuple[str, ...] = field(default=(), kw_only=True)


@dataclass(frozen=True)
class Rule:
    """What a check is, as a report describes it (SARIF's rules): its identity and its
    docstring. A registered check (qadvisor.registry.Check) is a Rule that can also run."""

    code: str
    name: str
    severity: Severity
    category: str
    summary: str
    doc: str
    # Where its page lives, relative to the repository of the pack that owns it (None: the
    # built-in place, docs/checks/<CODE>.md).
    docs: str | None = field(default=None, kw_only=True)
    # The words of its own evidence fields (field -> label), for the reports people read:
    # declared with the check, so a renderer needs the report alone. Fields many checks share
    # are labelled once in qadvisor.render.labels.
    labels: Mapping[str, str] = field(default_factory=dict, kw_only=True, hash=False)

    @property
    def docs_path(self) -> str:
        return self.docs or f"docs/checks/{self.code}.md"


@dataclass(frozen=True)
class Location:
    """A place in the repository a finding is shown at (SARIF's physical location): a path
    relative to the repository root, "/"-separated, and a line."""

    path: str
    line: int = 1


@dataclass(frozen=True)
class BaselineEntry:
    """A finding as a baseline file records it: what identifies it, no measurement."""

    key: str
    code: str
    name: str
    severity: Severity
    target: Target


# A finding measured against a baseline: "new" (its key was not in the baseline, or its
# severity rose) or "preexisting".
BaselineState = Literal["new", "preexisting"]


@dataclass(frozen=True)
class RoleGrant:
    """One statement of a monitoring role's setup (``qadvisor role``), with the facts it shows
    (qadvisor.facts) and the checks that read them."""

    statement: str
    facts: tuple[str, ...]
    checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class RoleSetup:
    """What a monitoring role needs on one database for every check to judge its queues:
    the statements that make it (``create`` unless the role exists) and grant it, each with
    what it shows; ``hidden``, what it would still not see (another session's lock)."""

    role: str
    database: str
    server_version: str
    create: bool
    queues: tuple[Queue, ...]
    grants: tuple[RoleGrant, ...]
    hidden: tuple[HiddenFact, ...] = ()


@dataclass(frozen=True)
class BaselineResult:
    """The findings of a run compared with a baseline file."""

    source: str  # the baseline file, as given
    database: str  # the database it was written on
    preexisting: frozenset[str]  # keys of the findings that were in it (severity not higher)
    keys: frozenset[str] = frozenset()  # every key the baseline holds
    # In the baseline and gone: the check judged that object again and found nothing.
    fixed: tuple[BaselineEntry, ...] = ()
    # In the baseline and not seen, but not judged this run either (the check did not run,
    # could not judge that queue, or the finding was ignored): not called fixed.
    not_judged: tuple[BaselineEntry, ...] = ()


@dataclass(frozen=True)
class Ignored:
    """What one inline ignore of a --query-file dropped."""

    source: str  # the statement, "sql/claim.sql:12"
    line: int  # the comment's line
    code: str
    findings: int  # how many findings it dropped (0: nothing of that code to drop)


@dataclass(frozen=True)
class Report:
    snapshot: Snapshot
    findings: tuple[Finding, ...]
    skipped: tuple[Skip, ...]
    checks_run: tuple[str, ...]
    # The checks of checks_run, described: a renderer needs nothing but the report.
    rules: tuple[Rule, ...] = ()
    # Set with --baseline: which findings are new, which baselined ones are fixed.
    baseline: BaselineResult | None = None
    # What the inline ignores of the --query-file statements dropped.
    ignored: tuple[Ignored, ...] = ()
    # Finding key -> where in the repository the finding is (its statement's --query-file).
    locations: dict[str, Location] = field(default_factory=dict)
    # Where findings without a location of their own are shown: the config file that named
    # the tables, else --sarif-anchor; None: neither.
    anchor: Location | None = None
    # An absolute URL the docs/ directory is published under (SARIF helpUri), or None.
    docs_url: str | None = None
    # When the checks ran (UTC, ISO 8601) and the command as run, its passwords removed: the
    # header of a report that is pasted somewhere. None where the report was built otherwise.
    checked_at: str | None = None
    command: str | None = None

    def baseline_state(self, finding: Finding) -> BaselineState | None:
        """None without a baseline."""
        if self.baseline is None:
            return None
        return "preexisting" if finding.own_key in self.baseline.preexisting else "new"

    @property
    def new_findings(self) -> tuple[Finding, ...]:
        """The findings that count for --fail-on: all of them without a baseline."""
        return tuple(f for f in self.findings if self.baseline_state(f) != "preexisting")

    def location(self, finding: Finding) -> Location | None:
        """Where the finding is shown in the repository: its own place, else the anchor."""
        return self.locations.get(finding.own_key, self.anchor)

    def summary(self) -> dict[str, int]:
        counts = {s.label: 0 for s in sorted(Severity, reverse=True)}
        for f in self.findings:
            counts[f.rating.label] += 1
        return counts

    @property
    def fully_judged(self) -> bool:
        """Queues were found and every check that ran judged every one of them: only then
        may a report call the queues healthy."""
        return bool(self.snapshot.queues) and not self.skipped

    def not_judged(self) -> list[tuple[str | None, tuple[str, ...]]]:
        """(queue, codes of the checks that could not judge it), queues in report order;
        None stands for skips of the whole snapshot (every queue)."""
        by_queue: dict[str | None, list[str]] = {}
        for s in self.skipped:
            codes = by_queue.setdefault(s.queue, [])
            if s.code not in codes:
                codes.append(s.code)
        order = [None, *(q.qualified for q in self.snapshot.queues)]
        known = [q for q in order if q in by_queue]
        rest = sorted(q for q in by_queue if q not in order and q is not None)
        return [(q, tuple(by_queue[q])) for q in [*known, *rest]]

    def grants(self) -> tuple[str, ...]:
        """Every GRANT that would show a fact this report lacked, once each, in order."""
        found = [g for s in self.skipped for g in s.grants]
        found += [g for h in self.snapshot.hidden for g in h.grants]
        return tuple(dict.fromkeys(found))


# --- fleets: many databases in one run ----------------------------------------------

# Why a database of a fleet was not judged. Left out before any connection: "no_connections"
# (datallowconn is false), "no_connect_privilege" (the role lacks CONNECT). Tried and failed:
# "connect_failed" (refused, unreachable, a pg_hba reject), "collect_failed" (connected, but
# a fact every check needs could not be read), "run_timeout" (the run's bound passed during
# its visit, or before its turn came), "error" (qadvisor itself failed on it).
NotJudgedKind = Literal[
    "no_connections", "no_connect_privilege", "connect_failed", "collect_failed",
    "run_timeout", "error",
]  # fmt: skip
# Left out on purpose by the server's own settings: the run still says so, but it is no error.
LEFT_OUT_KINDS: tuple[NotJudgedKind, ...] = ("no_connections", "no_connect_privilege")


@dataclass(frozen=True)
class FleetMember:
    """One database of a fleet: its report, or why there is none."""

    database: str  # its label: the database's name (--all-databases), else the DSN file's
    report: Report | None
    not_judged: NotJudgedKind | None = None
    reason: str | None = None  # one line, no secret
    grants: tuple[str, ...] = ()  # what would let the role connect

    @property
    def judged(self) -> bool:
        return self.report is not None

    @property
    def failed(self) -> bool:
        """Tried and not judged: an error of the run, unlike a database left out."""
        return self.report is None and self.not_judged not in LEFT_OUT_KINDS


@dataclass(frozen=True)
class FleetReport:
    """Many databases checked in one run, each judged alone: one report each, in order of
    their labels, and the databases that could not be judged with why."""

    source: str  # where the fleet came from: "--all-databases host=db port=5432", "--dsn-file"
    jobs: int  # how many databases were checked at once, at most
    members: tuple[FleetMember, ...]
    checked_at: str | None = None
    command: str | None = None

    @property
    def reports(self) -> tuple[tuple[str, Report], ...]:
        return tuple((m.database, m.report) for m in self.members if m.report is not None)

    @property
    def findings(self) -> tuple[tuple[Finding, Report], ...]:
        """Every database's findings, each naming its database (its key too), with the report
        it is of; sorted as one report sorts its own."""
        out = [
            (dataclasses.replace(f, database=db), r) for db, r in self.reports for f in r.findings
        ]
        out.sort(key=lambda fr: (-fr[0].rating, fr[0].code, fr[0].key))
        return tuple(out)

    def summary(self) -> dict[str, int]:
        counts = {s.label: 0 for s in sorted(Severity, reverse=True)}
        for _, r in self.reports:
            for label, n in r.summary().items():
                counts[label] += n
        return counts

    @property
    def skipped(self) -> int:
        return sum(len(r.skipped) for _, r in self.reports)

    @property
    def not_judged(self) -> tuple[FleetMember, ...]:
        return tuple(m for m in self.members if m.report is None)


# --- generic dataclass loading --------------------------------------------------------

T = TypeVar("T")


def _build(cls: type[T], data: Any) -> T:
    """Rebuild a (nested) frozen dataclass from ``dataclasses.asdict`` output."""
    if not isinstance(data, dict):
        raise ValueError(f"expected an object for {cls.__name__}")
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    missing = [
        f.name
        for f in fields
        if f.name not in data
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(f"{cls.__name__} lacks {', '.join(missing)}")
    for f in fields:
        if f.name in data:
            try:
                kwargs[f.name] = _convert(hints[f.name], data[f.name])
            except ValueError as exc:
                # The innermost field names the value; the outer ones would only repeat it.
                said = str(exc)
                if _NAMED.match(said):
                    raise ValueError(said) from None
                raise ValueError(f"{cls.__name__}.{f.name}: {said}") from None
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"incomplete {cls.__name__}: {exc}") from None


_NAMED = re.compile(r"[A-Z]\w*(\.\w+: | lacks )")


class _Unknown(ValueError):
    """A value outside a closed set (a Literal): written by a newer qadvisor, or not by one."""


def _convert(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        if value not in args:
            raise _Unknown(f"{value!r} is not one of {', '.join(map(repr, args))}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError("expected a list")
        return tuple(_convert(args[0], v) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError("expected an object")
        return {k: _convert(args[1], v) for k, v in value.items()}
    return _scalar(tp, value)


def _scalar(tp: Any, value: Any) -> Any:
    """A JSON scalar checked against its field's type: a snapshot that says ``"reltuples":
    "many"`` is refused by name, never judged."""
    if tp is bool:
        ok = isinstance(value, bool)
        want = "true or false"
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "an integer"
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        want = "a number"
        value = float(value) if ok else value
    elif tp is str:
        ok = isinstance(value, str)
        want = "a string"
    else:
        return value  # Any: free-form (evidence, plan JSON)
    if not ok:
        raise ValueError(f"expected {want}, not {json.dumps(value)[:40]}")
    return value
