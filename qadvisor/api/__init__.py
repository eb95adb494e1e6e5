"""The door between a check pack and qadvisor: it takes a pack's imports and gives the names a
check is written with, and (in :mod:`qadvisor.api.provisional`) the helpers the built-in checks
share.

The built-in pack (``checks/``) imports nothing else of qadvisor but this package (an import
contract in the test suite holds it to that), so a third-party pack can do all it does. Every
name below is a promise to third-party packs, kept from one release to the next; the helpers in
:mod:`qadvisor.api.provisional` may change in any release. The groups read as a table of
contents:

1. writing a check: the decorator, what a check yields (a Finding or a Skip), what it fixes
   with, and the items it can judge (their skips go to the report by themselves);
2. the snapshot: the facts a check reads;
3. queues and their facts;
4. estimates shared by the checks, so a pack's evidence agrees with theirs, and the margin
   that keeps two runs on noisy counters agreeing;
5. statements and the queues they claim from;
6. plans;
7. fixes: the steps a check's fix is made of;
8. SQL text and units for messages and fixes.

A test keeps this module at most 60 names (tests/test_api.py): a name joins it when a pack
cannot do without it, and leaves api.provisional for it then.
"""

from collections.abc import Iterator

from qadvisor.api.statement_checks import Dequeue, Locking, dequeues, lockings
from qadvisor.derive.estimates import LiveEstimate, VacuumTrigger, live_rows, vacuum_trigger
from qadvisor.derive.margins import NOISE_MARGIN, at_least, at_most
from qadvisor.derive.plans.reading import describe_node, plan_outline, scans
from qadvisor.derive.statement_queues import (
    statement_evidence,
    statement_label,
    statement_target,
)
from qadvisor.fixes.builders import (
    analyze,
    drop_index,
    migration,
    reindex,
    review,
    rewrite,
    table_setting,
)
from qadvisor.model import (
    Column,
    ColumnStats,
    Finding,
    Fix,
    FixStep,
    HorizonHolder,
    IdSequence,
    Index,
    LivePredicate,
    PlanNode,
    Queue,
    RoleSetting,
    Sample,
    ServerInfo,
    Severity,
    Skip,
    Snapshot,
    Statement,
    Table,
    TableStats,
    Target,
    TenantCount,
    TenantFacts,
)
from qadvisor.registry import NoOptions, check, judgeable
from qadvisor.sql.dequeue import DequeueStatement
from qadvisor.sql.printing import ident, literal, qualified
from qadvisor.units import human_bytes, human_count, human_seconds

__all__ = [  # noqa: RUF022 -- grouped by topic, in the order of the contents above
    # 1. writing a check. judgeable is for a pack's own streams of items and skips.
    "Finding",
    "Fix",
    "FixStep",
    "NoOptions",
    "Severity",
    "Skip",
    "Target",
    "check",
    "judgeable",
    "judgeable_dequeues",
    "judgeable_locking",
    "judgeable_queues",
    # 2. the snapshot. ServerInfo, RoleSetting, Sample, TableStats, Column, ColumnStats and
    # TenantCount are not named in the built-in checks: a pack's tests build snapshots of them
    # (the guide's own test does).
    "Column",
    "ColumnStats",
    "DequeueStatement",
    "HorizonHolder",
    "IdSequence",
    "Index",
    "LivePredicate",
    "PlanNode",
    "Queue",
    "RoleSetting",
    "Sample",
    "ServerInfo",
    "Snapshot",
    "Statement",
    "Table",
    "TableStats",
    "TenantCount",
    "TenantFacts",
    # 3. queues and their facts.
    "queue_tables",
    "tenant_facts",
    # 4. estimates (LiveEstimate and VacuumTrigger are what live_rows and vacuum_trigger
    # return), and margins on thresholds that read noisy counters: within the margin a check
    # gives its conservative answer, so two runs agree.
    "LiveEstimate",
    "NOISE_MARGIN",
    "VacuumTrigger",
    "at_least",
    "at_most",
    "live_rows",
    "vacuum_trigger",
    # 5. statements and their queues. Dequeue and Locking are what judgeable_dequeues and
    # judgeable_locking yield.
    "Dequeue",
    "Locking",
    "statement_evidence",
    "statement_label",
    "statement_target",
    # 6. plans.
    "describe_node",
    "plan_outline",
    "scans",
    # 7. fixes: steps (migration, rewrite, review) with their locks.
    "analyze",
    "drop_index",
    "migration",
    "reindex",
    "review",
    "rewrite",
    "table_setting",
    # 8. SQL text and units.
    "human_bytes",
    "human_count",
    "human_seconds",
    "ident",
    "literal",
    "qualified",
]


def queue_tables(snapshot: Snapshot) -> list[tuple[Queue, Table]]:
    """Each discovered queue with its table facts (queues whose facts are missing are left out)."""
    out = []
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is not None:
            out.append((q, t))
    return out


def _queue_facts(snapshot: Snapshot) -> Iterator[tuple[Queue, Table] | Skip]:
    """Each discovered queue with its table facts, or a Skip for a queue whose facts are
    missing (a table dropped between discovery and the fact queries), so that queue is
    reported as not judged rather than healthy."""
    for q in snapshot.queues:
        t = snapshot.table(q.schema, q.table)
        if t is None:
            yield Skip(f"{q.qualified}: no table facts were collected", q.qualified)
        else:
            yield q, t


def judgeable_queues(snapshot: Snapshot) -> Iterator[tuple[Queue, Table]]:
    """Each discovered queue with its table facts; a queue whose facts are missing goes to
    the report as a skip of the check, by itself."""
    return judgeable(_queue_facts(snapshot))


def judgeable_dequeues(snapshot: Snapshot) -> Iterator[Dequeue]:
    """Each parsed dequeue statement on a discovered queue, for the plan checks; the
    statements and queues that cannot be judged go to the report as skips, by themselves."""
    return judgeable(dequeues(snapshot))


def judgeable_locking(snapshot: Snapshot) -> Iterator[Locking]:
    """Each parsed row-locking statement with the table whose rows it claims, for the lock
    checks; the statements and queues that cannot be judged go to the report as skips, by
    themselves."""
    return judgeable(lockings(snapshot))


def tenant_facts(snapshot: Snapshot, schema: str, table: str) -> TenantFacts | None:
    """The per-tenant facts collected for a queue table, if it has a tenant column."""
    return next((f for f in snapshot.tenants if (f.schema, f.table) == (schema, table)), None)
