"""The statements that build a scratch copy of one queue table at the shape a snapshot
measured: its enum types, its columns, its rows, then its indexes and constraints and its
reloptions. Pure: the snapshot holds statistics only, so every row is synthetic.

Rows are written in arrival order (``g`` from 1, timestamps oldest first, reaching back to
the oldest value pg_stats saw of the column, else a second apart) and
the newest are the live set, as in a queue whose workers take the oldest waiting jobs: the
live set's size from the snapshot's own estimate, its tenants from the per-tenant counts the
snapshot took, the archive's status from the most common values that are not live. Other
columns get one plain value of their type (their most common value where pg_stats has one),
unique per row where an index makes them unique. A table larger than ``max_rows`` is built
scaled down: the live set kept whole, the archive shortened.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from qadvisor.derive.estimates import live_rows, range_labels
from qadvisor.model import (
    Column,
    ColumnStats,
    Index,
    LivePredicate,
    Queue,
    Table,
    TenantFacts,
)
from qadvisor.sql.printing import RANGE_OPS, ident, literal, predicate_sql, qualified

_INTEGER = re.compile(r"^(smallint|integer|bigint|int[248]?|serial|bigserial)$")
_NUMBER = re.compile(r"^(numeric|decimal|real|double precision|float[48]?)(\(.*\))?$")
_TEXT = re.compile(r"^(text|character varying|varchar|character|char|citext|name)(\(.*\))?$")
_TIME = re.compile(r"^(timestamp|date|time)")


# A partial index measured at least this large may hold the dead entries of past churn, which
# a fresh build of the copy does not (QA102's smallest is 1 MB).
BLOAT_MIN_BYTES = 1024 * 1024


class CopyError(Exception):
    """The snapshot does not say enough to build this table (the reason is the message)."""


@dataclass(frozen=True)
class CopyPlan:
    """What builds one table's copy, in order: ``schema`` (types and the table), ``fill``
    (the rows), ``finish`` (indexes, constraints, reloptions)."""

    table: str  # "schema.table"
    schema: tuple[str, ...]
    fill: tuple[str, ...]
    finish: tuple[str, ...]
    # Run after ANALYZE: the checked table's column statistics where the planner reads them
    # (n_distinct, null_frac; the most common values unless scaled down, whose frequencies
    # would then misstate the copy).
    statistics: tuple[str, ...]
    statistics_of: tuple[str, ...]  # the column of each
    rows: int  # rows of the copy
    live: int  # of them, live
    table_rows: int  # rows the snapshot measured (reltuples)
    # The queue's churn, for a vacuum proof: ``claim`` takes __K__ live rows out of the live
    # set (one dead row version each); ``arrive`` inserts live rows __START__ to __STOP__.
    claim: str = ""
    arrive: str = ""
    # Partial indexes the checked server measured larger than a fresh build of the copy's can
    # be, (name, bytes wanted on the copy): dead entries of past churn, which the copy relives
    # by deleting __K__ live rows (``retire``) and letting as many arrive, before its VACUUM.
    bloated: tuple[tuple[str, int], ...] = ()
    retire: str = ""
    # Rows filled live that ``claim`` takes out of the live set after the VACUUM: the dead row
    # versions the checked table held (n_dead_tup), and their index entries.
    dead: int = 0

    @property
    def scaled_down(self) -> bool:
        return self.rows < self.table_rows


def plan_copy(queue: Queue, table: Table, tenants: TenantFacts | None, max_rows: int) -> CopyPlan:
    """The statements of ``table``'s copy. Raises CopyError where the snapshot lacks what
    the rows need (no live predicate of a known kind, no estimate of the live set)."""
    _refuse_smuggled(table, tenants)
    live = queue.live
    if live is None:
        raise CopyError("its live set is not known")
    by_name = {c.name: c for c in table.columns}
    for name in live.columns:
        if name not in by_name:
            raise CopyError(f"its live column {name} is not among its columns")
        if by_name[name].generated is not None:
            raise CopyError(
                f"its live column {name} is generated from other columns "
                f"({by_name[name].generated}), which a copy cannot be filled for yet"
            )
    if live.op == "or" and len(live.columns) < len(live.parts):
        raise CopyError(
            f"its live set ({predicate_sql(live)}) has two conditions on one column, which a "
            "copy cannot be filled for yet"
        )
    estimate = live_rows(table, live)
    if estimate.rows is None:
        raise CopyError(f"the size of its live set is not known: {estimate.source}")
    table_rows = max(round(table.reltuples), 0)
    live_n = min(round(estimate.rows), table_rows)
    rows = min(table_rows, max(max_rows, live_n))
    archive_n = rows - live_n
    # The dead row versions the checked table held (n_dead_tup): claims since its last vacuum,
    # each a row that left the live set; their entries are still in the live set's indexes,
    # where every claim walks past them. The newest archive rows are made live and retired
    # after the copy's VACUUM, one dead version each.
    dead = min(max(table.stats.n_dead_tup, 0), archive_n)
    # Each live column's value in a live row and in an archive row. A union's live rows meet
    # one of its conditions, the one statistics say holds most rows, and none of the others.
    parts = live.parts if live.op == "or" else (() if live.whole_table else (live,))
    by_column = {p.column: _as_values(p, table) for p in parts}
    lead = max(parts, key=lambda p: _part_rows(table, p)).column if len(parts) > 1 else None

    def live_value(c: Column, is_live: bool) -> str:
        part = by_column[c.name]
        return _live_value(c, table, part.op, part.values, is_live and lead in (None, c.name))

    unique = _unique_columns(table.indexes)
    tenant = tenants.tenant_column if tenants and tenants.live_by_tenant else None

    types = tuple(_enum_types(table))
    columns = ", ".join(_column_ddl(c) for c in table.columns)
    schema = (
        f"CREATE SCHEMA IF NOT EXISTS {ident(table.schema)}",
        *types,
        f"CREATE TABLE {qualified(table.schema, table.name)} ({columns})",
    )
    target = qualified(table.schema, table.name)
    stored = [c for c in table.columns if c.generated is None]
    names = ", ".join(ident(c.name) for c in stored)

    def select(is_live: bool, tenant_expr: str | None, source: str) -> str:
        values = []
        for n, c in enumerate(stored):
            if c.name in by_column:
                values.append(live_value(c, is_live))
            elif tenant_expr is not None and c.name == tenant:
                values.append(f"({tenant_expr})::{c.type}")
            else:
                stats = table.column_stats
                values.append(_other_value(c, stats, c.name in unique, rows, n, table_rows))
        # Each row's draws, made once (OFFSET 0 keeps the planner from copying their
        # expressions into every use).
        draws = ", ".join(f"{_draw(n, k)} AS d{n}_{k}" for n in range(len(stored)) for k in (0, 1))
        return (
            f"INSERT INTO {target} ({names}) SELECT {', '.join(values)} FROM {source}"
            f" CROSS JOIN LATERAL (SELECT {draws} OFFSET 0) AS drawn"
        )

    fill: list[str] = []
    archive_tenant = None
    if tenant is not None and tenants is not None:
        ids = _tenant_ids(tenants)
        archive_tenant = f"({_array(ids)})[1 + (g % {len(ids)})]"
    if archive_n > dead:
        fill.append(select(False, archive_tenant, f"generate_series(1, {archive_n - dead}) AS g"))
    if dead:
        span = f"generate_series({archive_n - dead + 1}, {archive_n}) AS g"
        fill.append(select(True, archive_tenant, span))
    if live_n:
        if tenant is not None and tenants is not None:
            counted = [(t.tenant, t.rows) for t in tenants.live_by_tenant]
            scale = live_n / max(sum(n for _, n in counted), 1)
            names_arr = _array([t for t, _ in counted])
            counts = "ARRAY[" + ", ".join(str(max(1, round(n * scale))) for _, n in counted) + "]"
            source = (
                f"(SELECT {archive_n} + row_number() OVER () AS g, t.tenant"
                f" FROM unnest({names_arr}, {counts}) AS t(tenant, n),"
                " generate_series(1, t.n)) AS s"
            )
            fill.append(select(True, "tenant", source))
        else:
            fill.append(select(True, None, f"generate_series({archive_n + 1}, {rows}) AS g"))
    finish = [*_indexes(table), *_reloptions(table)]
    if tenants is not None and tenants.rotation_table and tenants.rotation_columns:
        rotation = _rotation(tenants)
        schema = (*schema, *rotation[:2])
        fill.append(rotation[2])
        finish += rotation[3:]
    restores = _statistics(table, {c.name for c in stored}, scaled=rows < table_rows)
    picked = f"ctid = ANY(ARRAY(SELECT ctid FROM {target} WHERE {predicate_sql(live)} LIMIT __K__))"
    if live.whole_table:
        claim = f"DELETE FROM {target} WHERE {picked}"
    else:
        try:
            done = ", ".join(
                f"{ident(name)} = {live_value(by_name[name], False)}" for name in by_column
            )
            claim = f"UPDATE {target} SET {done} WHERE {picked}"
        except CopyError:
            claim = ""  # no value outside the live set is known: no churn to drive
    arrive = select(True, None, "generate_series(__START__, __STOP__) AS g")
    # Scaled down, a bloated index is wanted in proportion.
    share = rows / table_rows if table_rows else 1.0
    bloated = tuple(
        (i.name, round(i.bytes * share))
        for i in table.indexes
        if i.predicate and i.is_valid and i.is_ready and i.bytes * share >= BLOAT_MIN_BYTES
    )
    return CopyPlan(
        f"{table.schema}.{table.name}",
        schema,
        tuple(fill),
        tuple(finish),
        tuple(stmt for _, stmt in restores),
        tuple(column for column, _ in restores),
        rows,
        live_n,
        table_rows,
        claim,
        arrive,
        bloated if claim else (),
        f"DELETE FROM {target} WHERE {picked}" if claim else "",
        dead if claim else 0,
    )


# What a type name as format_type prints it may hold: names (quoted or not, qualified), a
# modifier in parentheses, "with time zone", array brackets. Nothing that ends a statement or
# opens a string.
_TYPE_NAME = re.compile(
    r'^[A-Za-z_"][\w$ ."]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?( with(out)? time zone)?(\[\d*\])*$'
)
_RELOPTION = re.compile(r"^[a-z_][a-z0-9_.]*$")
_INDEX_DEFINITION = re.compile(r"^CREATE (UNIQUE )?INDEX ", re.I)


def _refuse_smuggled(table: Table, tenants: TenantFacts | None) -> None:
    """CopyError for snapshot text that is not what the catalog prints: the snapshot is a
    file someone hands over, and its definitions and type names become SQL on the scratch
    server. An index definition must be one CREATE INDEX statement, a type a type's name, a
    generated column one expression. (The build also sends each statement alone, which the
    server refuses to split.)"""
    from qadvisor.sql.dequeue import StatementError, split_statements

    def one(text: str, what: str, pattern: re.Pattern[str] | None = None) -> None:
        try:
            statements = split_statements(text)
        except StatementError:
            statements = []
        if len(statements) != 1 or (pattern is not None and not pattern.match(statements[0])):
            raise CopyError(f"the snapshot's {what} is not what the catalog prints: refused")

    columns = (*table.columns, *(tenants.rotation_columns if tenants else ()))
    for c in columns:
        if not _TYPE_NAME.match(c.type):
            raise CopyError(f"the snapshot's type of column {c.name} is not a type name: refused")
        if c.generated is not None:
            one(f"SELECT ({c.generated})", f"expression of generated column {c.name}")
    for i in table.indexes:
        if i.is_ready and i.is_valid:
            one(i.definition, f"definition of index {i.name}", _INDEX_DEFINITION)
    for definition in tenants.rotation_indexes if tenants else ():
        one(definition, "definition of an index of the rotation table", _INDEX_DEFINITION)
    for key in table.reloptions:
        if not _RELOPTION.match(key):
            raise CopyError(f"the snapshot's storage parameter {key!r} is not one: refused")


def _statistics(table: Table, columns: set[str], *, scaled: bool) -> list[tuple[str, str]]:
    """pg_restore_attribute_stats (PostgreSQL 18) of each column pg_stats described: what
    ANALYZE of synthetic rows cannot know, such as a tenant column's n_distinct that one
    sample of a skewed backlog got wrong and the planner's choice rests on."""
    out = []
    for cs in table.column_stats:
        if cs.column not in columns:
            continue
        args = [
            ("schemaname", f"{literal(table.schema)}::text"),
            ("relname", f"{literal(table.name)}::text"),
            ("attname", f"{literal(cs.column)}::text"),
            ("inherited", "false"),
            ("null_frac", f"{float(cs.null_frac)!r}::real"),
            ("n_distinct", f"{float(cs.n_distinct)!r}::real"),
        ]
        if not scaled and cs.most_common_vals and cs.most_common_freqs:
            vals = "ARRAY[" + ", ".join(literal(v) for v in cs.most_common_vals) + "]"
            freqs = ", ".join(repr(float(f)) for f in cs.most_common_freqs)
            args += [
                ("most_common_vals", f"({vals}::text[])::text"),
                ("most_common_freqs", f"ARRAY[{freqs}]::real[]"),
            ]
        pairs = ", ".join(f"{literal(k)}::text, {v}" for k, v in args)
        out.append((cs.column, f"SELECT pg_restore_attribute_stats({pairs})"))
    return out


