"""The tables, types and functions a harvested statement needs to run, derived without a
server.

A statement of the suite names tables (``jobs``, ``app.tasks``, ``"Queue Space"."Job
Queue"``) whose shape its test built somewhere near it. Each table is taken from a ``CREATE
TABLE`` the suite writes: the one in the statement's own file closest to it, else one in any
file of the suite; its columns and keys are kept (defaults, identity, partitioning, foreign
keys and checks are not: they do not change the text pg_stat_statements records, nor whether
it plans). A column the statement reads that the definition lacks is added, with a type read
from the statement itself (the constant, cast or function it is compared with, a bare column
used as a condition) or else guessed from its name. An enum or domain a column or cast names is
made from the suite's ``CREATE TYPE`` / ``CREATE DOMAIN`` of that name.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pglast import ast as pg
from pglast import parse_plpgsql, parse_sql
from pglast.enums import A_Expr_Kind, ConstrType
from pglast.parser import ParseError
from pglast.stream import RawStream
from pglast.visitors import Visitor

from tests.narrow import present
from tests.sql.postgres_parser import ROOT

Name = tuple[str | None, str]  # (schema as written or None, name)


@dataclass(frozen=True)
class TableDef:
    """A table's columns (name -> type as SQL text) and unique keys, and where it came from."""

    schema: str | None
    name: str
    columns: tuple[tuple[str, str], ...]
    keys: tuple[tuple[str, ...], ...]  # the primary key first, then unique constraints
    where: str  # "path:line" of its CREATE TABLE


@dataclass(frozen=True)
class TypeDef:
    """An enum (``labels``) or a domain (``base``) the suite creates."""

    name: str
    labels: tuple[str, ...] = ()
    base: str | None = None


@dataclass
class Registry:
    """Every CREATE TABLE, CREATE TYPE ... AS ENUM and CREATE DOMAIN the suite writes."""

    tables: dict[str, list[TableDef]] = field(default_factory=dict)  # by table name
    types: dict[str, list[tuple[str, TypeDef]]] = field(default_factory=dict)  # name -> (path, def)

    def table(self, schema: str | None, name: str, path: str, line: int) -> TableDef | None:
        """The definition of ``name`` a statement at ``path:line`` most likely ran against:
        one in its own file (the same schema first, then the closest line), else one in any
        file (the same schema first)."""
        found = self.tables.get(name, [])

        def rank(d: TableDef) -> tuple[int, int, int]:
            d_path, _, d_line = d.where.rpartition(":")
            same_file = d_path == path
            distance = abs(int(d_line) - line) if same_file else 0
            return (0 if same_file else 1, 0 if d.schema == schema else 1, distance)

        return min(found, key=rank) if found else None

    def type(self, name: str, path: str) -> TypeDef | None:
        found = self.types.get(name, [])
        mine = [t for p, t in found if p == path]
        return next(iter(mine or [t for _, t in found]), None)


@cache
def registry() -> Registry:
    """The suite's table and type definitions (read once)."""
    out = Registry()
    for path, line, text in _strings_with_ddl():
        try:
            statements = parse_sql(text)
        except ParseError:
            continue
        for raw in statements:
            stmt = raw.stmt
            where = f"{path}:{line + text[: raw.stmt_location].count(chr(10))}"
            if isinstance(stmt, pg.CreateStmt) and stmt.tableElts:
                d = _table_def(stmt, where)
                out.tables.setdefault(d.name, []).append(d)
            elif isinstance(stmt, pg.CreateEnumStmt):
                name = present(stmt.typeName, "the type's name")[-1].sval
                labels = tuple(v.sval for v in stmt.vals or ())
                out.types.setdefault(name, []).append((path, TypeDef(name, labels=labels)))
            elif isinstance(stmt, pg.CreateDomainStmt):
                name = present(stmt.domainname, "the domain's name")[-1].sval
                base = RawStream()(present(stmt.typeName, "the domain's type"))
                out.types.setdefault(name, []).append((path, TypeDef(name, base=base)))
    return out


