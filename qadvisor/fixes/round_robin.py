"""The round-robin dequeue pattern, as fixes print it: a rotation table with one row per tenant
that has work, a per-tenant partial index on the live rows, and the LATERAL dequeue that takes
the longest-waiting tenant's oldest job with the lock on the job.

QA401 (the per-tenant sub-select walks the backlog), QA403 (FIFO on a multi-tenant queue) and
QA503 (a window per tenant under a lock) print parts of it; it is written once, here. Pure:
table facts in, SQL text out.
"""

from __future__ import annotations

from collections.abc import Sequence

from qadvisor.derive.predicates import predicate_text
from qadvisor.fixes.builders import (
    IndexFix,
    IndexKey,
    existing_index,
    live_set_index,
    migration,
    rewrite,
)
from qadvisor.model import Fix, FixStep, Index, LivePredicate, Snapshot, Statement, Table
from qadvisor.sql.dequeue import OrderItem, value_placeholder
from qadvisor.sql.printing import ident, index_name, predicate_sql, qualified

# Columns that record when a job was queued, preferred first: ordering the per-tenant
# sub-select by one of them (then the key) is an order only a tenant-led index supplies.
TIME_COLUMNS = (
    "enqueued_at", "queued_at", "created_at", "inserted_at", "submitted_at", "scheduled_at",
    "run_at", "available_at",
)  # fmt: skip


def tenant_order(table: Table, tenant: str, current: Sequence[OrderItem]) -> tuple[OrderItem, ...]:
    """An ORDER BY for the per-tenant sub-select that only a tenant-led index supplies.

    The current order when no other index supplies it; ordered by the key alone (``id``)
    or by another index's leading columns, the queue-time column goes first (measured:
    ``ORDER BY enqueued_at, id``). No current order: queue time, then the key.
    """
    items = [o for o in current if o.column != tenant]
    if any(table.column(o.column) is None for o in items):
        return tuple(current)  # expressions: leave them to the user
    cols = tuple(o.column for o in items)
    pk = table.primary_key
    when = next((c for c in TIME_COLUMNS if table.column(c) is not None), None)
    if not items:
        return tuple(OrderItem(c) for c in ((when,) if when else ()) + pk)
    servable = cols == pk[: len(cols)] or any(
        i.is_valid and i.columns[:1] != (tenant,) and i.columns[: len(cols)] == cols
        for i in table.indexes
    )
    if servable and when is not None and when not in cols:
        return (OrderItem(when), *items)
    return tuple(items)


def existing_tenant_index(table: Table, live: LivePredicate, keys: Sequence[str]) -> Index | None:
    """A valid partial index on the live predicate keyed exactly (tenant, order columns...)."""
    return existing_index(table, [IndexKey(k) for k in keys], live, exact=True)


def tenant_index(
    table: Table, live: LivePredicate, tenant: str, order: Sequence[OrderItem]
) -> IndexFix:
    """The per-tenant partial index: the tenant, then the sub-select's order, on the live rows."""
    keys = [IndexKey(tenant), *(IndexKey(o.column, o.descending, o.nulls_first) for o in order)]
    return live_set_index(table, live, keys)


def tenant_index_sql(
    table: Table, live: LivePredicate, tenant: str, order: Sequence[OrderItem]
) -> tuple[str, str]:
    """(index name, CREATE INDEX CONCURRENTLY statement) of the per-tenant partial index."""
    index = tenant_index(table, live, tenant, order)
    return index.name, index.statement


def _own_condition(statement: Statement, live: LivePredicate) -> str | None:
    """The statement's own conditions on the live column, as it spells them, each parameter
    a :func:`value_placeholder` (its value reached qadvisor only as $n): the rewrite writes
    no value the application's statement does not. None when it has none qadvisor can write."""
    parsed = statement.parsed
    preds = [p for p in (parsed.predicates if parsed else ()) if p.column == live.column]
    places = {
        str(o.index): value_placeholder(o.index)
        for p in preds
        for o in p.operands
        if o.kind == "parameter" and o.index is not None
    }
    texts = [predicate_text(p, places) for p in preds]
    if not texts or any(text is None for text in texts):
        return None
    return " AND ".join(text for text in texts if text)


def rotation_name(table: Table) -> str:
    return f"{table.name[: 63 - len('_tenants')]}_tenants"


