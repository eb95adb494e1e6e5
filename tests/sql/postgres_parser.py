"""What PostgreSQL's own parser (libpg_query, through pglast) says of a statement, in the
terms qadvisor's sqlglot-based reading uses, and where the two disagree.

qadvisor reads statements with sqlglot, which is not PostgreSQL's grammar. These helpers
parse the same text with PostgreSQL's raw parser and compare what both say: whether it takes
row locks and with which strength and wait policy, the tables it names, the parameters it
uses, the kind of its main statement, and what each UPDATE in it sets. They serve the
differential tests over the statements the suite holds and those the corpus libraries ran.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pglast import ast as pg
from pglast import parse_plpgsql, parse_sql
from pglast.parser import ParseError
from pglast.visitors import Visitor

from qadvisor.sql import dequeue
from qadvisor.sql.plpgsql import BodyError, read_body
from qadvisor.sql.updates import update_targets
from tests.narrow import present

ROOT = Path(__file__).resolve().parents[2]
# PostgreSQL's LockClauseStrength and LockWaitPolicy (nodes/lockoptions.h), by value.
STRENGTH = {1: "key share", 2: "share", 3: "no key update", 4: "update"}
WAIT = {0: None, 1: "skip locked", 2: "nowait"}
KIND = {"SelectStmt": "select", "UpdateStmt": "update", "DeleteStmt": "delete"}
_STATEMENT = re.compile(r"^\s*(WITH|SELECT|UPDATE|DELETE)\b", re.I)
_ROW_LOCK = re.compile(r"\bFOR\s+(UPDATE|NO\s+KEY\s+UPDATE|SHARE|KEY\s+SHARE)\b", re.I)


@dataclass(frozen=True)
class Reading:
    """One statement as PostgreSQL's parser reads it."""

    kind: str | None  # of the main statement: select, update, delete (None: another)
    # (strength, wait policy) of each locking clause of a SELECT whose FROM reaches a table
    locks: frozenset[tuple[str, str | None]]
    relations: frozenset[tuple[str | None, str]]  # tables named, WITH names and OF lists aside
    parameters: tuple[int, ...]  # $n numbers, ascending
    updates: frozenset[tuple[str | None, str, frozenset[str]]]  # (schema, table, columns set)


def postgres_reading(sql: str) -> Reading | None:
    """PostgreSQL's reading of one statement; None when its parser refuses the text or it
    holds more or fewer than one statement."""
    try:
        tree = parse_sql(sql)
    except ParseError:
        return None
    if len(tree) != 1:
        return None
    top = present(tree[0].stmt, "the statement")
    seen = _Collect()
    seen(top)
    locks = _Locks(seen.ctes)
    locks(top)
    return Reading(
        kind=KIND.get(type(top).__name__),
        locks=frozenset(locks.found),
        relations=frozenset(r for r in seen.relations if r[0] is not None or r[1] not in seen.ctes),
        parameters=tuple(sorted(seen.parameters)),
        updates=frozenset(seen.updates),
    )


class _Collect(Visitor):
    def __init__(self) -> None:
        self.relations: set[tuple[str | None, str]] = set()
        self.ctes: set[str] = set()
        self.parameters: set[int] = set()
        self.updates: set[tuple[str | None, str, frozenset[str]]] = set()
        self._locked: set[int] = set()  # RangeVars of OF lists: names, not tables read

    def visit_LockingClause(self, parent: object, node: pg.LockingClause) -> None:
        self._locked.update(id(r) for r in node.lockedRels or ())

    def visit_CommonTableExpr(self, parent: object, node: pg.CommonTableExpr) -> None:
        self.ctes.add(present(node.ctename, "a WITH query's name"))

    def visit_RangeVar(self, parent: object, node: pg.RangeVar) -> None:
        if id(node) not in self._locked:
            self.relations.add((node.schemaname, present(node.relname, "a table's name")))

    def visit_ParamRef(self, parent: object, node: pg.ParamRef) -> None:
        self.parameters.add(present(node.number, "a parameter's number"))

    def visit_UpdateStmt(self, parent: object, node: pg.UpdateStmt) -> None:
        columns = frozenset(t.name for t in node.targetList or ())
        relation = present(node.relation, "the updated table")
        self.updates.add((relation.schemaname, present(relation.relname, "its name"), columns))


