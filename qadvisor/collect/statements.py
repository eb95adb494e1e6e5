"""Dequeue statements: found, their names resolved as the application's session resolved them,
and judged as claims or left out.

Where they come from:

- pg_stat_statements (when installed and preloaded): one bounded read of the statements of
  this database that lock rows (``queries.pg_stat_statements``), and of the UPDATEs and
  DELETEs without a locking clause, of which only maintenance is kept (a purge by age reads
  the whole table it tidies, lock or no lock). Their text is normalised (every constant is
  ``$n``), so ``from_normalised_text`` is set.
- The user's statements, already split by the CLI into (source, text) pairs. A ``--query``
  was checked to be one plannable statement; statements of a ``--query-file`` that are not
  row-locking dequeues are left alone (a repository's SQL file holds migrations too).

Names: pg_stat_statements keeps ``FROM jobs`` as the application wrote it. Each statement's
tables are resolved (``qadvisor.derive.names``) under the search_path of the roles that ran it, in
this database; where that finds nothing (a driver or pooler that sets search_path itself),
under each schema that has a table of the queue table's name, so a schema-per-tenant database
gives one statement per schema. A statement on a partitioned table is a statement on that
table, one queue whose partitions are judged together. The resolution travels with the
statement: the planner plans under its search_path, and every query derived from it (the
rotation table's count, tenant probes) uses the schema its names resolved to.

Claims: only statements that choose which job to take are judged as dequeues
(``qadvisor.derive.claims``); foreign-key checks and key locks are kept as ``LeftOut`` with
the reason. Maintenance statements (a reaper, a pruner: ``DequeueStatement.maintenance``) are
no claims either: they are gathered apart, with their names resolved like a claim's, and give
discovery no evidence. A write without a locking clause that names its rows by a unique key
(``DELETE FROM jobs WHERE id = $1``, an acknowledgement) is no maintenance: it reads a row, not
the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qadvisor.derive import claims, names
from qadvisor.derive.discover import Claim
from qadvisor.derive.statement_queues import statement_label
from qadvisor.model import LeftOut, Statement
from qadvisor.sql import dequeue
from qadvisor.sql.function_claims import FunctionClaim
from qadvisor.sql.recorded_statements import called_functions, match_nested
from qadvisor.sql.updates import update_targets

# pg_stat_statements keeps a SQL-level PREPARE with its statement: "PREPARE s(text) AS ...".
_PREPARE_PREFIX = re.compile(
    r"^\s*PREPARE\s+(?:\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_$]*)\s*"
    r"(?:\((?:[^()]|\([^()]*\))*\))?\s*AS\s+",
    re.IGNORECASE,
)
_LOCKING_WORDS = re.compile(r"\bfor\s+(no\s+key\s+)?update\b|\bfor\s+(key\s+)?share\b", re.I)


@dataclass
class Gathered:
    """Statements ready for discovery and planning."""

    statements: list[Statement] = field(default_factory=list)  # claims, one per queue table
    claims: list[Claim] = field(default_factory=list)  # the same, as discovery evidence
    left_out: list[LeftOut] = field(default_factory=list)
    # Maintenance statements (reapers, pruners), one per table they tidy; not claims.
    maintenance: list[Statement] = field(default_factory=list)


def strip_prepare(text: str) -> str:
    m = _PREPARE_PREFIX.match(text)
    return text[m.end() :] if m else text


def found_statements(
    pgss: Sequence[Mapping[str, Any]],
    queries: Sequence[tuple[str, str]],
    function_claims: Sequence[FunctionClaim] = (),
    calls: Sequence[Mapping[str, Any]] = (),
    writes: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[Statement], list[LeftOut], frozenset[int]]:
    """Statements from pg_stat_statements rows, the user's (source, text) pairs and the
    claims of functions (with the pg_stat_statements ``calls`` of those functions), parsed;
    not yet resolved; and the functions' claims that cannot be analysed, left out with why.
    A user's statement that cannot be judged keeps its reason in ``plan_error``. Of the
    recorded ``writes`` without a locking clause, those that are maintenance are kept; the
    others are the application's ordinary writes and leave no trace here.

    A statement pg_stat_statements recorded inside a function (``track = all``) is the
    function's claim: its counters go to the claim, whose text has the body's literals and
    typed placeholders for the variables (the recorded text names the variables and fails to
    plan). The queryids of such entries are the third value: they are the functions'
    statements, not other statements on the queue tables (collect/stakeholders.py).
    """
    nested: dict[int, list[Mapping[str, Any]]] = {}
    top = []
    for r in pgss:
        claim = (
            match_nested(strip_prepare(str(r["query"])), function_claims)
            if r.get("toplevel") is False and function_claims
            else None
        )
        if claim is not None:
            nested.setdefault(id(claim), []).append(r)
        else:
            top.append(r)
    in_functions, left_out = _from_functions(function_claims, nested, calls)
    recorded, unread = _from_pg_stat_statements(top)
    maintenance, _ = _from_pg_stat_statements(writes, dequeue.analyse_write)
    in_bodies = frozenset(int(r["queryid"]) for rows in nested.values() for r in rows)
    found = [*recorded, *maintenance, *in_functions, *_from_queries(queries)]
    return found, [*unread, *left_out], in_bodies


def _from_functions(
    claims: Sequence[FunctionClaim],
    nested: Mapping[int, Sequence[Mapping[str, Any]]],
    calls: Sequence[Mapping[str, Any]],
) -> tuple[list[Statement], list[LeftOut]]:
    callers: dict[str, list[Mapping[str, Any]]] = {}
    for r in calls:
        for schema, name in called_functions([str(r["query"])]):
            for fc in claims:
                fschema, _, fname = fc.function.rpartition(".")
                if fname == name and schema in (None, fschema):
                    callers.setdefault(fc.function, []).append(r)
    out: list[Statement] = []
    left_out: list[LeftOut] = []
    for fc in claims:
        where = f"function {fc.function}, line {fc.line}"
        if fc.skip:
            left_out.append(LeftOut(where, fc.text, f"not analysed: {fc.skip}", None))
            continue
        try:
            parsed = dequeue.analyse(fc.text)
            fingerprint = dequeue.fingerprint(fc.text)
        except dequeue.StatementError as exc:
            left_out.append(LeftOut(where, fc.text, f"not analysed: {exc}", None))
            continue
        if parsed is None:
            continue
        # The claim's own executions when pg_stat_statements saw them nested, else the
        # calls of the function (each call runs the claim once, or not at all).
        rows = list(nested.get(id(fc), ())) or list(
            {id(r): r for r in callers.get(fc.function, ())}.values()
        )
        n = sum(int(r["calls"]) for r in rows)
        mean = sum(float(r["mean_exec_ms"] or 0) * int(r["calls"]) for r in rows) / n if n else None
        roles = tuple(sorted({str(x) for r in rows for x in r.get("roles") or () if x}))
        out.append(
            Statement(
                source=where,
                text=fc.text,
                parsed=parsed,
                fingerprint=fingerprint,
                function=fc.signature,
                line=fc.line,
                param_types=fc.param_types,
                calls=n or None,
                mean_exec_ms=_round(mean),
                roles=roles,
                role=roles[0] if len(roles) == 1 else None,
                search_path=names.path_setting(fc.search_path) if fc.search_path else None,
            )
        )
    return out, left_out


def relation_names(statements: Iterable[Statement]) -> list[str]:
    """Every table name the statements use (what the catalog must be read for)."""
    out: dict[str, None] = {}
    for s in statements:
        for _, name in s.parsed.relations if s.parsed else ():
            out[name] = None
    return list(out)


def gather(
    statements: Sequence[Statement],
    catalog: names.Catalog,
    path_of: Callable[[str | None], names.SearchPath],
    session_path: names.SearchPath,
) -> Gathered:
    """Resolve each statement's names and judge it.

    ``path_of(role)`` is the search_path a role's sessions start with here (None: a role that
    is not known, which starts with the server's); a user's statement is resolved under
    qadvisor's own ``session_path`` first.
    """
    out = Gathered()
    for stmt in statements:
        parsed = stmt.parsed
        if parsed is None:
            out.statements.append(stmt)
            continue
        if stmt.function is not None and stmt.search_path is not None:
            # The function's own SET search_path: its names resolve under it.
            tried = [names.SearchPath(None, stmt.search_path, f"SET of {stmt.function}")]
        elif stmt.source == "pg_stat_statements" or stmt.function is not None:
            # A function's names resolve under its caller's search_path.
            tried = [path_of(r) for r in stmt.roles] or [path_of(None)]
        else:
            tried = [session_path]
        schemas = [r.schema for r in catalog.named(parsed.table) if r.is_table]
        resolutions, why = names.resolve(parsed.relations, tried, catalog, schemas)
        if not resolutions:
            out.statements.append(replace(stmt, plan_error=f"names not resolved: {why}"))
            continue
        for res in resolutions:
            _judge(stmt, parsed, res, out)
    out.statements = _merged(out.statements)
    out.maintenance = _merged(out.maintenance)
    return out


_RUNTIME = ("queryid", "calls", "mean_exec_ms", "shared_blks_per_call", "plans_per_call",
            "rows_per_call", "roles", "role")  # fmt: skip


def _merged(found: list[Statement]) -> list[Statement]:
    """One statement per claim and queue: a claim given in a --query-file and seen in
    pg_stat_statements (same fingerprint, same queue) is the file's statement, its exact text
    and line, with the counters pg_stat_statements has for it."""
    runtime: dict[tuple[str, str], Statement] = {}
    for s in found:
        if s.source == "pg_stat_statements" and s.queue and s.fingerprint:
            key = (s.fingerprint, s.queue)
            runtime[key] = _combined(runtime[key], s) if key in runtime else s
    given = {
        (s.fingerprint, s.queue)
        for s in found
        if s.source != "pg_stat_statements" and s.queue and s.fingerprint
    }
    out = []
    emitted: set[tuple[str, str]] = set()
    for s in found:
        key = (s.fingerprint, s.queue or "")
        if s.source == "pg_stat_statements" and s.queue and s.fingerprint:
            # Entries of one shape on one queue are one statement: pg_stat_statements keeps
            # one per queryid, and a queryid differs per schema (schema per tenant) and
            # per role.
            if key in given or key in emitted:
                continue
            emitted.add(key)
            out.append(runtime[key])
            continue
        seen = runtime.get(key) if s.source != "pg_stat_statements" else None
        if seen is not None:
            s = replace(s, **{f: getattr(seen, f) for f in _RUNTIME})
        out.append(s)
    return out


def _judge(
    stmt: Statement, parsed: dequeue.DequeueStatement, res: names.Resolution, out: Gathered
) -> None:
    rel = res.tables[(parsed.schema, parsed.table)]
    resolved = {_written(s, n): r.qualified for (s, n), r in res.tables.items()}
    keys = {r.qualified: r.unique_keys for r in res.tables.values() if r.unique_keys}
    label = statement_label(stmt)
    if not rel.is_table:
        out.left_out.append(LeftOut(label, stmt.text, f"{rel.qualified} is not a table", None))
        return
    if parsed.maintenance is not None:
        if not parsed.locking_clause and _by_key(parsed, rel.unique_keys):
            # An acknowledgement of rows it names by key: it reads them, not the table.
            if stmt.source.startswith("--query"):
                why = (
                    "takes no row lock (FOR UPDATE / FOR SHARE) and names its rows by a unique "
                    "key: neither a dequeue statement nor maintenance"
                )
                out.statements.append(replace(stmt, parsed=None, plan_error=why))
            return
        # Tidies the table (resets or deletes rows by age): kept for what it costs, never
        # judged as a claim, never evidence that the table is a queue.
        out.maintenance.append(
            replace(
                stmt,
                queue=rel.qualified,
                names=dict(resolved),
                search_path=res.search_path,
                resolved_by=res.how,
            )
        )
        return
    verdict = claims.judge(parsed, rel.unique_keys, stmt.toplevel)
    if not verdict.is_claim:
        if stmt.source.startswith("--query"):
            # Given on purpose: the user hears why it is not judged, as a skip. Without its
            # analysis no check takes it for a dequeue (the lock checks judge claims only).
            out.statements.append(
                replace(stmt, parsed=None, plan_error=f"not judged as a claim: it {verdict.reason}")
            )
        else:
            out.left_out.append(LeftOut(label, stmt.text, verdict.reason, rel.qualified))
        return
    out.statements.append(
        replace(
            stmt,
            queue=rel.qualified,
            names=dict(resolved),
            unique_keys=keys,
            search_path=res.search_path,
            resolved_by=res.how,
        )
    )
    out.claims.append(
        Claim(
            rel.relid,
            rel.schema,
            rel.name,
            label,
            parsed.predicates,
            _skip_locked(parsed),
            stmt.calls,
            parsed.unconditional,
            parsed.by_value,
            tuple(o.column for o in parsed.order_by),
            due=parsed.due,
            sets=_sets(parsed.text, resolved, rel.qualified),
        )
    )


def _sets(text: str, resolved: dict[str, str], table: str) -> tuple[tuple[str, str], ...]:
    """The values the statement's UPDATEs of ``table`` write as literals (``SET status =
    'running'``): states a row leaves the live set for."""
    out: list[tuple[str, str]] = []
    for target in update_targets(text) or ():
        if resolved.get(_written(target.schema, target.table)) == table:
            out += target.literals
    return tuple(dict.fromkeys(out))


def _by_key(parsed: dequeue.DequeueStatement, keys: Sequence[tuple[str, ...]]) -> bool:
    """Its conditions name rows by a unique key: every column of one is compared with values
    (``id = $1``, ``id = ANY($1)``, ``(queue, key) = ...`` as two equalities)."""
    pinned = {p.column for p in parsed.predicates if p.op in ("=", "in", "any") and p.operands}
    return any(key and set(key) <= pinned for key in keys)


def _combined(a: Statement, b: Statement) -> Statement:
    """Two pg_stat_statements entries of one statement as one: counters added (per-call
    figures weighted by calls), the most called one's text and queryid kept."""
    first = a if (a.calls or 0) >= (b.calls or 0) else b
    ca, cb = a.calls or 0, b.calls or 0

    def weighted(x: float | None, y: float | None) -> float | None:
        if x is None or y is None or not ca + cb:
            return None
        return _round((x * ca + y * cb) / (ca + cb))

    roles = tuple(sorted({*a.roles, *b.roles}))
    return replace(
        first,
        calls=(ca + cb) or None,
        mean_exec_ms=weighted(a.mean_exec_ms, b.mean_exec_ms),
        shared_blks_per_call=weighted(a.shared_blks_per_call, b.shared_blks_per_call),
        plans_per_call=weighted(a.plans_per_call, b.plans_per_call),
        rows_per_call=weighted(a.rows_per_call, b.rows_per_call),
        roles=roles,
        role=roles[0] if len(roles) == 1 else None,
    )