def _rotation(tenants: TenantFacts) -> list[str]:
    """The rotation table of a round-robin claim: CREATE, its rows (one per tenant, those
    with live rows and the idle ones), then its indexes. The snapshot does not say where in
    the rotation's order the idle tenants are: they are put first (the oldest timestamps,
    the lowest numbers), so that a claim that walks them walks them all, as the snapshot's
    probe of the rotation found it could."""
    assert tenants.rotation_table is not None
    target = qualified(tenants.rotation_schema, tenants.rotation_table)
    columns = ", ".join(_column_ddl(c) for c in tenants.rotation_columns)
    ids = _tenant_ids(tenants)
    live_ids = ids[: len(tenants.live_by_tenant)]
    ordered = ids[len(live_ids) :] + live_ids
    n = len(ordered)
    stored = [c for c in tenants.rotation_columns if c.generated is None]
    values = []
    for c in stored:
        if c.name == tenants.rotation_tenant_column:
            values.append(f"(({_array(ordered)})[g])::{c.type}")
        else:
            values.append(_plain_value(c, (), False, n))
    names = ", ".join(ident(c.name) for c in stored)
    return [
        f"CREATE SCHEMA IF NOT EXISTS {ident(tenants.rotation_schema or 'public')}",
        f"CREATE TABLE {target} ({columns})",
        f"INSERT INTO {target} ({names}) SELECT {', '.join(values)}"
        f" FROM generate_series(1, {n}) AS g",
        *tenants.rotation_indexes,
    ]