class _Locks(Visitor):
    """The row locks of the SELECTs whose FROM reaches a table: a locking clause over WITH
    query names alone (or no FROM) locks no row, as PostgreSQL's docs say."""

    def __init__(self, ctes: set[str]) -> None:
        self.ctes = ctes
        self.found: set[tuple[str, str | None]] = set()

    def visit_SelectStmt(self, parent: object, node: pg.SelectStmt) -> None:
        if not node.lockingClause:
            return
        tables = _Tables()
        tables(node.fromClause or ())
        if any(schema is not None or name not in self.ctes for schema, name in tables.names):
            for clause in node.lockingClause:
                self.found.add((STRENGTH[int(clause.strength)], WAIT[int(clause.waitPolicy)]))


class _Tables(Visitor):
    def __init__(self) -> None:
        self.names: set[tuple[str | None, str]] = set()

    def visit_RangeVar(self, parent: object, node: pg.RangeVar) -> None:
        self.names.add((node.schemaname, present(node.relname, "a table's name")))


@dataclass(frozen=True)
class Verdict:
    """How qadvisor's reading compares with PostgreSQL's."""

    misread: tuple[str, ...] = ()  # what qadvisor read otherwise: always a defect
    # A row-locking statement qadvisor's parser refused (the product leaves it out with this
    # reason, and says so): allowed only where a test names it.
    refused: str | None = None


def compare(sql: str) -> Verdict | None:
    """Where qadvisor's reading of ``sql`` differs from PostgreSQL's; None when PostgreSQL's
    parser refuses the text (there is nothing to compare with)."""
    theirs = postgres_reading(sql)
    if theirs is None:
        return None
    out: list[str] = []
    ours = update_targets(sql)
    mine = {(t.schema, t.table, frozenset(t.columns)) for t in ours or ()}
    if theirs.updates and ours is None:
        out.append("update_targets could not read it")
    elif mine != set(theirs.updates):
        out.append(
            f"updates: qadvisor {sorted(map(str, mine))}, "
            f"PostgreSQL {sorted(map(str, theirs.updates))}"
        )
    try:
        parsed = dequeue.analyse(sql)
    except dequeue.StatementError as exc:
        # qadvisor declines statements that are no claim (INSERT, MERGE): a refusal counts
        # only where PostgreSQL reads a row lock.
        return Verdict(tuple(out), str(exc) if theirs.locks else None)
    if parsed is None:
        if theirs.locks:
            out.append(f"analyse saw no row lock; PostgreSQL reads {sorted(theirs.locks, key=str)}")
        return Verdict(tuple(out))
    if not theirs.locks:
        return Verdict((*out, "analyse saw a row lock that PostgreSQL does not"))
    lock = (parsed.lock.strength, parsed.lock.wait_policy)
    if lock not in theirs.locks:
        out.append(f"lock: qadvisor {lock}, PostgreSQL {sorted(theirs.locks, key=str)}")
    if parsed.kind != theirs.kind:
        out.append(f"kind: qadvisor {parsed.kind}, PostgreSQL {theirs.kind}")
    if set(parsed.relations) != set(theirs.relations):
        out.append(
            f"relations: qadvisor {sorted(map(str, parsed.relations))}, "
            f"PostgreSQL {sorted(map(str, theirs.relations))}"
        )
    if parsed.parameters != theirs.parameters:
        out.append(f"parameters: qadvisor {parsed.parameters}, PostgreSQL {theirs.parameters}")
    return Verdict(tuple(out))


def suite_statements() -> Iterator[tuple[str, str]]:
    """(where, text) of every row-locking or updating statement written as a string in the
    suite, the demo and the benchmarks; psycopg's ``%s`` placeholders become ``$n``."""
    for where, text in _strings():
        if not _STATEMENT.match(text):
            continue
        if not (_ROW_LOCK.search(text) or re.match(r"^\s*(WITH|UPDATE)\b", text, re.I)):
            continue
        yield where, _numbered(text) if "%s" in text or "%(" in text else text


