"""EXPLAIN (FORMAT JSON) output as PlanNode trees, and pure helpers that checks read plans with.

Nothing here talks to PostgreSQL: the collector (``qadvisor.collect.statements``) runs the
EXPLAINs and calls :func:`parse_explain`; checks call the helpers on the snapshot.

Conventions of the tree:

- ``relation``/``schema`` are filled for every node that reads a table, and also for a
  ``Bitmap Index Scan`` (EXPLAIN names only the index there): it gets the relation of the
  ``Bitmap Heap Scan`` above it, so "which indexes of table T does this plan use" is one walk.
- Conditions are EXPLAIN's own text (VERBOSE, so columns are qualified by the alias).
- ``actual_rows`` and ``actual_total_ms`` are per loop, as EXPLAIN ANALYZE prints them;
  multiply by ``actual_loops`` for the node's total. ``shared_blocks`` is shared hit + read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from qadvisor.dequeue import DequeueStatement, OrderItem, Predicate
from qadvisor.model import Index, LivePredicate, PlanNode, Queue, Snapshot, Statement, Table
from qadvisor.registry import Unmet
from qadvisor.sqltext import ident

__all__ = [
    "PlanCacheMode",
    "ValueJudgement",
    "dequeue_statements",
    "describe_node",
    "index_predicate_columns",
    "index_scans",
    "indexes_used",
    "literal_value",
    "order_keys_sql",
    "parse_explain",
    "plan_cache_mode",
    "plan_outline",
    "predicate_implies",
    "predicate_text",
    "predicate_words",
    "scans",
    "sorts_over",
    "statement_evidence",
    "statement_id",
    "statement_label",
    "statement_queue",
    "statement_start",
]

# Scan nodes whose rows come from one relation.
SCAN_NODES = frozenset(
    {
        "Seq Scan",
        "Index Scan",
        "Index Only Scan",
        "Bitmap Heap Scan",
        "Bitmap Index Scan",
        "Tid Scan",
        "Tid Range Scan",
        "Sample Scan",
    }
)
SORT_NODES = frozenset({"Sort", "Incremental Sort"})


# --- EXPLAIN JSON -> PlanNode ---------------------------------------------------------------


def parse_explain(data: Any) -> tuple[PlanNode, float | None]:
    """The plan tree of one EXPLAIN (FORMAT JSON) result, and its "Execution Time" in ms
    (only with ANALYZE, else None).

    ``data`` is what the server returns: a one-element list holding {"Plan": ...}; the bare
    object is accepted too. Raises ValueError on anything else.
    """
    if isinstance(data, list):
        if len(data) != 1:
            raise ValueError("EXPLAIN JSON must hold exactly one plan")
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("Plan"), dict):
        raise ValueError("not EXPLAIN (FORMAT JSON) output: no 'Plan' object")
    execution = data.get("Execution Time")
    return _node(data["Plan"], None), float(execution) if execution is not None else None


def _node(d: dict[str, Any], heap: tuple[str | None, str | None] | None) -> PlanNode:
    node_type = str(d.get("Node Type", "?"))
    relation = _str(d.get("Relation Name"))
    schema = _str(d.get("Schema"))
    if node_type == "Bitmap Heap Scan":
        heap = (relation, schema)
    elif node_type == "Bitmap Index Scan" and heap is not None and relation is None:
        relation, schema = heap
    elif node_type not in ("BitmapAnd", "BitmapOr"):
        heap = None
    sort_key = d.get("Sort Key") or ()
    children = tuple(_node(c, heap) for c in d.get("Plans") or () if isinstance(c, dict))
    blocks = None
    if "Shared Hit Blocks" in d or "Shared Read Blocks" in d:
        blocks = int(d.get("Shared Hit Blocks") or 0) + int(d.get("Shared Read Blocks") or 0)
    return PlanNode(
        node_type=node_type,
        relation=relation,
        schema=schema,
        alias=_str(d.get("Alias")),
        index=_str(d.get("Index Name")),
        index_cond=_str(d.get("Index Cond") or d.get("Recheck Cond")),
        filter=_str(d.get("Filter")),
        sort_key=tuple(str(k) for k in sort_key),
        parent_relationship=_str(d.get("Parent Relationship")),
        subplan_name=_str(d.get("Subplan Name")),
        startup_cost=float(d.get("Startup Cost") or 0.0),
        total_cost=float(d.get("Total Cost") or 0.0),
        plan_rows=float(d.get("Plan Rows") or 0.0),
        actual_rows=_float(d.get("Actual Rows")),
        actual_loops=_float(d.get("Actual Loops")),
        actual_total_ms=_float(d.get("Actual Total Time")),
        rows_removed_by_filter=_float(d.get("Rows Removed by Filter")),
        shared_blocks=blocks,
        children=children,
    )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


# --- reading plans ----------------------------------------------------------------------------


def _is(node: PlanNode, schema: str | None, table: str) -> bool:
    return node.relation == table and (schema is None or node.schema in (None, schema))


def scans(plan: PlanNode | None, schema: str | None, table: str) -> list[PlanNode]:
    """Every node that reads ``schema.table`` (schema None: any schema), in plan order."""
    if plan is None:
        return []
    return [n for n in plan.walk() if n.node_type in SCAN_NODES and _is(n, schema, table)]


def index_scans(plan: PlanNode | None, schema: str | None, table: str) -> list[PlanNode]:
    """The index scans (plain, index-only, bitmap) of ``schema.table``."""
    return [n for n in scans(plan, schema, table) if n.index is not None]


def indexes_used(plan: PlanNode | None, schema: str | None, table: str) -> tuple[str, ...]:
    """Names of the indexes of ``schema.table`` the plan reads, each once, in plan order."""
    return tuple(dict.fromkeys(n.index for n in index_scans(plan, schema, table) if n.index))


def sorts_over(
    plan: PlanNode | None, schema: str | None, table: str
) -> list[tuple[PlanNode, PlanNode]]:
    """(Sort node, the scan of ``schema.table`` it sorts): sorts whose input reads the table.

    Only full ``Sort`` nodes count (an ``Incremental Sort`` gets a prefix of its order from
    an index already). The scan is the first one of the table below the sort, not looking
    into sub-plans (InitPlan / SubPlan) that merely feed a parameter.
    """
    if plan is None:
        return []
    out = []
    for node in plan.walk():
        if node.node_type != "Sort":
            continue
        below = (n for n in _input(node) if n.node_type in SCAN_NODES and _is(n, schema, table))
        scan = next(below, None)
        if scan is not None:
            out.append((node, scan))
    return out


def _input(node: PlanNode) -> Iterator[PlanNode]:
    for child in node.children:
        if child.parent_relationship in ("InitPlan", "SubPlan"):
            continue
        yield child
        yield from _input(child)


def describe_node(node: PlanNode) -> str:
    """One line as EXPLAIN prints it: ``Index Scan using i on public.jobs j (cost=..)``."""
    text = node.node_type
    if node.index is not None:
        text += f" using {node.index}"
    if node.relation is not None and node.node_type != "Bitmap Index Scan":
        text += f" on {node.schema + '.' if node.schema else ''}{node.relation}"
        if node.alias and node.alias != node.relation:
            text += f" {node.alias}"
    text += f" (cost={node.startup_cost:.2f}..{node.total_cost:.2f} rows={node.plan_rows:.0f})"
    if node.actual_rows is not None:
        loops = node.actual_loops or 1
        text += f" (actual rows={node.actual_rows:g} loops={loops:g})"
    return text


def plan_outline(plan: PlanNode | None, max_nodes: int = 12) -> list[str]:
    """The plan as indented one-liners with conditions, for evidence (at most ``max_nodes``)."""
    if plan is None:
        return []
    lines: list[str] = []

    def visit(node: PlanNode, depth: int) -> None:
        if len(lines) >= max_nodes:
            return
        extra = []
        if node.subplan_name:
            extra.append(node.subplan_name)
        if node.index_cond:
            extra.append(f"Index Cond: {node.index_cond}")
        if node.filter:
            extra.append(f"Filter: {node.filter}")
        if node.sort_key:
            extra.append(f"Sort Key: {', '.join(node.sort_key)}")
        suffix = f" [{'; '.join(extra)}]" if extra else ""
        lines.append(f"{'  ' * depth}{describe_node(node)}{suffix}")
        for child in node.children:
            visit(child, depth + 1)

    visit(plan, 0)
    return lines


# --- statements and their queues ------------------------------------------------------------


def statement_id(statement: Statement) -> str:
    """A short, stable name for a statement: its queue table and shape, ``jobs@3f9a2c1b0d``.

    Used as the finding target's name, so keys (``QA301:app.jobs@3f9a2c1b0d``) stay the same
    on a restored copy and across major versions, where a queryid changes. A statement
    without a fingerprint (an old snapshot) is named by its queryid or source.
    """
    table = statement.queue.rpartition(".")[2] if statement.queue else None
    if table is None and statement.parsed is not None:
        table = statement.parsed.table
    if statement.fingerprint:
        return f"{table or 'statement'}@{statement.fingerprint}"
    if statement.queryid is not None:
        return f"pgss:{statement.queryid}"
    return statement.source


def statement_label(statement: Statement) -> str:
    """Where a statement was seen, as a person finds it again: ``pg_stat_statements
    3f9a2c1b0d (12,345 calls, 0.42 ms mean)``, ``sql/claim.sql:12``, ``--query 1``."""
    if statement.source == "pg_stat_statements":
        facts = []
        if statement.calls is not None:
            facts.append(f"{statement.calls:,} calls")
        if statement.mean_exec_ms is not None:
            facts.append(f"{statement.mean_exec_ms:g} ms mean")
        where = f"pg_stat_statements {statement.fingerprint or statement.queryid}"
        return where + (f" ({', '.join(facts)})" if facts else "")
    if statement.function:
        runs = f" ({statement.calls:,} calls)" if statement.calls is not None else ""
        return statement.source + runs
    return statement.source


def statement_start(statement: Statement, width: int = 100) -> str:
    """The start of a statement's text on one line."""
    text = " ".join(statement.text.split())
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def statement_evidence(statement: Statement) -> dict[str, Any]:
    """What a finding about a statement shows of it: where it was seen, the start of its
    text, and the search_path it was planned under."""
    out: dict[str, Any] = {"statement": statement_label(statement)}
    out["statement_text"] = statement_start(statement)
    if statement.search_path is not None:
        out["planned_with_search_path"] = statement.search_path
    return out