def _written(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name


def _skip_locked(parsed: dequeue.DequeueStatement) -> bool:
    return parsed.lock.wait_policy == "skip locked"


# --- finding them ---------------------------------------------------------------------------


def _from_pg_stat_statements(
    rows: Sequence[Mapping[str, Any]],
    analyse: Callable[[str], dequeue.DequeueStatement | None] = dequeue.analyse,
) -> tuple[list[Statement], list[LeftOut]]:
    """The recorded statements ``analyse`` reads (the row-locking ones, by default), and
    those that cannot be analysed, left out with why (a statement the server ran is never
    dropped without a trace)."""
    out = []
    left_out = []
    for r in rows:
        recorded = strip_prepare(str(r["query"]))
        try:
            # A typed literal whose string became $n (timestamptz $2) is the cast it means.
            text = dequeue.typed_placeholders(recorded)
            parsed = analyse(text)
            fingerprint = dequeue.fingerprint(text)
        except dequeue.StatementError as exc:
            where = f"pg_stat_statements {r['queryid']}"
            left_out.append(LeftOut(where, recorded, f"not analysed: {exc}", None))
            continue
        if parsed is None:
            continue
        calls = int(r["calls"])
        roles = tuple(str(x) for x in r["roles"] or () if x is not None)
        plans = r.get("plans")
        out.append(
            Statement(
                source="pg_stat_statements",
                text=text,
                parsed=parsed,
                from_normalised_text=True,
                queryid=int(r["queryid"]),
                role=roles[0] if len(roles) == 1 else None,
                roles=roles,
                calls=calls,
                mean_exec_ms=_round(r["mean_exec_ms"]),
                shared_blks_per_call=_round(r["shared_blks_per_call"]),
                rows_per_call=_round(int(r["rows"]) / calls) if r.get("rows") is not None else None,
                plans_per_call=_round(int(plans) / calls)
                if r.get("track_planning") and plans is not None
                else None,
                fingerprint=fingerprint,
                toplevel=r.get("toplevel"),
            )
        )
    return out, left_out


def _from_queries(queries: Sequence[tuple[str, str]]) -> list[Statement]:
    out = []
    for source, text in queries:
        from_file = not source.startswith("--query")
        line = _line_of(source)
        try:
            # A statement without a row lock may still be maintenance (a purge by age).
            parsed = dequeue.analyse(text) or dequeue.analyse_write(text)
            fingerprint = dequeue.fingerprint(text)
        except dequeue.StatementError as exc:
            # A file holds DDL and data changes too: only something that looks like a
            # dequeue is worth a note.
            if not from_file or _LOCKING_WORDS.search(text):
                out.append(Statement(source, text, plan_error=str(exc), line=line))
            continue
        if parsed is None:
            if not from_file:
                out.append(
                    Statement(
                        source,
                        text,
                        plan_error="takes no row lock (FOR UPDATE / FOR SHARE): "
                        "not a dequeue statement",
                    )
                )
            continue
        out.append(Statement(source, text, parsed=parsed, fingerprint=fingerprint, line=line))
    return out


def _line_of(source: str) -> int | None:
    head, _, tail = source.rpartition(":")
    return int(tail) if head and tail.isdigit() else None


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 3)