def _strings() -> Iterator[tuple[str, str]]:
    """String literals anywhere in the suite, the demo and the benchmarks, and module-level
    constants built from other constants (f-strings, ``+``), each text once."""
    seen: set[str] = set()
    for path in sorted(
        [*ROOT.glob("tests/**/*.py"), *ROOT.glob("qadvisor/demo/**/*.py"),
         *ROOT.glob("benchmarks/*.py")]
    ):  # fmt: skip
        tree = ast.parse(path.read_text(), filename=str(path))
        found: list[tuple[int, str]] = [
            (node.lineno, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        env: dict[str, str] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = _evaluate(stmt.value, env)
                if value is not None and len(targets) == 1 and isinstance(targets[0], ast.Name):
                    env[targets[0].id] = value
                    found.append((stmt.lineno, value))
        for line, text in found:
            if text not in seen:
                seen.add(text)
                yield f"{path.relative_to(ROOT)}:{line}", text


def _evaluate(node: ast.expr, env: dict[str, str]) -> str | None:
    """A string expression of constants and names bound to strings, else None."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    return None
                part = _evaluate(value.value, env)
            else:
                part = _evaluate(value, env)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    return None


def _numbered(text: str) -> str:
    counter = iter(range(1, 1000))
    text = re.sub(r"%\(\w+\)s|%s", lambda _m: f"${next(counter)}", text)
    return text.replace("%%", "%")


def function_lock_sites(create_function: str) -> tuple[set[str], set[str]] | None:
    """The row-locking statements of a PL/pgSQL or SQL function as PostgreSQL's parser
    splits its body, and as qadvisor's reader does (whitespace squashed), EXECUTE's dynamic
    text aside; None when PostgreSQL refuses the text or it is no such function."""
    try:
        tree = parse_plpgsql(create_function)
    except ParseError as exc:
        # libpg_query looks up a %TYPE's or %ROWTYPE's schema only in pg_catalog and public:
        # the same function in public has the same structure.
        if "LookupExplicitNamespace" not in str(exc):
            tree = None
        else:
            create_function = re.sub(r"\bapp\.", "public.", create_function)
            try:
                tree = parse_plpgsql(create_function)
            except ParseError:
                return None
    try:
        (raw,) = parse_sql(create_function)
    except (ParseError, ValueError):
        return None
    stmt = raw.stmt
    if not isinstance(stmt, pg.CreateFunctionStmt) or stmt.sql_body is not None:
        return None
    options = {o.defname: o.arg for o in stmt.options or ()}
    language = options.get("language")
    body = options.get("as")
    if language is None or not body or language.sval not in ("plpgsql", "sql"):
        return None
    source = body[0].sval
    if language.sval == "plpgsql":
        if tree is None:
            return None
        theirs = {q for q in _expr_queries(tree) if _ROW_LOCK.search(q)}
    else:
        theirs = {
            source[
                present(s.stmt_location) : present(s.stmt_location) + (s.stmt_len or len(source))
            ]
            for s in parse_sql(source)
        }
        theirs = {q for q in theirs if _ROW_LOCK.search(q)}
    name = present(stmt.funcname, "the function's name")[-1].sval
    try:
        read = read_body(source, language.sval, [], name)
    except BodyError as exc:
        return {_squash(q) for q in theirs}, {f"BodyError: {exc}"}
    ours = {s.as_run for s in read.sites if s.locks and not s.dynamic}
    return {_squash(q) for q in theirs}, {_squash(q) for q in ours}


_DYNAMIC = ("PLpgSQL_stmt_dynexecute", "PLpgSQL_stmt_dynfors", "dynquery")


def _expr_queries(node: object) -> Iterator[str]:
    """The SQL of every PLpgSQL_expr in a parsed body, EXECUTE's text aside."""
    if isinstance(node, dict):
        expr = node.get("PLpgSQL_expr")
        if isinstance(expr, dict) and isinstance(expr.get("query"), str):
            yield expr["query"]
        for key, value in node.items():
            if key not in _DYNAMIC:
                yield from _expr_queries(value)
    elif isinstance(node, list):
        for value in node:
            yield from _expr_queries(value)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(";").strip()


def suite_functions() -> Iterator[tuple[str, str]]:
    """(where, text) of every CREATE FUNCTION the suite, the demo and the benchmarks write,
    alone or inside a script of several statements."""
    for where, text in _strings():
        if not re.search(r"\bCREATE\s+(OR\s+REPLACE\s+)?FUNCTION\b", text, re.I):
            continue
        try:
            statements = parse_sql(text)
        except ParseError:
            continue
        for raw in statements:
            if isinstance(raw.stmt, pg.CreateFunctionStmt):
                start = present(raw.stmt_location, "the statement's place")
                end = start + raw.stmt_len if raw.stmt_len else len(text)
                yield where, text[start:end]