def queues_named(parsed: DequeueStatement, queues: Sequence[Queue]) -> list[Queue]:
    """The queues a parsed statement's table name can mean: an unqualified name matches a
    queue of that name in any schema, public first. (Collection resolves names under the
    application's search_path and records the result in ``Statement.queue``; this is the
    rule for statements without one.)"""
    matches = [
        q
        for q in queues
        if q.table == parsed.table and (parsed.schema is None or parsed.schema == q.schema)
    ]
    return sorted(matches, key=lambda q: q.schema != "public")


def statement_queue(snapshot: Snapshot, statement: Statement) -> tuple[Queue, Table] | None:
    """The discovered queue (and its table facts) that the statement dequeues from."""
    if statement.parsed is None:
        return None
    if statement.queue is not None:
        queue = next((q for q in snapshot.queues if q.qualified == statement.queue), None)
        table = snapshot.table(queue.schema, queue.table) if queue is not None else None
        return (queue, table) if queue is not None and table is not None else None
    for queue in queues_named(statement.parsed, snapshot.queues):
        table = snapshot.table(queue.schema, queue.table)
        if table is not None:
            return queue, table
    return None


def dequeue_statements(snapshot: Snapshot) -> Iterator[tuple[Statement, Queue, Table] | Unmet]:
    """Each analysed statement on a discovered queue, with the queue and its table facts; an
    Unmet for each statement that could not be judged (unparsable, not a dequeue, not on a
    queue table, a plan that failed) and for a missing pg_stat_statements.

    A statement whose planning failed only in part (say, EXPLAIN ANALYZE timed out) is still
    yielded after its Unmet: checks look at the plans they need.
    """
    reason = snapshot.unavailable.get("pg_stat_statements")
    # Without pg_stat_statements the user's --query statements are still judged: the missing
    # extension is worth a skip only when nothing else was given.
    if reason and not snapshot.statements:
        yield Unmet(reason)
    if snapshot.queues and not snapshot.statements and not reason:
        yield Unmet(
            "no dequeue statement of the queue tables in pg_stat_statements: give the "
            "application's with --query or --query-file"
        )
    claimed: set[str] = set()
    for stmt in snapshot.statements:
        name = statement_label(stmt)
        if stmt.parsed is None:
            if stmt.plan_error:
                yield Unmet(f"{name}: {stmt.plan_error}")
            continue
        found = statement_queue(snapshot, stmt)
        if found is None and stmt.queue is None and stmt.plan_error:
            yield Unmet(f"{name}: {stmt.plan_error}")  # its names resolved nowhere
            continue
        if found is None:
            table = stmt.queue or (
                f"{stmt.parsed.schema + '.' if stmt.parsed.schema else ''}{stmt.parsed.table}"
            )
            yield Unmet(f"{name}: {table} is not a discovered queue table (name it with --table)")
            continue
        queue = found[0].qualified
        if stmt.plan_error:
            yield Unmet(f"{name}: {stmt.plan_error}", queue)
        claimed.add(queue)
        yield stmt, found[0], found[1]
    if snapshot.statements:
        # A queue whose claim is not known was not judged by any statement check.
        for q in snapshot.queues:
            if q.qualified not in claimed:
                yield Unmet(
                    f"{q.qualified}: no dequeue statement of this queue is known (in "
                    "pg_stat_statements, --query or --query-file)",
                    q.qualified,
                )