def _strings_with_ddl() -> Iterator[tuple[str, int, str]]:
    """(path, line, text) of each string literal of the suite, the demo and the benchmarks
    that creates a table, a type or a domain."""
    wanted = re.compile(r"\bCREATE\s+(UNLOGGED\s+)?(TABLE|TYPE|DOMAIN)\b", re.I)
    for path in sorted(
        [*ROOT.glob("tests/**/*.py"), *ROOT.glob("qadvisor/demo/**/*.py"),
         *ROOT.glob("benchmarks/*.py")]
    ):  # fmt: skip
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if wanted.search(node.value):
                    yield str(path.relative_to(ROOT)), node.lineno, node.value
            elif isinstance(node, ast.JoinedStr):
                # f-strings: their constant parts, with each {field} a plain word (a
                # reloption list or an archive size in a CREATE TABLE is no column).
                text = "".join(
                    v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else " "
                    for v in node.values
                )
                if wanted.search(text):
                    yield str(path.relative_to(ROOT)), node.lineno, text


def _table_def(stmt: pg.CreateStmt, where: str) -> TableDef:
    columns: list[tuple[str, str]] = []
    keys: list[tuple[str, ...]] = []
    for elt in stmt.tableElts or ():
        if isinstance(elt, pg.ColumnDef) and elt.typeName is not None and elt.colname:
            columns.append((elt.colname, RawStream()(elt.typeName)))
            for c in elt.constraints or ():
                if c.contype in (ConstrType.CONSTR_PRIMARY, ConstrType.CONSTR_UNIQUE):
                    keys.append((elt.colname,))
        elif isinstance(elt, pg.Constraint) and elt.contype in (
            ConstrType.CONSTR_PRIMARY,
            ConstrType.CONSTR_UNIQUE,
        ):
            keys.append(tuple(k.sval for k in elt.keys or ()))
    known = {c for c, _ in columns}
    keys = [k for k in keys if k and set(k) <= known]
    rel = present(stmt.relation, "the created table")
    name = present(rel.relname, "its name")
    return TableDef(rel.schemaname, name, tuple(columns), tuple(keys), where)


# --- what a statement reads --------------------------------------------------------------------

_TIME_FUNCTIONS = {"now", "clock_timestamp", "statement_timestamp", "transaction_timestamp"}


@dataclass
class Reads:
    """The tables a statement names (in order of appearance), the columns it reads of each
    (with a type where the statement shows one), the types it casts to."""

    tables: list[Name] = field(default_factory=list)
    columns: dict[Name, dict[str, str | None]] = field(default_factory=dict)
    casts: set[str] = field(default_factory=set)


def reads(text: str, variables: frozenset[str] = frozenset()) -> Reads | None:
    """What ``text`` (one statement) reads; None when PostgreSQL's parser refuses it.
    ``variables`` are names that are no columns (a function's arguments and variables)."""
    try:
        tree = parse_sql(text)
    except ParseError:
        return None
    seen = _Walk(variables)
    for raw in tree:
        seen(present(raw.stmt, "the statement"))
    out = Reads(casts=seen.casts)
    tables = [t for t in seen.tables if t[0] is not None or t[1] not in seen.ctes]
    for t in tables:
        if t not in out.tables:
            out.tables.append(t)
            out.columns[t] = {}
    if not out.tables:
        return out
    for qualifier, column, hint in seen.refs:
        if qualifier is None:
            target: Name | None = out.tables[0]
        else:
            target = seen.aliases.get(qualifier)
            if target is None and qualifier not in seen.ctes:
                target = next((t for t in out.tables if t[1] == qualifier), None)
        if target is None or target not in out.columns:
            continue
        if qualifier is None and (column in seen.aliases or column in seen.ctes):
            continue  # a whole-row reference
        cols = out.columns[target]
        if cols.get(column) is None:
            cols[column] = hint
    return out