def _enum_types(table: Table) -> list[str]:
    """CREATE TYPE of each enum the columns use, once each."""
    out: dict[str, str] = {}
    for c in table.columns:
        if c.enum_labels and c.type not in out:
            labels = ", ".join(literal(v) for v in c.enum_labels)
            out[c.type] = f"CREATE TYPE {c.type} AS ENUM ({labels})"
    return list(out.values())


def _column_ddl(c: Column) -> str:
    out = f"{ident(c.name)} {c.type}"
    if c.generated is not None:
        out += f" GENERATED ALWAYS AS ({c.generated}) STORED"
    if c.not_null:
        out += " NOT NULL"
    return out


def _unique_columns(indexes: tuple[Index, ...]) -> set[str]:
    """Columns that lead a unique index (their values must differ row by row)."""
    return {i.columns[0] for i in indexes if i.is_unique and i.columns and i.columns[0]}


def _tenant_ids(tenants: TenantFacts) -> list[str]:
    """Every tenant of the queue: those with live rows, then the idle ones of the rotation
    (named after the last counted one, as the snapshot does not name them)."""
    ids = [t.tenant for t in tenants.live_by_tenant]
    idle = tenants.idle_tenants or 0
    if idle and all(re.fullmatch(r"-?\d+", t) for t in ids):
        top = max(int(t) for t in ids)
        ids += [str(top + k) for k in range(1, idle + 1)]
    elif idle:
        ids += [f"idle-{k}" for k in range(1, idle + 1)]
    return ids