# --- predicates -------------------------------------------------------------------------------

_STRING = re.compile(r"'(?:[^']|'')*'")
_WORD = re.compile(r'"((?:[^"]|"")+)"|([A-Za-z_][A-Za-z0-9_$]*)')


def index_predicate_columns(index: Index, table: Table) -> frozenset[str]:
    """Columns of ``table`` that the partial index's predicate mentions (empty: not partial)."""
    if index.predicate is None:
        return frozenset()
    text = _STRING.sub("''", index.predicate)  # a value may look like a column name
    names = {table_col.name for table_col in table.columns}
    found = set()
    for m in _WORD.finditer(text):
        name = m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2)
        if name in names:
            found.add(name)
    return frozenset(found)


_LITERAL = re.compile(r"^\s*(?:CAST\(\s*)?\(*\s*'((?:[^']|'')*)'")
_NUMBER = re.compile(r"^\s*\(*\s*(-?\d+(?:\.\d+)?)\s*\)*\s*$")


def literal_value(text: str) -> str | None:
    """The value of an SQL literal as dequeue.Param text spells it: ``'queued'``,
    ``CAST('queued' AS job_status)``, ``'queued'::job_status``, ``42``; None otherwise."""
    m = _LITERAL.match(text)
    if m:
        return m.group(1).replace("''", "'")
    m = _NUMBER.match(text)
    return m.group(1) if m else None