class _Walk(Visitor):
    def __init__(self, variables: frozenset[str]) -> None:
        self.variables = variables
        self.tables: list[Name] = []
        self.ctes: set[str] = set()
        self.aliases: dict[str, Name] = {}
        self.refs: list[tuple[str | None, str, str | None]] = []
        self.casts: set[str] = set()

    def visit_CommonTableExpr(self, parent: object, node: pg.CommonTableExpr) -> None:
        self.ctes.add(present(node.ctename, "a WITH query's name"))

    def visit_RangeVar(self, parent: object, node: pg.RangeVar) -> None:
        if isinstance(_owner(parent), pg.LockingClause):
            return  # FOR UPDATE OF jobs: a name, not a table read
        name = (node.schemaname, present(node.relname, "a table's name"))
        self.tables.append(name)
        if node.alias is not None and node.alias.aliasname:
            self.aliases[node.alias.aliasname] = name

    def visit_TypeCast(self, parent: object, node: pg.TypeCast) -> None:
        self.casts.add(_type_text(present(node.typeName, "a cast's type")))

    def visit_ColumnRef(self, parent: object, node: pg.ColumnRef) -> None:
        ref = self._ref(node)
        if ref is not None:
            self.refs.append((*ref, None))

    def visit_A_Expr(self, parent: object, node: pg.A_Expr) -> None:
        for one, other in ((node.lexpr, node.rexpr), (node.rexpr, node.lexpr)):
            if isinstance(one, pg.ColumnRef):
                ref = self._ref(one)
                hint = _hint(other)
                if ref is not None and hint is not None:
                    self.refs.append((*ref, hint))

    def visit_ResTarget(self, parent: object, node: pg.ResTarget) -> None:
        owner = _owner(parent)
        if not node.name or node.name in self.variables:
            return
        if isinstance(owner, pg.UpdateStmt):
            # UPDATE ... SET col = <value>: the value's type is the column's.
            hint = _hint(node.val) if node.val is not None else None
            rel = present(owner.relation, "the updated table")
            self.refs.append((rel.alias.aliasname if rel.alias else rel.relname, node.name, hint))
        elif isinstance(owner, pg.InsertStmt):
            self.refs.append((present(owner.relation, "the table").relname, node.name, None))

    def visit_BoolExpr(self, parent: object, node: pg.BoolExpr) -> None:
        for arg in node.args or ():
            self._condition(arg)

    def visit_SelectStmt(self, parent: object, node: pg.SelectStmt) -> None:
        self._condition(node.whereClause)

    def visit_UpdateStmt(self, parent: object, node: pg.UpdateStmt) -> None:
        self._condition(node.whereClause)

    def visit_DeleteStmt(self, parent: object, node: pg.DeleteStmt) -> None:
        self._condition(node.whereClause)

    def _condition(self, node: object) -> None:
        """A bare column used as a condition (``WHERE NOT done``) is a boolean."""
        if isinstance(node, pg.ColumnRef):
            ref = self._ref(node)
            if ref is not None:
                self.refs.append((*ref, "boolean"))

    def _ref(self, node: pg.ColumnRef) -> tuple[str | None, str] | None:
        fields = [f.sval for f in node.fields or () if isinstance(f, pg.String) and f.sval]
        if len(fields) != len(node.fields or ()) or not fields:
            return None  # alias.* or *
        if len(fields) == 1:
            if fields[0] in self.variables:
                return None
            return None, fields[0]
        return fields[-2], fields[-1]


def _owner(ancestor: Any) -> object:
    """The node that holds a visited node (through a list, the list's owner)."""
    node = ancestor.node
    if isinstance(node, tuple) and ancestor.parent is not None:
        return ancestor.parent.node
    return node


def _type_text(type_name: pg.TypeName) -> str:
    return str(RawStream()(type_name))