def _array(values: list[str]) -> str:
    return "ARRAY[" + ", ".join(literal(v) for v in values) + "]::text[]"


def _mcv(stats: tuple[ColumnStats, ...], column: str) -> list[tuple[str, float]]:
    for s in stats:
        if s.column == column and s.most_common_vals and s.most_common_freqs:
            return list(zip(s.most_common_vals, s.most_common_freqs, strict=False))
    return []


def _part_rows(table: Table, part: LivePredicate) -> float:
    """The rows one condition of a union holds, estimated as the union estimates it (0 when
    statistics cannot say)."""
    return live_rows(table, LivePredicate.any_of((part,))).rows or 0.0


def _as_values(live: LivePredicate, table: Table) -> LivePredicate:
    """A range over an enum (``state < 'active'``) as the labels it holds, in the enum's
    order: the copy fills a list of values. Other predicates as they are."""
    if live.op not in RANGE_OPS or len(live.values) != 1:
        return live
    held = range_labels(table, live)
    return live if held is None else dataclasses.replace(live, op="in", values=held)


def _live_value(c: Column, table: Table, op: str, values: tuple[str, ...], is_live: bool) -> str:
    """The live column's value: a live value (several spread by their frequencies) for a live
    row; the most common value that is not live for an archive row."""
    if op in ("is null", "is not null"):
        null = (op == "is null") == is_live
        return f"NULL::{c.type}" if null else _plain_value(c, table.column_stats, False, 1)
    if op in ("true", "false"):
        value = (op == "true") == is_live
        return f"{str(value).lower()}::{c.type}"
    if op not in ("in", "not in"):
        raise CopyError(f"its live predicate ({op}) is not one a copy can be filled for")
    wanted_in = (op == "in") == is_live
    known = [v for v, _ in _mcv(table.column_stats, c.name)] + list(c.enum_labels)
    if wanted_in:
        pool = list(values)
    else:
        pool = [v for v in known if v not in values][:1]
        if not pool:
            raise CopyError(
                f"no value of {c.name} outside its live set is known (pg_stats holds none)"
            )
    if len(pool) == 1:
        return f"{literal(pool[0])}::{c.type}"
    arr = _array(pool)
    return f"(({arr})[1 + (g % {len(pool)})])::{c.type}"