def _array_values(text: str) -> tuple[str, ...] | None:
    """``'{a,b}'`` or ``ARRAY['a', 'b']`` as its values."""
    inner = text.strip()
    if inner.upper().startswith("ARRAY["):
        return tuple(v.replace("''", "'") for v in re.findall(r"'((?:[^']|'')*)'", inner))
    value = literal_value(inner)
    if value is None or not (value.startswith("{") and value.endswith("}")):
        return None
    body = value[1:-1].strip()
    if not body:
        return ()
    return tuple(v.strip().strip('"') for v in body.split(","))


@dataclass(frozen=True)
class ValueJudgement:
    """Whether a statement's predicates prove a partial index's simple predicate."""

    implies: bool | None  # None: cannot tell (a parameter whose value is unknown)
    predicates: tuple[Predicate, ...]  # the statement's predicates on the column


def predicate_implies(
    predicates: Sequence[Predicate],
    target: LivePredicate,
    values: dict[str, str] | None = None,
) -> ValueJudgement:
    """Do the conjuncts on ``target.column`` prove ``target`` (as PostgreSQL's predicate test
    would for simple forms)?

    ``values`` gives the SQL text of parameters (``{"1": "'queued'"}``); a parameter without a
    value leaves an ``=``/``IN``/``ANY`` undecided (None). ``<>``, ``NOT IN``, ranges and other
    forms never prove an equality or IN predicate; only ``IS NULL`` proves ``IS NULL``.
    """
    on_column = tuple(p for p in predicates if p.column == target.column)
    if not on_column:
        return ValueJudgement(False, on_column)
    undecided = False
    for pred in on_column:
        if target.op == "is null":
            if pred.op == "is null":
                return ValueJudgement(True, on_column)
            continue
        if pred.op not in ("=", "in", "any"):
            continue
        got = operand_values(pred, values or {})
        if got is None:
            undecided = True
        elif got and set(got) <= set(target.values):
            return ValueJudgement(True, on_column)
    return ValueJudgement(None if undecided else False, on_column)