def round_robin_fix(
    table: Table,
    live: LivePredicate | None,
    tenant: str,
    order: Sequence[OrderItem],
    replaces: Sequence[Statement] = (),
    snapshot: Snapshot | None = None,
) -> Fix | None:
    """The round-robin pattern for a queue table: rotation table, per-tenant partial index,
    and the LATERAL dequeue in place of each statement of ``replaces`` (the claims seen; none:
    one rewrite of a claim not seen); None without a live predicate to write them with."""
    if live is None:
        return None
    column = table.column(tenant)
    tenant_type = column.type if column is not None else "bigint"
    queue = qualified(table.schema, table.name)
    rot_name = rotation_name(table)
    rotation = qualified(table.schema, rot_name)
    t = ident(tenant)
    # The whole table as the live set adds no condition (TRUE AND ... says nothing).
    live_and = "" if live.whole_table else f"{predicate_sql(live)} AND "
    # The claim's own condition on the live column, else the live predicate's (none for the
    # whole table).
    where = "" if live.whole_table else predicate_sql(live)
    rr_order = tenant_order(table, tenant, order)
    keys = (tenant, *(o.column for o in rr_order))
    steps: list[FixStep] = [
        migration(
            f"CREATE TABLE {rotation} (\n  {t} {tenant_type} PRIMARY KEY,\n"
            "  last_served timestamptz NOT NULL DEFAULT '-infinity'\n);",
            "none",
            note="A new table: it locks nothing anyone else uses.",
        ),
        migration(
            f"CREATE INDEX {ident(index_name(rot_name, ['last_served']))} "
            f"ON {rotation} (last_served);",
            "SHARE",
            note=f"A plain CREATE INDEX: its SHARE lock is on the new {rot_name}, still empty.",
        ),
        migration(
            f"INSERT INTO {rotation} ({t})\nSELECT DISTINCT {t} FROM {queue}\n"
            f" WHERE {live_and}{t} IS NOT NULL\nON CONFLICT DO NOTHING;",
            "ROW EXCLUSIVE",
            note=f"ROW EXCLUSIVE on {rot_name}; it reads {table.name} under ACCESS SHARE, so "
            "workers and enqueues go on.",
        ),
    ]
    if existing_tenant_index(table, live, keys) is None:
        index = tenant_index(table, live, tenant, rr_order)
        steps.extend(
            index.steps(snapshot, "the round-robin dequeue this fix prints (the rewrite below)")
        )
    pk = table.primary_key or ("ctid",)
    inner_cols = ", ".join(ident(c) for c in pk)
    outer_cols = ", ".join(f"j.{ident(c)}" for c in pk)
    order_sql = ", ".join(ident(o.column) + (" DESC" if o.descending else "") for o in rr_order)

    def dequeue(condition: str) -> str:
        return (
            f"SELECT {outer_cols}, qt.{t}\n"
            f"FROM {rotation} qt\n"
            "CROSS JOIN LATERAL (\n"
            f"  SELECT {inner_cols} FROM {queue}\n"
            f"  WHERE {t} = qt.{t}{' AND ' + condition if condition else ''}\n"
            + (f"  ORDER BY {order_sql}\n" if order_sql else "")
            + "  LIMIT 1\n"
            "  FOR UPDATE SKIP LOCKED\n"
            ") j\n"
            "ORDER BY qt.last_served\n"
            "LIMIT 1;"
        )

    for s in replaces:
        own = _own_condition(s, live)
        note = ""
        if own is None:
            own = where
        elif "<value of $" in own:
            note = (
                "Write the value your application sends in place of each <value of $n>: "
                "qadvisor saw only the parameter."
            )
        steps.append(rewrite(s, dequeue(own), note))
    if not replaces:
        steps.append(rewrite(None, dequeue(where)))
    notes = (
        "Run the migration in order (CREATE INDEX CONCURRENTLY on its own, outside a "
        "transaction block). The rewrite is the new dequeue for the application: in the same "
        "claim transaction, after it, mark the job running as "
        f"today and run `UPDATE {rotation} SET last_served = clock_timestamp() WHERE {t} = $1` "
        "for the tenant it returned. The lock stays on the job in the sub-select, so a large "
        "tenant still uses every worker. Each enqueue adds its tenant in the same transaction "
        f"as the job: `INSERT INTO {rotation} ({t}) VALUES ($1) ON CONFLICT ({t}) DO UPDATE "
        f"SET last_served = {ident(rot_name)}.last_served`, a no-op update that keeps the "
        "tenant's turn and locks its row against a concurrent prune (QA402 explains removing "
        "idle tenants safely; DO NOTHING would not lock it). Check the "
        "new dequeue's plan with a skewed backlog: `qadvisor check --query` (QA401)."
    )
    return Fix(notes=notes, steps=tuple(steps))