def _hint(node: object) -> str | None:
    """The type a value shows: a constant's, a cast's, a timestamp function's."""
    if isinstance(node, pg.A_Const) and not node.isnull:
        val = node.val
        if isinstance(val, pg.Integer):
            return "integer"
        if isinstance(val, pg.Float):
            return "numeric"
        if isinstance(val, pg.Boolean):
            return "boolean"
        if isinstance(val, pg.String):
            return "text"
    if isinstance(node, pg.TypeCast):
        return _type_text(present(node.typeName, "a cast's type"))
    if (
        isinstance(node, pg.FuncCall)
        and node.funcname
        and node.funcname[-1].sval in _TIME_FUNCTIONS
    ):
        return "timestamptz"
    if isinstance(node, pg.SQLValueFunction):
        return "timestamptz" if "TIMESTAMP" in str(node.op).upper() else None
    if (
        isinstance(node, pg.A_Expr)
        and node.kind == A_Expr_Kind.AEXPR_OP
        and node.name
        and node.name[-1].sval in ("+", "-")
    ):
        left, right = _hint(node.lexpr), _hint(node.rexpr)
        if "timestamptz" in (left, right):
            return "timestamptz"
    if isinstance(node, pg.A_ArrayExpr):
        return _hint(node.elements[0]) if node.elements else None
    if isinstance(node, tuple):  # IN (...)
        return _hint(node[0]) if node else None
    return None


_NAME_TYPES: tuple[tuple[str, str], ...] = (
    (r"^id$|_id$|^pid$", "bigint"),
    (
        r"_at$|_time$|^heartbeat$|_until$|^deadline$|^expires|^created$|^scheduled|_after$|"
        r"^not_before$|^run_at",
        "timestamptz",
    ),
    (r"attempt|priority|retr|tries|_count$|^count$|^position$|^seq|^max_|_limit$", "integer"),
    (r"^is_|^has_|^active$|^enabled$|^done$|^paused$|^cancelled$", "boolean"),
    (r"payload|^args$|^data$|^meta|^params$|^result$", "jsonb"),
)


def type_from_name(column: str) -> str:
    """The type a column's name suggests, where nothing else tells it."""
    for pattern, type_name in _NAME_TYPES:
        if re.search(pattern, column):
            return type_name
    return "text"


# --- function bodies ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Function:
    """A CREATE FUNCTION of the suite: its name, language, the names in its body that are no
    columns, and the SQL statements of its body."""

    schema: str | None
    name: str
    language: str
    variables: frozenset[str]
    statements: tuple[str, ...]


def function(create: str) -> Function | None:
    """What a CREATE FUNCTION (or PROCEDURE) statement defines; None for another language or
    a text PostgreSQL's parser refuses."""
    try:
        (raw,) = parse_sql(create)
    except (ParseError, ValueError):
        return None
    stmt = raw.stmt
    if not isinstance(stmt, pg.CreateFunctionStmt):
        return None
    options = {o.defname: o.arg for o in stmt.options or ()}
    language = options.get("language")
    lang = language.sval if language is not None else "sql"
    names = [n.sval for n in stmt.funcname or ()]
    schema, name = (names[-2] if len(names) > 1 else None), names[-1]
    args = {p.name for p in stmt.parameters or () if p.name}
    if stmt.sql_body is not None:
        return Function(schema, name, "sql", frozenset(args), ())
    body = options.get("as")
    if not body or lang not in ("plpgsql", "sql"):
        return None
    source = body[0].sval
    if lang == "sql":
        try:
            parts = parse_sql(source)
        except ParseError:
            return None
        statements = tuple(
            source[
                present(p.stmt_location) : present(p.stmt_location) + (p.stmt_len or len(source))
            ]
            for p in parts
        )
        return Function(schema, name, lang, frozenset(args), statements)
    try:
        tree = parse_plpgsql(create)
    except ParseError:
        return None
    variables = set(args)
    queries: list[str] = []
    _plpgsql_walk(tree, variables, queries)
    return Function(schema, name, lang, frozenset(variables), tuple(queries))


def _plpgsql_walk(node: object, variables: set[str], queries: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            named = isinstance(value, dict) and isinstance(value.get("refname"), str)
            if key in ("PLpgSQL_var", "PLpgSQL_rec", "PLpgSQL_row") and named:
                variables.add(value["refname"])
            if key == "PLpgSQL_expr" and isinstance(value, dict):
                query = value.get("query")
                if isinstance(query, str):
                    queries.append(query)
            _plpgsql_walk(value, variables, queries)
    elif isinstance(node, list):
        for value in node:
            _plpgsql_walk(value, variables, queries)