def operand_values(pred: Predicate, values: dict[str, str]) -> tuple[str, ...] | None:
    """The values a condition compares with, parameters taken from ``values``; None when one
    is not a literal or a parameter with a value."""
    out: list[str] = []
    for operand in pred.operands:
        text = operand.text
        if operand.kind == "parameter":
            if operand.index is None or str(operand.index) not in values:
                return None
            text = values[str(operand.index)]
        elif operand.kind != "literal":
            return None
        if pred.op == "any":
            # = ANY('{a,b}') has one array operand; = ANY(ARRAY['a', 'b']) one per item.
            arr = _array_values(text) if len(pred.operands) == 1 else None
            if arr is not None:
                out.extend(arr)
                continue
        value = literal_value(text)
        if value is None:
            return None
        out.append(value)
    return tuple(out)


# --- plan_cache_mode --------------------------------------------------------------------------

FORCE_GENERIC = "force_generic_plan"


@dataclass(frozen=True)
class PlanCacheMode:
    value: str | None  # None: unknown
    source: str  # where it is set, as a person would find it

    @property
    def forced_generic(self) -> bool:
        return self.value == FORCE_GENERIC


def plan_cache_mode(snapshot: Snapshot, role: str | None) -> PlanCacheMode:
    """plan_cache_mode as a session of ``role`` in this database starts with.

    pg_db_role_setting rows win over the server's value, most specific first: role in this
    database, role, this database, all roles (ALTER ROLE ALL). With ``role`` None (unknown),
    a role-level row that forces generic plans counts: it applies to any statement that role
    runs. The server value is qadvisor's own session value unless a row for qadvisor's role
    explains that. A SET in the application's session or a driver option cannot be seen here.
    """
    db = snapshot.server.database
    rows = [r for r in snapshot.role_settings if r.name == "plan_cache_mode"]

    def lookup(who: str | None) -> PlanCacheMode | None:
        order: list[tuple[str | None, str | None]] = []
        if who is not None:
            order += [(db, who), (None, who)]
        order += [(db, None), (None, None)]
        for database, rolename in order:
            for r in rows:
                if r.database == database and r.role == rolename:
                    return PlanCacheMode(r.value, _row_source(r.database, r.role, r.value))
        return None

    if role is None:
        for r in rows:
            if r.role is not None and r.value == FORCE_GENERIC:
                return PlanCacheMode(r.value, _row_source(r.database, r.role, r.value))
    found = lookup(role)
    if found is not None:
        return found
    session = snapshot.settings.get("plan_cache_mode")
    if lookup(snapshot.server.user) is not None or session is None:
        return PlanCacheMode(None, "server value unknown")
    return PlanCacheMode(session, "server (postgresql.conf, ALTER SYSTEM or the command line)")