# A column whose values follow the rows' physical order at least this closely (pg_stats'
# correlation) is filled in that order; others in an order drawn from the row number.
CORRELATED = 0.5
# Types filled plainly whatever pg_stats says (wide or unordered values no claim compares).
_PLAIN_TYPES = ("json", "jsonb", "bytea", "uuid")


def _other_value(
    c: Column, stats: tuple[ColumnStats, ...], unique: bool, rows: int, n: int, table_rows: int
) -> str:
    """A column outside the live predicate: its values as pg_stats describes them (NULLs in
    their share, its most common values in their frequencies, the rest spread over its
    histogram, in the rows' order where it correlates with it), so that a claim's other
    conditions and joins match on the copy as they do on the checked table. Without
    statistics, or for a column unique rows need, one plain value (:func:`_plain_value`).
    ``n`` is the column's place: its draws are ``drawn.d{n}_0`` and ``drawn.d{n}_1``; a copy
    scaled down from ``table_rows`` keeps as many NULLs of a correlated column as the table,
    the newest rows, as it keeps its live set whole."""
    cs = next((s for s in stats if s.column == c.name), None)
    base = c.type.split("(")[0].strip().lower()
    if (
        cs is None
        or unique
        or base.endswith("[]")
        or base in _PLAIN_TYPES
        or (not cs.most_common_vals and not cs.histogram_bounds and cs.null_frac < 1)
    ):
        return _plain_value(c, stats, unique, rows)
    if cs.null_frac >= 1:
        return f"NULL::{c.type}"
    correlated = abs(cs.correlation or 0.0) >= CORRELATED
    filled = max(rows - min(cs.null_frac * max(table_rows, rows), rows), 1.0)
    # u: where the row falls in the column's distribution, 0 to 1. In order, the NULLs are
    # the newest rows (a time set later in a job's life is NULL for the youngest); drawn, a
    # second draw decides NULL or not.
    if correlated:
        u = f"((g - 0.5) / {filled!r})"
        if (cs.correlation or 0.0) < 0:
            u = f"(1 - {u})"
        null = f"g > {filled!r}"
    else:
        u, null = f"drawn.d{n}_0", f"drawn.d{n}_1 < {cs.null_frac!r}"
    cases: list[str] = []
    share = 1 - cs.null_frac
    upto = 0.0
    for value, freq in zip(cs.most_common_vals or (), cs.most_common_freqs or (), strict=False):
        upto += freq / share if share > 0 else 0.0
        cases.append(f"WHEN {u} < {min(upto, 1.0)!r} THEN {literal(value)}::{c.type}")
    rest = _histogram(c, cs, u, upto, rows)
    body = f"CASE {' '.join(cases)} ELSE {rest} END" if cases else rest
    if cs.null_frac > 0:
        body = f"CASE WHEN {null} THEN NULL ELSE {body} END"
    return f"({body})::{c.type}"


