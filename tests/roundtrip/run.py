"""The round trip: every row-locking statement the suite writes (and every function body that
holds one) is run on a real server, read back from pg_stat_statements, and given to qadvisor.

Layout on the server: statement (or function) number ``n`` gets a schema ``rt_n`` holding the
tables its unqualified names mean, and a role ``rt_n`` whose search_path in the database is
``rt_n`` (``ALTER ROLE ... IN DATABASE ... SET``): the application of that statement. So one
database holds many statements with tables of the same name and different shapes, each name
resolves as the application's session resolved it, and pg_stat_statements keeps each
statement apart by its role. Tables a statement names with a schema (``app.jobs``) are shared
by the statements of one database: statements that need such a table with conflicting column
types go to another database.

Running: in a transaction that is rolled back, the statement is described first (with
pg_stat_statements off, so the probe leaves no trace) for the types the server infers for its
parameters, then run as its role with a sample value of each type bound through psycopg's
libpq binding (the extended protocol, as drivers send it): pg_stat_statements records the text
with every constant as ``$n``. A function is created, then called as its role with sample
arguments. The tables are empty: what pg_stat_statements records does not depend on the rows.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq, sql

from tests.helpers import qadvisor
from tests.roundtrip.schema import Function, Reads, function, reads, registry, type_from_name
from tests.sql.postgres_parser import (
    function_lock_sites,
    postgres_reading,
    suite_functions,
    suite_statements,
)

# Statements (and functions) per database: pg_stat_statements is read up to 200 row-locking
# entries (collect/recorded.py, row_locking), and a function's nested statements count too.
BATCH = 110
_TEXT_OID = 25
_INDETERMINATE = "42P18"  # could not determine data type of parameter $n


# How a snapshot says a claim was not planned because no value of its parameter is known.
VALUE_UNKNOWN = "not planned: no value it waits for on"


@dataclass
class Case:
    """One harvested statement, or one function whose body locks rows."""

    number: int
    where: str  # path:line of the string it came from
    text: str  # the statement, or the CREATE FUNCTION
    fn: Function | None = None
    sites: tuple[str, ...] = ()  # a function's row-locking statements, as PostgreSQL splits it
    tables: list[TableSpec] = field(default_factory=list)
    types: list[tuple[str | None, str]] = field(default_factory=list)  # (schema, user type)
    made: str | None = None  # why its tables or function could not be made
    ran: str | None = None  # why it could not run
    ran_state: str | None = None  # the server's error code of that
    recorded: list[dict[str, Any]] = field(default_factory=list)  # its pg_stat_statements rows

    @property
    def name(self) -> str:
        """Its schema and its role."""
        return f"rt_{self.number}"

    @property
    def home(self) -> str:
        """The schema its unqualified names mean: its own, or the schema its function is
        created in (a function's body names the tables beside it, as the suite's tests that
        create ``app.claim`` with ``search_path = app`` have it)."""
        return self.fn.schema if self.fn is not None and self.fn.schema else self.name

    @property
    def label(self) -> str:
        what = f"function {self.fn.name}" if self.fn else "statement"
        return f"#{self.number} {what} of {self.where}"


@dataclass
class TableSpec:
    schema: str | None  # None: the case's own schema
    name: str
    columns: dict[str, str]
    keys: tuple[tuple[str, ...], ...]
    where: str  # the CREATE TABLE it follows, or "derived"


def harvest() -> list[Case]:
    """Every row-locking statement of the suite (as PostgreSQL's parser reads it) and every
    PL/pgSQL or SQL function of the suite whose body holds one."""
    cases: list[Case] = []
    for where, text in suite_statements():
        reading = postgres_reading(text)
        if reading is not None and reading.locks:
            cases.append(Case(len(cases) + 1, where, as_written(text)))
    for where, text in suite_functions():
        sites = function_lock_sites(text)
        fn = function(text)
        if sites is None or not sites[0] or fn is None:
            continue
        cases.append(Case(len(cases) + 1, where, text, fn, tuple(sorted(sites[0]))))
    for case in cases:
        _derive(case)
    return cases


# pg_stat_statements' text of a typed literal (``INTERVAL '5 minutes'``, ``timestamptz
# '2024-01-01'``): the type name before a parameter, which no server accepts as written.
_TYPED_PLACEHOLDER = re.compile(
    r"\b(interval|timestamptz|timestamp|date|time)\s+\$(\d+)\b(?!\s*::)", re.IGNORECASE
)
_TYPED_SAMPLES = {"interval": "'5 minutes'", "date": "'2024-01-01'", "time": "'12:00'"}


def as_written(text: str) -> str:
    """A statement given as pg_stat_statements records it, as its application wrote it: each
    typed literal that became ``INTERVAL $n`` gets a literal back (the server records it as
    ``INTERVAL $n`` again)."""

    def literal(m: re.Match[str]) -> str:
        sample = _TYPED_SAMPLES.get(m.group(1).lower(), "'2024-01-01 00:00:00+00'")
        return f"{m.group(1)} {sample}"

    return _TYPED_PLACEHOLDER.sub(literal, text)


def _derive(case: Case) -> None:
    """The tables and types the case needs."""
    path, _, line = case.where.rpartition(":")
    found: list[Reads] = []
    if case.fn is None:
        found = [r for r in [reads(case.text)] if r is not None]
    else:
        for query in case.fn.statements:
            r = reads(query, case.fn.variables)
            if r is not None:
                found.append(r)
    reg = registry()
    specs: dict[tuple[str | None, str], TableSpec] = {}
    casts: set[str] = set()
    for r in found:
        casts |= r.casts
        for table in r.tables:
            spec = specs.get(table)
            if spec is None:
                d = reg.table(table[0], table[1], path, int(line))
                spec = (
                    TableSpec(table[0], table[1], dict(d.columns), d.keys, d.where)
                    if d is not None
                    else TableSpec(table[0], table[1], {}, (), "derived")
                )
                specs[table] = spec
            # The statement's own evidence of a column's type beats a definition in another
            # file (another test's table of the same name).
            foreign = spec.where.rpartition(":")[0] != path
            for column, hint in r.columns[table].items():
                if column not in spec.columns or (foreign and hint is not None):
                    spec.columns[column] = hint or type_from_name(column)
    for spec in specs.values():
        if not spec.columns:
            spec.columns["id"] = "bigint"
        if not spec.keys and "id" in spec.columns:
            spec.keys = (("id",),)
    if case.fn is not None and case.fn.schema:
        for spec in specs.values():
            spec.schema = spec.schema or case.fn.schema
    case.tables = list(specs.values())
    wanted = {*casts, *(t for s in specs.values() for t in s.columns.values())}
    for type_text in sorted(wanted):
        schema, name = _type_name(type_text)
        if name in reg.types:
            case.types.append((schema, name))


def _type_name(type_text: str) -> tuple[str | None, str]:
    bare = re.sub(r"\(.*\)|\[\]", "", type_text).strip()
    parts = [p.strip('"') for p in bare.split(".")]
    return (parts[-2] if len(parts) > 1 else None), parts[-1]


# --- batches -----------------------------------------------------------------------------------


def batches(cases: list[Case]) -> list[list[Case]]:
    """The cases in databases of at most BATCH, a table named with its schema (and a function
    so named) having one shape per database, functions apart from statements: from
    PostgreSQL 18 a queryid is computed from relation names, not OIDs, so a statement in one
    schema and a function's statement of the same shape on a table of the same name in
    another are one pg_stat_statements entry (grouped by queryid), as they would not be in
    the applications they stand for."""
    out: list[tuple[list[Case], dict[tuple[str, str], dict[str, str]]]] = []
    for case in sorted(cases, key=lambda c: c.fn is not None):
        shared = {(t.schema, t.name): t.columns for t in case.tables if t.schema is not None}
        if case.fn is not None and case.fn.schema is not None:
            shared[("function " + case.fn.schema, case.fn.name)] = {}
        for members, tables in out:
            apart = (members[0].fn is None) != (case.fn is None)
            if len(members) < BATCH and not apart and _fits(shared, tables):
                members.append(case)
                for key, columns in shared.items():
                    tables.setdefault(key, {}).update(columns)
                break
        else:
            out.append(([case], {k: dict(v) for k, v in shared.items()}))
    return [members for members, _ in out]


def _fits(
    shared: dict[tuple[str, str], dict[str, str]],
    tables: dict[tuple[str, str], dict[str, str]],
) -> bool:
    for key, columns in shared.items():
        if key[0].startswith("function ") and key in tables:
            return False
        have = tables.get(key, {})
        if any(c in have and have[c].lower() != t.lower() for c, t in columns.items()):
            return False
    return True


# --- building and running ------------------------------------------------------------------------


def _ident(name: str | None) -> sql.Composable:
    return sql.Identifier(name or "")


def build(conn: psycopg.Connection[Any], database: str, cases: list[Case]) -> None:
    """Schemas, roles' search_paths, types, tables and functions of the cases, each case on its
    own (one that cannot be made says why in ``made``)."""
    conn.execute("SET pg_stat_statements.track = 'none'")
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    reg = registry()
    shared: dict[tuple[str, str], TableSpec] = {}
    for case in cases:
        for t in case.tables:
            if t.schema is not None:
                have = shared.setdefault(
                    (t.schema, t.name), TableSpec(t.schema, t.name, {}, (), t.where)
                )
                have.columns.update(t.columns)
                have.keys = have.keys or t.keys
    made_shared: set[tuple[str, str]] = set()
    schemas: set[str] = set()
    for case in cases:
        path = case.where.rpartition(":")[0]
        mine: set[str] = set()
        try:
            with conn.transaction():
                me = _ident(case.name)
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(me))
                mine.add(case.name)
                conn.execute(
                    sql.SQL("ALTER ROLE {} IN DATABASE {} SET search_path = {}").format(
                        me, _ident(database), _ident(case.home)
                    )
                )
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(_ident(case.home)))
                mine.add(case.home)
                conn.execute(sql.SQL("SET search_path = {}").format(_ident(case.home)))
                for needed in {t.schema for t in case.tables if t.schema} | {
                    s for s, _ in case.types if s
                }:
                    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(_ident(needed)))
                    mine.add(needed)
                for schema, name in case.types:
                    d = reg.type(name, path)
                    assert d is not None
                    target = _ident(schema or case.home)
                    if d.labels:
                        made = sql.SQL("CREATE TYPE {}.{} AS ENUM ({})").format(
                            target, _ident(name), sql.SQL(", ").join(map(sql.Literal, d.labels))
                        )
                    else:
                        made = sql.SQL("CREATE DOMAIN {}.{} AS {}").format(
                            target, _ident(name), sql.SQL(d.base or "text")
                        )
                    exists = conn.execute(
                        "SELECT 1 FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace"
                        " WHERE n.nspname = %s AND t.typname = %s",
                        [schema or case.home, name],
                    ).fetchone()
                    if exists is None:
                        conn.execute(made)
                for t in case.tables:
                    if t.schema is None:
                        _create_table(conn, case.home, t)
                    elif (t.schema, t.name) not in made_shared:
                        _create_table(conn, t.schema, shared[(t.schema, t.name)])
                if case.fn is not None:
                    conn.execute(sql.SQL(case.text))
                else:
                    _complete(conn, case)
                shared_now = {(t.schema, t.name) for t in case.tables if t.schema is not None}
            schemas |= mine
            made_shared |= shared_now
        except psycopg.Error as exc:
            case.made = _line(exc)
    for schema in sorted(schemas):
        s = _ident(schema)
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO PUBLIC").format(s))
        conn.execute(sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA {} TO PUBLIC").format(s))
        conn.execute(sql.SQL("GRANT ALL ON ALL SEQUENCES IN SCHEMA {} TO PUBLIC").format(s))
    conn.execute("RESET search_path")


_MISSING = (
    re.compile(r'column "(?P<c>[^"]+)" of relation "(?P<t>[^"]+)" does not exist'),
    re.compile(r'column (?P<q>[^ ."]+)\.(?P<c>[^ ."]+) does not exist'),
    re.compile(r'column "(?P<c>[^"]+)" does not exist'),
)


def _complete(conn: psycopg.Connection[Any], case: Case) -> None:
    """Add the columns the derivation missed, as the server names them (a column read in a
    sub-select of another table than the statement's first): each missing column goes to the
    table the error names, else to the next of the statement's tables that lacks it."""
    tried: set[tuple[str, str]] = set()
    for _ in range(8):
        try:
            with conn.transaction():
                conn.execute(sql.SQL("PREPARE rt_check AS ") + sql.SQL(case.text))
                conn.execute("DEALLOCATE rt_check")
            return
        except psycopg.errors.UndefinedColumn as exc:
            match = next((m for p in _MISSING if (m := p.search(str(exc)))), None)
            if match is None:
                return
            column, table = match.group("c"), match.groupdict().get("t")
            spec = next(
                (
                    t
                    for t in case.tables
                    if (table is None or t.name == table)
                    and column not in t.columns
                    and (t.name, column) not in tried
                ),
                None,
            )
            if spec is None:
                return
            tried.add((spec.name, column))
            spec.columns[column] = type_from_name(column)
            conn.execute(
                sql.SQL("ALTER TABLE {}.{} ADD COLUMN {} {}").format(
                    _ident(spec.schema or case.home),
                    _ident(spec.name),
                    _ident(column),
                    sql.SQL(spec.columns[column]),
                )
            )
        except psycopg.Error:
            return  # the statement's other errors are the run's to report


def _create_table(conn: psycopg.Connection[Any], schema: str, t: TableSpec) -> None:
    parts: list[sql.Composable] = [
        sql.SQL("{} {}").format(_ident(c), sql.SQL(type_text)) for c, type_text in t.columns.items()
    ]
    for i, key in enumerate(t.keys):
        kind = "PRIMARY KEY" if i == 0 else "UNIQUE"
        parts.append(sql.SQL(kind + " ({})").format(sql.SQL(", ").join(map(_ident, key))))
    conn.execute(
        sql.SQL("CREATE TABLE {}.{} ({})").format(
            _ident(schema), _ident(t.name), sql.SQL(", ").join(parts)
        )
    )


def _line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class _Failed(Exception):
    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _check(res: pq.abc.PGresult) -> pq.abc.PGresult:
    if res.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        return res
    message = (res.error_message or b"").decode(errors="replace").strip()
    message = re.sub(r"^ERROR:\s*", "", message).splitlines()[0] if message else "failed"
    state = res.error_field(pq.DiagnosticField.SQLSTATE)
    raise _Failed(message, state.decode() if state else None)


def run(conn: psycopg.Connection[Any], cases: Iterable[Case]) -> None:
    """Run each case that was made, as its role, in a transaction rolled back."""
    pgconn = conn.pgconn
    for case in cases:
        if case.made is not None:
            continue
        _check(pgconn.exec_(b"BEGIN"))
        try:
            _setting(pgconn, "pg_stat_statements.track", "none")
            _setting(pgconn, "search_path", case.home)
            _setting(pgconn, "statement_timeout", "5s")
            _setting(pgconn, "lock_timeout", "1s")
            if case.fn is None:
                text = case.text
                declared, resolved = _describe(pgconn, text)
            else:
                text, resolved = _call(pgconn, case)
                declared = resolved
            values = [_sample(pgconn, oid) for oid in resolved]
            _setting(pgconn, "pg_stat_statements.track", "all")
            _check(pgconn.exec_(b"SET LOCAL ROLE " + _quoted(case.name)))
            _check(pgconn.exec_params(text.encode(), values, declared))
        except _Failed as exc:
            case.ran, case.ran_state = str(exc), exc.sqlstate
        finally:
            pgconn.exec_(b"ROLLBACK")


def _quoted(name: str) -> bytes:
    return b'"' + name.replace('"', '""').encode() + b'"'


def _setting(pgconn: pq.abc.PGconn, name: str, value: str) -> None:
    _check(
        pgconn.exec_params(
            b"SELECT set_config($1, $2, true)", [name.encode(), value.encode()], [25, 25]
        )
    )


def _describe(pgconn: pq.abc.PGconn, text: str) -> tuple[list[int], list[int]]:
    """The parameter types to send (0: the server infers it; text where it cannot, as a
    driver that sends strings as text has it) and those the server resolved."""
    reading = postgres_reading(text)
    count = max(reading.parameters, default=0) if reading else 0
    used = set(reading.parameters) if reading else set()
    types = [0 if k in used else _TEXT_OID for k in range(1, count + 1)]
    for _ in range(count + 1):
        res = _prepare(pgconn, text, types)
        try:
            _check(res)
        except _Failed as exc:
            m = re.search(r"parameter \$(\d+)", str(exc))
            if exc.sqlstate == _INDETERMINATE and m and types[int(m.group(1)) - 1] == 0:
                types[int(m.group(1)) - 1] = _TEXT_OID
                continue
            if exc.sqlstate in _TYPE_ERRORS:
                typed = _typed(pgconn, text, types, str(exc))
                if typed is not None:
                    types = typed
                    continue
            raise
        described = _check(pgconn.describe_prepared(b""))
        return types, [described.param_type(i) for i in range(described.nparams)]
    raise _Failed("parameter types not found", None)


def _prepare(pgconn: pq.abc.PGconn, text: str, types: list[int]) -> pq.abc.PGresult:
    """Parse ``text`` as the unnamed statement in a savepoint: a refusal costs only itself."""
    _check(pgconn.exec_(b"SAVEPOINT rt_describe"))
    res = pgconn.prepare(b"", text.encode(), types)
    if res.status != pq.ExecStatus.COMMAND_OK:
        _check(pgconn.exec_(b"ROLLBACK TO SAVEPOINT rt_describe"))
    return res


# "operator does not exist", "argument of ... must be type ...", "ambiguous function".
_TYPE_ERRORS = {"42883", "42804", "42725"}
_NAMED_TYPE = re.compile(
    r"\b(smallint|integer|bigint|numeric|boolean|interval|uuid|jsonb?|text|"
    r"timestamp with time zone|timestamp without time zone|date)\b"
)


def _typed(pgconn: pq.abc.PGconn, text: str, types: list[int], error: str) -> list[int] | None:
    """Where the server cannot type a parameter from its context (``now() - $2``), the
    application's driver gave it one: the first of the types the error names (``interval``
    where it names a time) that one parameter left to the server can take."""
    named = list(dict.fromkeys(_NAMED_TYPE.findall(error.split(":", 1)[-1])))
    if any(t.startswith(("date", "timestamp")) for t in named):
        named.insert(0, "interval")
    oids = []
    for name in dict.fromkeys(named):
        res = _check(pgconn.exec_params(b"SELECT $1::regtype::oid", [name.encode()], [25]))
        oids.append(int(res.get_value(0, 0) or 0))
    for k, given in enumerate(types):
        if given != 0:
            continue
        for oid in oids:
            attempt = [*types[:k], oid, *types[k + 1 :]]
            if _prepare(pgconn, text, attempt).status == pq.ExecStatus.COMMAND_OK:
                return attempt
    return None


def _call(pgconn: pq.abc.PGconn, case: Case) -> tuple[str, list[int]]:
    """The call of a case's function (the newest of its name in its schema) and its argument
    types."""
    assert case.fn is not None
    schema = case.fn.schema or case.name
    res = _check(
        pgconn.exec_params(
            b"SELECT p.prokind::text, array_to_string(p.proargtypes::oid[], ','),"
            b" format_type(p.prorettype, NULL)"
            b" FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            b" WHERE n.nspname = $1 AND p.proname = $2 ORDER BY p.oid DESC LIMIT 1",
            [schema.encode(), case.fn.name.encode()],
            [25, 25],
        )
    )
    if res.ntuples != 1:
        raise _Failed("the function was not created", None)
    kind, args, returns = (v.decode() if v else "" for v in (res.get_value(0, i) for i in range(3)))
    if returns in ("trigger", "event_trigger"):
        raise _Failed("a trigger function: only its trigger calls it", None)
    types = [int(a) for a in args.split(",") if a]
    target = f"{_quote(schema)}.{_quote(case.fn.name)}"
    placeholders = ", ".join(f"${k}" for k in range(1, len(types) + 1))
    verb = "CALL" if kind == "p" else "SELECT * FROM"
    return f"{verb} {target}({placeholders})", types


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_SAMPLES = {
    "N": b"1",  # numeric
    "B": b"true",
    "D": b"now",  # date and time: 'now' is valid input of each
    "T": b"1 minute",  # interval
    "A": b"{}",
    "S": b"x",
}


def _sample(pgconn: pq.abc.PGconn, oid: int) -> bytes | None:
    """A plain value of the type (NULL where there is none to guess)."""
    res = _check(
        pgconn.exec_params(
            b"SELECT coalesce(b.typcategory, t.typcategory)::text, format_type(t.oid, NULL),"
            b" (SELECT e.enumlabel::text FROM pg_enum e"
            b"   WHERE e.enumtypid = coalesce(b.oid, t.oid) ORDER BY e.enumsortorder LIMIT 1)"
            b" FROM pg_type t LEFT JOIN pg_type b ON b.oid = nullif(t.typbasetype, 0)"
            b" WHERE t.oid = $1",
            [str(oid).encode()],
            [26],
        )
    )
    if res.ntuples != 1:
        return None
    category, name, label = (res.get_value(0, i) for i in range(3))
    if label:
        return label
    if name in (b"uuid",):
        return b"00000000-0000-0000-0000-000000000000"
    if name in (b"json", b"jsonb"):
        return b"{}"
    return _SAMPLES.get((category or b"").decode())


def recorded(conn: psycopg.Connection[Any], cases: list[Case]) -> None:
    """Each case's pg_stat_statements rows: those of its role."""
    by_role = {c.name: c for c in cases}
    rows = conn.execute(
        "SELECT r.rolname, s.queryid, s.query, s.toplevel, s.calls"
        " FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid"
        " WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        "   AND s.calls > 0"
    ).fetchall()
    for role, queryid, query, toplevel, calls in rows:
        case = by_role.get(role)
        if case is not None:
            case.recorded.append(
                {"queryid": queryid, "query": query, "toplevel": toplevel, "calls": calls}
            )


_LOCK = re.compile(r"\bfor\s+(no\s+key\s+)?update\b|\bfor\s+(key\s+)?share\b", re.I)


def locking_rows(case: Case) -> list[dict[str, Any]]:
    """The rows pg_stat_statements recorded for the case that lock rows."""
    return [r for r in case.recorded if _LOCK.search(str(r["query"]))]


SAVE_ENV = "QADVISOR_ROUNDTRIP_SAVE"  # a directory: keep each database's snapshot there


def snapshot(dsn: str, out: Path) -> dict[str, Any]:
    """``qadvisor snapshot`` of the database, as a user runs it (kept in the directory
    QADVISOR_ROUNDTRIP_SAVE names, if set)."""
    done = qadvisor("snapshot", dsn, "-o", str(out))
    assert done.rc == 0, done.stderr
    text = out.read_text()
    keep = os.environ.get(SAVE_ENV)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / out.name).write_text(text)
    data: dict[str, Any] = json.loads(text)
    return data


def entries(snap: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, entry) of every statement the snapshot holds."""
    for kind in ("statements", "maintenance", "left_out", "stakeholders"):
        for entry in snap.get(kind) or ():
            yield kind, entry


# --- what qadvisor made of them ------------------------------------------------------------------


# The server's refusals of a statement's own text, whatever its tables: a feature it does not
# have (FOR UPDATE with a window function), a syntax or grouping error, a name no FROM
# brings in (a fragment of a function body, harvested alone), an ambiguous column.
REFUSED_AS_WRITTEN = {"0A000", "42601", "42803", "42P01", "42702"}


def _refused_as_written(case: Case) -> bool:
    # 42601 is also "INSERT has more expressions than target columns": a table's shape.
    syntax = case.ran_state != "42601" or (case.ran or "").startswith("syntax error")
    return case.ran_state in REFUSED_AS_WRITTEN and syntax


@dataclass
class Outcome:
    """What the snapshot holds of one case: its entries, by kind."""

    case: Case
    found: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for k, e in self.found if k == kind]

    @property
    def planned(self) -> list[dict[str, Any]]:
        return [
            s for s in self.of("statements") if s.get("custom_plan") and not s.get("plan_error")
        ]

    @property
    def unplanned(self) -> list[dict[str, Any]]:
        """Its claims without a plan, and its row-locking statements taken for other
        statements on a queue table (stakeholders) that could not be planned."""
        claims = [s for s in self.of("statements") if s not in self.planned]
        return claims + [
            e
            for e in self.of("stakeholders")
            if e.get("plan_error") and _LOCK.search(str(e.get("text")))
        ]

    @property
    def verdict(self) -> str:
        """planned, not planned (a claim with the server's error), value unknown (a claim
        whose parameter's value no catalog fact names, not planned on a guess), left out (with why),
        maintenance (kept, not a claim), dropped (nowhere), or why it never got there."""
        c = self.case
        if c.made is not None:
            return "not made"
        if c.ran is not None and not locking_rows(c):
            # A function that failed after its claim ran still had the claim recorded.
            return "refused as written" if _refused_as_written(c) else "not run"
        if c.fn is None and not locking_rows(c):
            return "not read back"
        if self.unplanned:
            # The tables are empty: a claim comparing its status with $n has no value the
            # catalog names, and qadvisor plans no guess (what the application binds is
            # unknown). That is a reason given, not a planning failure.
            if all(
                str(s.get("plan_error") or "").startswith(VALUE_UNKNOWN) for s in self.unplanned
            ):
                return "value unknown"
            return "not planned"
        if self.planned:
            if c.fn is not None and len(self.found) < len(c.sites):
                return "dropped"
            return "planned"
        if self.of("left_out"):
            return "left out"
        if self.of("maintenance") or self.of("stakeholders"):
            return "maintenance"
        return "dropped"

    def why(self) -> str:
        c = self.case
        if c.made is not None:
            return f"tables not made: {c.made}"
        if c.ran is not None and not locking_rows(c):
            if _refused_as_written(c):
                return f"refused by the server as written: {c.ran}"
            return f"not run: {c.ran}"
        reasons = [f"plan_error: {s['plan_error']}" for s in self.unplanned if s.get("plan_error")]
        reasons += [f"left out: {e['reason']}" for e in self.of("left_out")]
        reasons += [
            f"stakeholder: {e.get('plan_error') or 'planned'}" for e in self.of("stakeholders")
        ]
        if self.of("maintenance"):
            reasons.append("kept as maintenance")
        return "; ".join(reasons) or "nothing"


def outcomes(cases: list[Case], snap: dict[str, Any]) -> list[Outcome]:
    """Each case with the snapshot's entries of it: a recorded statement by the role that ran
    it (or its queryid), a function's claim by the function's name, what was left out by the
    schema of its table or by its text."""
    out = {c.name: Outcome(c) for c in cases}
    functions = {f"{c.fn.schema or c.name}.{c.fn.name}": c.name for c in cases if c.fn is not None}
    by_queryid: dict[int, set[str]] = {}
    for c in cases:
        for r in c.recorded:
            by_queryid.setdefault(int(r["queryid"]), set()).add(c.name)
    # qadvisor reads one entry per queryid, with one of its texts: a text stands for every
    # case that has a row of that queryid.
    by_text: dict[str, set[str]] = {}
    for c in cases:
        for r in c.recorded:
            by_text.setdefault(_squash(str(r["query"])), set()).update(
                by_queryid[int(r["queryid"])]
            )
    for kind, entry in entries(snap):
        source = str(entry.get("source") or "")
        owners: set[str] = set()
        m = re.match(r"function (.+), line \d+", source)
        if m and m.group(1) in functions:
            owners = {functions[m.group(1)]}
        elif entry.get("roles"):
            owners = {r for r in entry["roles"] if r in out}
        elif entry.get("queryid") is not None and int(entry["queryid"]) in by_queryid:
            owners = by_queryid[int(entry["queryid"])]
        if not owners and entry.get("queue"):
            schema = str(entry["queue"]).split(".")[0]
            owners = {schema} if schema in out else set()
        if not owners:
            owners = by_text.get(_squash(str(entry.get("text") or "")), set())
        for name in owners:
            out[name].found.append((kind, entry))
    return list(out.values())


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