def _row_source(database: str | None, role: str | None, value: str) -> str:
    if role is not None and database is not None:
        return f"ALTER ROLE {role} IN DATABASE {database} SET plan_cache_mode = {value}"
    if role is not None:
        return f"ALTER ROLE {role} SET plan_cache_mode = {value}"
    if database is not None:
        return f"ALTER DATABASE {database} SET plan_cache_mode = {value}"
    return f"ALTER ROLE ALL SET plan_cache_mode = {value}"


def predicate_text(pred: Predicate, values: dict[str, str] | None = None) -> str | None:
    """The conjunct as SQL on the bare column (no alias), fit for an index's WHERE clause;
    parameters are replaced by ``values`` (``{"1": "'done'"}``). None when it cannot be
    written so (an "other" form, a parameter without a value, a column or expression operand).
    """
    operands = []
    for operand in pred.operands:
        if operand.kind == "parameter":
            if operand.index is None or str(operand.index) not in (values or {}):
                return None
            operands.append((values or {})[str(operand.index)])
        elif operand.kind == "literal":
            operands.append(operand.text)
        else:
            return None
    col = ident(pred.column)
    if pred.op == "is null":
        return f"{col} IS NULL"
    if pred.op == "is not null":
        return f"{col} IS NOT NULL"
    if pred.op in ("in", "not in") and operands:
        return f"{col} {pred.op.upper()} ({', '.join(operands)})"
    if pred.op == "any" and len(operands) == 1:
        return f"{col} = ANY ({operands[0]})"
    if pred.op in ("=", "<>", "<", "<=", ">", ">=") and len(operands) == 1:
        return f"{col} {pred.op} {operands[0]}"
    return None


def order_keys_sql(items: Sequence[OrderItem], table: Table) -> list[str] | None:
    """ORDER BY items as index key columns (``created_at``, ``priority DESC``); None when an
    item is not a plain column of ``table`` (an expression, another table's column)."""
    keys = []
    for item in items:
        if table.column(item.column) is None:
            return None
        key = ident(item.column)
        if item.descending:
            key += " DESC"
        if item.nulls_first is not None:
            key += " NULLS FIRST" if item.nulls_first else " NULLS LAST"
        keys.append(key)
    return keys


def predicate_words(preds: Sequence[Predicate], values: dict[str, str] | None = None) -> list[str]:
    """Words for an index name from the values of ``preds``: ``queued``, ``not_done``,
    ``finished_at_null`` (at most three), as QA101 names a live-set index."""
    words: list[str] = []
    for pred in preds:
        if pred.op == "is null":
            words.append(f"{pred.column}_null")
            continue
        prefix = "not_" if pred.op in ("<>", "not in") else ""
        for operand in pred.operands:
            text = operand.text
            if operand.kind == "parameter" and operand.index is not None:
                text = (values or {}).get(str(operand.index), "")
            arr = _array_values(text) if pred.op == "any" else None
            found = list(arr) if arr is not None else [literal_value(text)]
            words += [prefix + v for v in found if v is not None]
    return words[:3]