def _draw(n: int, k: int) -> str:
    """A number from 0 to 1 drawn from the row number, the same on every build (``n``, ``k``:
    the column's place and which of its draws)."""
    seed = 2 * n + k + 1
    return f"((hashint8extended(g::bigint, {seed}) & 9007199254740991)::float8 / 9007199254740992)"


def _histogram(c: Column, cs: ColumnStats, u: str, below: float, rows: int) -> str:
    """The value of a row past the most common values (``u`` from ``below`` to 1): spread
    over the histogram's buckets, each as full as the next; between the bounds for numbers
    and times, on the bounds otherwise (with the row number after them where the column has
    more distinct values than the bounds). The most common value when there is no
    histogram."""
    bounds = cs.histogram_bounds or ()
    if len(bounds) < 2:
        mcv = cs.most_common_vals or ()
        return f"{literal(mcv[0])}::{c.type}" if mcv else _plain_value(c, (), False, rows)
    r = f"greatest(least(({u} - {below!r}) / {max(1.0 - below, 1e-9)!r}, 0.999999999), 0)"
    n = len(bounds) - 1
    base = c.type.split("(")[0].strip().lower()
    dated = base.startswith(("timestamp", "date"))
    if dated or _INTEGER.match(base) or _NUMBER.match(c.type.lower()):
        kind = "float8" if not dated else (
            "timestamptz" if "with time zone" in c.type.lower() else "timestamp"
        )  # fmt: skip
        h = f"(ARRAY[{', '.join(literal(b) for b in bounds)}]::{kind}[])"
        i = f"(1 + floor({r} * {n})::int)"
        frac = f"({r} * {n} - floor({r} * {n}))"
        return f"({h}[{i}] + ({h}[{i} + 1] - {h}[{i}]) * {frac})::{c.type}"
    h = f"(ARRAY[{', '.join(literal(b) for b in bounds)}]::text[])"
    pick = f"{h}[1 + floor({r} * {n + 1})::int]"
    distinct = -cs.n_distinct * rows if cs.n_distinct < 0 else cs.n_distinct
    if distinct > 2 * len(bounds) and (_TEXT.match(c.type.lower()) or base == "text"):
        pick = f"({pick} || lpad(g::text, 10, '0'))"
    return f"({pick})::{c.type}"


def _plain_value(c: Column, stats: tuple[ColumnStats, ...], unique: bool, rows: int) -> str:
    base = c.type.split("(")[0].strip().lower()
    if base.endswith("[]"):
        return f"'{{}}'::{c.type}"
    if c.enum_labels:
        mcv = _mcv(stats, c.name)
        return f"{literal(mcv[0][0] if mcv else c.enum_labels[0])}::{c.type}"
    if _INTEGER.match(base) or _NUMBER.match(c.type.lower()):
        # Without a most common value, the row number: ids then follow arrival order, as a
        # claim that takes the lowest id expects.
        mcv = [] if unique else _mcv(stats, c.name)
        return f"{literal(mcv[0][0])}::{c.type}" if mcv else f"g::{c.type}"
    if _TEXT.match(c.type.lower()):
        if unique:
            return f"md5(g::text)::{c.type}"
        mcv = _mcv(stats, c.name)
        return f"{literal(mcv[0][0])}::{c.type}" if mcv else f"'x'::{c.type}"
    if _TIME.match(base):
        # Arrival order: the first row the oldest, the newest now; spread back to the oldest
        # value ANALYZE saw, so the archive is as old as the checked table's (QA204 judges
        # its age), else one second apart.
        oldest = next((st.lower_bound for st in stats if st.column == c.name), None)
        if oldest and oldest[:1].isdigit() and base.startswith("timestamp"):
            # Read in UTC (column_stats.sql); cast as the copy's session reads a timestamp.
            since = f"({literal(oldest + '+00')}::timestamptz)::{c.type}"
            return f"({since} + (now()::{c.type} - {since}) * (g::float8 / {rows}))::{c.type}"
        return f"(now() - make_interval(secs => {rows} - g))::{c.type}"
    if base == "boolean":
        mcv = _mcv(stats, c.name)
        return f"{literal(mcv[0][0]) if mcv else 'false'}::boolean"
    if base == "uuid":
        return "gen_random_uuid()"
    if base in ("json", "jsonb"):
        return f"'{{}}'::{c.type}"
    if base == "bytea":
        return "''::bytea"
    if base == "interval":
        return "interval '0'"
    if not c.not_null:
        return f"NULL::{c.type}"
    raise CopyError(f"no value can be made up for {c.name} ({c.type})")


def _indexes(table: Table) -> list[str]:
    """Each index by its definition (the ready ones: one a build left unfinished holds no
    entries to copy), then the constraints that own an index."""
    out = []
    for i in table.indexes:
        if not i.is_ready or not i.is_valid:
            continue
        out.append(i.definition)
    target = qualified(table.schema, table.name)
    for i in table.indexes:
        if not (i.is_ready and i.is_valid and i.is_constraint):
            continue
        if i.predicate or None in i.columns:
            continue  # an exclusion or expression constraint: the index stands alone
        kind = "PRIMARY KEY" if i.is_primary else "UNIQUE" if i.is_unique else None
        if kind:
            out.append(
                f"ALTER TABLE {target} ADD CONSTRAINT {ident(i.name)} {kind}"
                f" USING INDEX {ident(i.name)}"
            )
    return out


def _reloptions(table: Table) -> list[str]:
    if not table.reloptions:
        return []
    opts = ", ".join(f"{k} = {literal(v)}" for k, v in sorted(table.reloptions.items()))
    return [f"ALTER TABLE {qualified(table.schema, table.name)} SET ({opts})"]
