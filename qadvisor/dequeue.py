"""Dequeue statements (``... FOR UPDATE SKIP LOCKED``) analysed into plain data.

Job-queue dequeue statements come from pg_stat_statements or from the user's SQL files. This
module turns one of them into frozen, JSON-serialisable dataclasses so that pure checks can
judge its shape (lock strength, SKIP LOCKED, which table the lock takes, the predicate on
the queue table, the round-robin LATERAL form) without a database. It also refuses anything
that must not be planned and prints the rewritten statements that fixes propose.

Nothing here talks to PostgreSQL or does I/O. Parsing is sqlglot's, dialect ``postgres``.

Names: unquoted identifiers are folded to lower case as PostgreSQL does, quoted ones keep
their spelling, so names compare equal to catalog names.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError

if TYPE_CHECKING:
    from sqlglot.generator import Generator as _PostgresGenerator
else:  # typed as the base class: mypy cannot subclass the class-valued attribute
    _PostgresGenerator = Postgres.generator_class

DIALECT = "postgres"
_PLANNABLE = "a single SELECT/UPDATE/DELETE/WITH statement"


class StatementError(ValueError):
    """The text is not one statement that qadvisor may plan (or it cannot be parsed)."""


# --- data -----------------------------------------------------------------------------

ParamKind = Literal["literal", "parameter", "column", "expression"]
# "any" is col = ANY(...), "true" a bare boolean column, "false" NOT column, "other" what has
# no simpler form (OR groups, functions of the column, BETWEEN, ...).
PredicateOp = Literal[
    "=", "<>", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null", "any", "true",
    "false", "other",
]  # fmt: skip
LockStrength = Literal["update", "no key update", "share", "key share"]
WaitPolicy = Literal["skip locked", "nowait"]  # None: the clause waits
StatementKind = Literal["select", "update", "delete"]
LockLevel = Literal["top", "subquery", "cte", "lateral"]


@dataclass(frozen=True)
class Param:
    """A comparison operand."""

    kind: ParamKind
    text: str  # SQL text: "'pending'", "$1", "qt.tenant_id", "CURRENT_TIMESTAMP"
    index: int | None = None  # parameter number when kind == "parameter"


@dataclass(frozen=True)
class Predicate:
    """One conjunct of the WHERE (and inner-join ON) about the queue table."""

    column: str  # unqualified column name of the queue table
    op: PredicateOp
    operands: tuple[Param, ...]
    text: str  # the conjunct as SQL


@dataclass(frozen=True)
class OrderItem:
    column: str  # unqualified column name, or the expression's SQL when not a plain column
    descending: bool = False
    nulls_first: bool | None = None  # None: PostgreSQL's default (last for ASC, first for DESC)


@dataclass(frozen=True)
class LockClause:
    strength: LockStrength
    wait_policy: WaitPolicy | None
    of: tuple[str, ...]  # FOR ... OF names resolved to table names; () when there is no OF


@dataclass(frozen=True)
class Lateral:
    """The round-robin shape: the lock sits in a LATERAL sub-select correlated on a column.

    ``FROM queue_tenants qt CROSS JOIN LATERAL (SELECT ... FROM jobs WHERE tenant_id =
    qt.tenant_id ... FOR UPDATE SKIP LOCKED) j ORDER BY qt.last_served LIMIT 1``
    """

    outer_schema: str | None
    outer_table: str  # the rotation table: queue_tenants
    inner_column: str  # column of the queue table: tenant_id (of jobs)
    outer_column: str  # column of the rotation table: tenant_id (of qt)
    outer_order_by: tuple[OrderItem, ...]  # ORDER BY of the outer select: last_served


@dataclass(frozen=True)
class DequeueStatement:
    text: str  # the statement as given
    kind: StatementKind  # of the main statement (WITH resolved to its body)
    schema: str | None  # the queue table; None when unqualified
    table: str
    alias: str | None
    predicates: tuple[Predicate, ...]
    order_by: tuple[OrderItem, ...]  # of the SELECT that carries the lock
    limit: int | None  # literal LIMIT / FETCH FIRST of that SELECT
    limit_is_parameter: bool
    lock: LockClause
    lock_level: LockLevel
    locked_tables: tuple[str, ...]  # every table whose rows the lock takes
    has_window: bool  # a window function where the lock applies: PostgreSQL refuses it
    lateral: Lateral | None
    parameters: tuple[int, ...]  # parameter numbers used anywhere, ascending
    # Every base table the statement reads, (schema or None, name), in order of appearance:
    # what resolving its names under a search_path has to find.
    relations: tuple[tuple[str | None, str], ...] = ()


# --- splitting and refusing -------------------------------------------------------------

# A plannable statement starts with one of these; anything else is refused before sqlglot
# parses it (EXPLAIN, DO, CALL, VACUUM are COMMAND tokens that sqlglot would only parse into
# an opaque exp.Command, after logging a warning).
_STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.UPDATE, TokenType.DELETE, TokenType.L_PAREN}
_KEYWORDS = Postgres.tokenizer_class.KEYWORDS


def _tokens(sql: str) -> list[Token]:
    try:
        return list(Postgres().tokenize(sql))
    except TokenError:
        raise StatementError(
            "unparsable SQL: cannot split it into tokens (an unterminated string, quoted name "
            "or comment?)"
        ) from None


def _statement_tokens(sql: str) -> list[list[Token]]:
    """Tokens of each statement, split on top-level ';' (the tokenizer already skipped
    comments and kept ';' inside strings, quoted names and dollar-quoted bodies)."""
    statements: list[list[Token]] = [[]]
    for token in _tokens(sql):
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [tokens for tokens in statements if tokens]


def _span(sql: str, tokens: list[Token]) -> str:
    # Token.end is inclusive. Comments before the first and after the last token are left out.
    return sql[tokens[0].start : tokens[-1].end + 1]


def statement_lines(sql: str) -> list[tuple[int, str]]:
    """Like split_statements, with the line (1-based) each statement starts on."""
    # Counted from the offset: the tokenizer's own line numbers drift after a $n.
    return [
        (sql.count("\n", 0, tokens[0].start) + 1, _span(sql, tokens))
        for tokens in _statement_tokens(sql)
    ]


def statement_ranges(sql: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(each statement's first and last offset, each token's first and last offset), both
    inclusive: text outside every token is whitespace, ';' or a comment."""
    statements = _statement_tokens(sql)
    spans = [(tokens[0].start, tokens[-1].end) for tokens in statements]
    return spans, [(t.start, t.end) for tokens in statements for t in tokens]


def split_statements(sql: str) -> list[str]:
    """The statements of a file's text, without the ';' between them.

    Statements that are empty or only comments are dropped, and so are comments before and
    after a statement; comments inside one are kept. Raises StatementError only when the text
    cannot be tokenized (an unterminated string, quoted name or comment).
    """
    return [_span(sql, tokens) for tokens in _statement_tokens(sql)]


def _first_line(message: str) -> str:
    # sqlglot error messages carry the SQL with ANSI underline codes on following lines.
    return message.replace("\x1b[4m", "").replace("\x1b[0m", "").strip().splitlines()[0]


def _parse_error(err: ParseError) -> str:
    """Where sqlglot stopped, without its token dumps and terminal colour codes."""
    if not err.errors:
        return _first_line(str(err))
    where = err.errors[0]
    near = str(where.get("highlight") or "").strip()
    position = f"line {where.get('line')}, column {where.get('col')}"
    return f"syntax error near {near!r} ({position})" if near else f"syntax error ({position})"


def _leading_words(tokens: list[Token]) -> str:
    """'DROP TABLE', 'EXPLAIN ANALYZE', 'INSERT INTO', 'DO': how the refused statement starts."""
    words = [tokens[0].text.upper()]
    if len(tokens) > 1:
        # EXPLAIN, DO, CALL... swallow the rest of the statement into one string token.
        following = tokens[1].text.split(maxsplit=1)
        if following and following[0].upper() in _KEYWORDS:
            words.append(following[0].upper())
    return " ".join(words)


def _refused(what: str) -> StatementError:
    return StatementError(f"not {_PLANNABLE}: {what}")


class _DropRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@contextmanager
def quiet_sqlglot() -> Iterator[None]:
    """sqlglot logs a warning when it falls back to exp.Command; we refuse those anyway and a
    stray log line must not reach the user's terminal or a CI log."""
    logger = logging.getLogger("sqlglot")
    drop = _DropRecords()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _main(tree: exp.Expr) -> exp.Expr:
    """The main statement: a parenthesised query unwrapped (WITH is already an argument of
    its body in sqlglot's tree)."""
    while isinstance(tree, exp.Subquery | exp.Paren) and isinstance(tree.this, exp.Expr):
        tree = tree.this
    return tree


def _parse(sql: str) -> exp.Expr:
    """The tree of ``sql`` if it is one statement qadvisor may plan; StatementError if not."""
    statements = _statement_tokens(sql)
    if not statements:
        raise StatementError("no SQL statement: the text is empty or only comments")
    if len(statements) > 1:
        raise StatementError(f"{len(statements)} statements where {_PLANNABLE} is expected")
    tokens = statements[0]
    if tokens[0].token_type not in _STARTS:
        raise _refused(_leading_words(tokens))
    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(_span(sql, tokens), dialect=DIALECT)
    except ParseError as err:
        raise StatementError(f"unparsable SQL: {_parse_error(err)}") from None
    _check_tree(tree, tokens)
    return tree


def _check_tree(tree: exp.Expr, tokens: list[Token]) -> None:
    main = _main(tree)
    if not isinstance(main, exp.Select | exp.SetOperation | exp.Update | exp.Delete):
        if tokens[0].token_type == TokenType.WITH:
            raise _refused(f"WITH ... {main.key.upper()}")
        # "(values (1))" starts with a parenthesis: name what sqlglot found inside instead.
        raise _refused(_leading_words(tokens) if tokens[0].text.isalpha() else main.key.upper())
    for node in tree.walk():
        if isinstance(node, exp.Command):
            raise StatementError(f"unparsable SQL: sqlglot cannot parse {node.name!r} here")
        if isinstance(node, exp.Merge):
            # UPDATE, DELETE and INSERT inside WITH are what claims do (pgqueuer logs each
            # claim with an INSERT in the same statement); MERGE is not.
            raise _refused(f"a data-modifying {node.key.upper()} inside WITH")
        if isinstance(node, exp.Select) and node.args.get("into"):
            raise _refused("SELECT INTO creates a table")
        if isinstance(node, exp.Update) and not node.expressions:
            # sqlglot accepts "UPDATE t SET" with nothing to set; PostgreSQL does not.
            raise StatementError("unparsable SQL: UPDATE without SET assignments")


def check_plannable(sql: str) -> None:
    """Raise StatementError unless ``sql`` is exactly one SELECT, UPDATE, DELETE or WITH ...
    statement (whose body is one of those).

    Refused: EXPLAIN in any form, DDL, INSERT, MERGE, COPY, SET, DO, CALL, SELECT INTO,
    several statements, empty or unparsable text, and MERGE inside WITH (UPDATE, DELETE and
    INSERT inside WITH are allowed: such statements are only EXPLAINed, or with --analyze
    run in a transaction that is rolled back).
    """
    _parse(sql)


# --- identity ---------------------------------------------------------------------------

_CONSTANTS = {TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING, TokenType.BIT_STRING,
              TokenType.HEX_STRING, TokenType.BYTE_STRING}  # fmt: skip
FINGERPRINT_HEX = 10


def fingerprint(sql: str) -> str:
    """A short hash of the statement's shape, the same wherever the statement is seen.

    pg_stat_statements shows constants as ``$n`` and numbers its parameters per entry, an
    application's file shows literals, and PostgreSQL 18 squashes constant lists into
    ``IN ($1 /*, ... */)``; a queryid changes with table OIDs (a restore from a dump, an
    upgrade). So the hash is taken over the tokens with every constant and parameter as
    ``?``, runs of them (IN lists, array items) as one ``?``, comments and spacing dropped,
    keywords upper case and unquoted names folded to lower case as PostgreSQL folds them.
    """
    words: list[str] = []
    tokens = _tokens(sql.strip().rstrip(";"))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if (
            token.token_type == TokenType.PARAMETER
            and i + 1 < len(tokens)
            and is_placeholder(token, tokens[i + 1])
        ):
            word, i = "?", i + 2
        elif token.token_type in _CONSTANTS:
            word, i = "?", i + 1
        else:
            i += 1
            if token.token_type == TokenType.IDENTIFIER:
                word = '"' + token.text.replace('"', '""') + '"'
            elif token.token_type == TokenType.VAR:
                word = token.text.lower()
            else:
                word = token.text.upper()
        if word == "?" and words[-2:-1] == ["?"] and words[-1] == ",":
            words.pop()  # "?, ?" -> "?": lists of constants have no fixed length
            continue
        if words[-1:] == ["?"] and word == "?":
            continue
        words.append(word)
    digest = hashlib.sha256(" ".join(words).encode()).hexdigest()
    return digest[:FINGERPRINT_HEX]


# --- conditions -------------------------------------------------------------------------


def condition_predicates(condition: str) -> tuple[Predicate, ...]:
    """The conjuncts of a WHERE condition about one table's unqualified columns, such as
    ``pg_get_expr`` gives for a partial index: ``(status = 'queued'::text)``."""
    tree = _parse(f"SELECT 1 FROM qadvisor_condition WHERE {condition}")
    select = _main(tree)
    assert isinstance(select, exp.Select)
    return tuple(_predicates(select, "qadvisor_condition"))


# --- the analysis -----------------------------------------------------------------------


def analyse(sql: str) -> DequeueStatement | None:
    """The dequeue shape of ``sql``, or None when it takes no row lock.

    When several query levels lock, the first one in the text that takes rows is analysed
    (a level before the levels inside it, a WITH query before the next: pgqueuer's claim of
    queued jobs before its re-claim of stale ones); ``lock`` is its first locking clause
    (``locked_tables`` counts them all).
    Raises StatementError as check_plannable does.
    """
    tree = _parse(sql)
    select = _locking_select(tree)
    if select is None:
        return None
    ctes = _cte_names(tree)
    queue_table, owner = _queue_table(select, ctes)
    queue_key = _source_key(queue_table)
    locks = select.args["locks"]
    level = _lock_level(tree, select)
    return DequeueStatement(
        text=sql,
        kind=_kind(_main(tree)),
        schema=_name(queue_table.args.get("db")),
        table=_table_name(queue_table),
        alias=_name(queue_table.args.get("alias")),
        predicates=tuple(_predicates(owner, queue_key)),
        order_by=_order_items(select),
        limit=_literal_limit(select),
        limit_is_parameter=_limit_is_parameter(select),
        lock=_lock_clause(locks[0], select, ctes),
        lock_level=level,
        locked_tables=_unique(_table_name(t) for t, _ in _covered(select, _of_names(locks), ctes)),
        has_window=_has_window(select, ctes),
        lateral=_lateral(select, owner, queue_key, ctes) if level == "lateral" else None,
        parameters=tuple(sorted({_parameter_index(p) for p in tree.find_all(exp.Parameter)})),
        relations=_relations(tree, ctes),
    )


def _relations(tree: exp.Expr, ctes: set[str]) -> tuple[tuple[str | None, str], ...]:
    found = (
        (_name(t.args.get("db")), _table_name(t))
        for t in tree.find_all(exp.Table)
        if _is_base_table(t, ctes) and not isinstance(t.parent, exp.Lock)
    )
    return tuple(dict.fromkeys(found))


def _locking_select(tree: exp.Expr) -> exp.Select | None:
    """The first SELECT (outer before inner) with a locking clause that takes rows of a table.

    ``SELECT 1 FOR UPDATE`` or a lock on a level that reads only a WITH query locks nothing
    (PostgreSQL accepts both), so such a level does not count.
    """
    ctes = _cte_names(tree)
    selects = (n for n in tree.walk(bfs=False) if isinstance(n, exp.Select) and n.args.get("locks"))
    for select in selects:
        if next(_covered(select, None, ctes), None) is not None:
            return select
    return None


def _kind(main: exp.Expr) -> StatementKind:
    if isinstance(main, exp.Update):
        return "update"
    if isinstance(main, exp.Delete):
        return "delete"
    return "select"


def _lock_level(tree: exp.Expr, select: exp.Select) -> LockLevel:
    """Where the locking SELECT sits, judged by what immediately contains it."""
    if select is _main(tree):
        return "top"
    parent = select.parent
    if isinstance(parent, exp.CTE):
        return "cte"
    if isinstance(parent, exp.Subquery) and isinstance(parent.parent, exp.Lateral):
        return "lateral"
    return "subquery"


# Names and sources of one query level.


def _name(node: exp.Expr | None) -> str | None:
    """An identifier (or the identifier inside a TableAlias) as PostgreSQL folds it."""
    if isinstance(node, exp.TableAlias):
        node = node.this
    if not isinstance(node, exp.Identifier):
        return None
    text = str(node.this)
    return text if node.quoted else text.lower()


def _table_name(table: exp.Table) -> str:
    return _name(table.this) or table.name


def _source_key(source: exp.Expr) -> str:
    """How columns of the level refer to a FROM item: its alias, else its table name."""
    alias = _name(source.args.get("alias"))
    if alias:
        return alias
    return _table_name(source) if isinstance(source, exp.Table) else ""


def _sources(select: exp.Select) -> list[exp.Expr]:
    """The FROM items of one query level, joins included."""
    from_ = select.args.get("from_")
    items = [from_.this] if from_ else []
    items += [join.this for join in select.args.get("joins") or []]
    return items


def _inner_select(source: exp.Expr) -> exp.Select | None:
    """The SELECT of a derived table or LATERAL sub-select; None for anything else."""
    if isinstance(source, exp.Lateral):
        source = source.this
    if isinstance(source, exp.Subquery):
        inner = _main(source)
        return inner if isinstance(inner, exp.Select) else None
    return None


def _cte_names(tree: exp.Expr) -> set[str]:
    return {name for cte in tree.find_all(exp.CTE) if (name := _name(cte.args.get("alias")))}


def _is_base_table(source: exp.Expr, ctes: set[str]) -> bool:
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Identifier):
        return False  # a function in FROM, e.g. generate_series()
    return bool(source.args.get("db")) or _table_name(source) not in ctes


def _covered(
    select: exp.Select, of: set[str] | None, ctes: set[str]
) -> Iterator[tuple[exp.Table, exp.Select]]:
    """The base tables a lock at ``select`` takes rows of, each with the level it is in.

    As PostgreSQL does (transformLockingClause): a lock without OF covers every FROM item; a
    derived table or LATERAL sub-select it covers passes the lock on to all of its own FROM
    items; a WITH query referenced in FROM is not locked.
    """
    for source in _sources(select):
        if of is not None and _source_key(source) not in of:
            continue
        if _is_base_table(source, ctes):
            assert isinstance(source, exp.Table)
            yield source, select
        elif (inner := _inner_select(source)) is not None:
            yield from _covered(inner, None, ctes)


def _of_names(locks: list[exp.Lock]) -> set[str] | None:
    """The names listed after OF in all lock clauses of a level, None if one has no OF."""
    names: set[str] = set()
    for lock in locks:
        if not lock.expressions:
            return None
        names.update(_source_key(t) for t in lock.expressions)
    return names


def _lock_clause(lock: exp.Lock, select: exp.Select, ctes: set[str]) -> LockClause:
    # sqlglot: update=True/False, key=True turns UPDATE into NO KEY UPDATE and SHARE into
    # KEY SHARE; wait=False is SKIP LOCKED, wait=True is NOWAIT, absent is "wait".
    update, key, wait = lock.args.get("update"), lock.args.get("key"), lock.args.get("wait")
    strength: LockStrength = (
        ("no key update" if key else "update") if update else ("key share" if key else "share")
    )
    policy: WaitPolicy | None = None if wait is None else ("nowait" if wait else "skip locked")
    of: tuple[str, ...] = ()
    if lock.expressions:
        names = {_source_key(t) for t in lock.expressions}
        # An OF name the level does not have stays as written (PostgreSQL would refuse it).
        known = {_source_key(s) for s in _sources(select)}
        of = _unique(
            [_table_name(t) for t, _ in _covered(select, names, ctes)] + sorted(names - known)
        )
    return LockClause(strength=strength, wait_policy=policy, of=of)


def _queue_table(select: exp.Select, ctes: set[str]) -> tuple[exp.Table, exp.Select]:
    """The queue table among the tables reachable from the locking level, with its level.

    One table: that one. Several (a join with the tenant table): the one the first ORDER BY
    column belongs to, then the one with most simple predicates, then the first locked one.
    It is picked without regard to OF, so that locking the tenant row instead of the job
    still names the job table as the queue (and locked_tables shows the mistake).
    """
    candidates = list(_covered(select, None, ctes))
    if len(candidates) == 1:
        return candidates[0]
    order = select.args.get("order")
    first = order.expressions[0].this if order and order.expressions else None
    locked = {id(t) for t, _ in _covered(select, _of_names(select.args["locks"]), ctes)}

    def score(item: tuple[exp.Table, exp.Select]) -> tuple[bool, bool, int, bool]:
        table, level = item
        key = _source_key(table)
        # A LATERAL sub-select that picks one row per outer row (its own ORDER BY / LIMIT)
        # picks the job, even when the lock sits at the outer level (the round-robin query
        # with its lock moved out: it locks the rotation row, and the job table is the queue).
        picks = (
            level is not select
            and isinstance(level.parent, exp.Subquery)
            and isinstance(level.parent.parent, exp.Lateral)
            and bool(level.args.get("limit") or level.args.get("order"))
        )
        orders = isinstance(first, exp.Column) and _qualifier(first) == key and level is select
        simple = sum(1 for p in _predicates(level, key, only_qualified=True) if p.op != "other")
        return picks, orders, simple, id(table) in locked

    return max(candidates, key=score)  # max() keeps the first of equals: FROM order


# Predicates.

_OPS: dict[type[exp.Binary], tuple[PredicateOp, PredicateOp]] = {
    # sqlglot node -> (op, op with the operands swapped)
    exp.EQ: ("=", "="),
    exp.NEQ: ("<>", "<>"),
    exp.LT: ("<", ">"),
    exp.LTE: ("<=", ">="),
    exp.GT: (">", "<"),
    exp.GTE: (">=", "<="),
}


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect=DIALECT)


def _conjuncts(node: exp.Expr | None) -> Iterator[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.this)
        yield from _conjuncts(node.expression)
    elif node is not None:
        yield node


def _filters(select: exp.Select) -> Iterator[exp.Expr]:
    """WHERE conjuncts plus ON conjuncts of inner joins: both filter the queue rows."""
    where = select.args.get("where")
    yield from _conjuncts(where.this if where else None)
    for join in select.args.get("joins") or []:
        if not join.side:  # LEFT/RIGHT/FULL ON conditions do not filter the preserved side
            yield from _conjuncts(join.args.get("on"))


def _qualifier(column: exp.Column) -> str | None:
    return _name(column.args.get("table"))


def _unwrap(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Cast | exp.Paren) and isinstance(node.this, exp.Expr):
        node = node.this
    return node


def _own_columns(node: exp.Expr) -> Iterator[exp.Column]:
    """Columns of ``node`` at its own query level (not inside a nested sub-select)."""
    for sub in node.walk(prune=lambda n: n is not node and isinstance(n, exp.Query)):
        if isinstance(sub, exp.Column) and isinstance(sub.this, exp.Identifier):
            yield sub


def _predicates(
    select: exp.Select, key: str, *, only_qualified: bool = False
) -> Iterator[Predicate]:
    """The filters of ``select`` about the FROM item called ``key``.

    An unqualified column is taken to be the queue table's (no catalog here to say which
    table of a join has it) unless ``only_qualified``.
    """

    def is_ours(node: exp.Expr) -> bool:
        node = _unwrap(node)
        if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
            return False
        qualifier = _qualifier(node)
        return qualifier == key or (qualifier is None and not only_qualified)

    for conjunct in _filters(select):
        ours = [c for c in _own_columns(conjunct) if is_ours(c)]
        if ours:
            yield _predicate(conjunct, is_ours) or Predicate(
                column=_column_name(ours[0]), op="other", operands=(), text=_sql(conjunct)
            )


def _column_name(node: exp.Expr) -> str:
    node = _unwrap(node)
    assert isinstance(node, exp.Column)
    return _name(node.this) or node.name


def _predicate(conjunct: exp.Expr, is_ours: Callable[[exp.Expr], bool]) -> Predicate | None:
    """The conjunct as column-op-operands when it has that shape, else None."""
    text = _sql(conjunct)
    negated = isinstance(conjunct, exp.Not)
    node = conjunct.this if negated else conjunct
    if is_ours(node) and isinstance(_unwrap(node), exp.Column) and not isinstance(node, exp.Cast):
        # A bare column as a condition is a boolean: WHERE is_available / WHERE NOT done.
        return Predicate(_column_name(node), "false" if negated else "true", (), text)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null) and is_ours(node.this):
        negated = negated != bool(node.args.get("negate"))  # sqlglot 30: IS NOT is negate=True
        op: PredicateOp = "is not null" if negated else "is null"
        return Predicate(_column_name(node.this), op, (), text)
    if isinstance(node, exp.In) and is_ours(node.this):
        query = node.args.get("query")
        items = [query] if query else node.expressions
        op = "not in" if negated else "in"
        return Predicate(_column_name(node.this), op, tuple(_param(i) for i in items), text)
    if negated or type(node) not in _OPS:
        return None
    assert isinstance(node, exp.Binary)
    op, swapped = _OPS[type(node)]
    left, right = node.this, node.expression
    if not is_ours(left) and is_ours(right):
        left, right, op = right, left, swapped
    if not is_ours(left):
        return None
    if isinstance(right, exp.Any):
        if op != "=":
            return None
        return Predicate(_column_name(left), "any", _any_operands(right), text)
    if isinstance(right, exp.All):
        return None
    return Predicate(_column_name(left), op, (_param(right),), text)


def _any_operands(node: exp.Any) -> tuple[Param, ...]:
    """``= ANY($1)`` gives the parameter, ``= ANY(ARRAY['a', 'b'])`` the literals."""
    operand = node.this.this if isinstance(node.this, exp.Paren) else node.this
    array = _unwrap(operand)
    if isinstance(array, exp.Array):
        return tuple(_param(e) for e in array.expressions)
    return (_param(operand),)


def _param(node: exp.Expr) -> Param:
    text = _sql(node)
    inner = _unwrap(node)  # $1::text is still the parameter, 'queued'::job_status a literal
    if isinstance(inner, exp.Neg):
        inner = inner.this
    if isinstance(inner, exp.Parameter):
        return Param("parameter", text, _parameter_index(inner))
    if isinstance(inner, exp.Literal | exp.Null | exp.Boolean):
        return Param("literal", text)
    if isinstance(inner, exp.Column):
        return Param("column", text)
    return Param("expression", text)


def _parameter_index(node: exp.Parameter) -> int:
    # sqlglot parses PostgreSQL's $1 as Parameter(this=Literal(1)).
    return int(node.this.name) if node.this.name.isdigit() else 0


# ORDER BY, LIMIT, windows, LATERAL.


def _order_items(select: exp.Select) -> tuple[OrderItem, ...]:
    order = select.args.get("order")
    return tuple(_order_item(o) for o in (order.expressions if order else []))


def _order_item(ordered: exp.Ordered) -> OrderItem:
    node = ordered.this
    plain = isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier)
    descending = bool(ordered.args.get("desc"))
    # sqlglot always fills nulls_first with the effective value; keep it only when it is not
    # PostgreSQL's default (NULLS LAST for ASC, NULLS FIRST for DESC).
    nulls_first = bool(ordered.args.get("nulls_first"))
    return OrderItem(
        column=_column_name(node) if plain else _sql(node),
        descending=descending,
        nulls_first=None if nulls_first == descending else nulls_first,
    )


def _limit_count(select: exp.Select) -> exp.Expr | None:
    limit = select.args.get("limit")
    if isinstance(limit, exp.Fetch):  # FETCH FIRST ROW ONLY has no count: one row
        return limit.args.get("count") or exp.Literal.number(1)
    return limit.expression if isinstance(limit, exp.Limit) else None


def _literal_limit(select: exp.Select) -> int | None:
    count = _limit_count(select)
    if isinstance(count, exp.Literal) and count.is_int:
        return int(count.name)
    return None


def _limit_is_parameter(select: exp.Select) -> bool:
    count = _limit_count(select)
    return count is not None and isinstance(_unwrap(count), exp.Parameter)


def _has_window(select: exp.Select, ctes: set[str]) -> bool:
    """A window function at a level the lock applies to.

    PostgreSQL checks every level a lock reaches: "FOR UPDATE is not allowed with window
    functions" is raised for ``SELECT row_number() OVER () ... FOR UPDATE`` and also for
    ``SELECT ... FROM (SELECT row_number() OVER () ...) x FOR UPDATE``, because the lock is
    pushed down into the derived table (verified on PostgreSQL 15). It is not raised when OF
    leaves the derived table out, for windows in sub-selects of WHERE or the select list, or
    for an unused WINDOW clause.
    """
    levels = {id(select): select}
    for _, level in _covered(select, _of_names(select.args["locks"]), ctes):
        levels[id(level)] = level
    return any(_own_window(level) for level in levels.values())


def _own_window(select: exp.Select) -> bool:
    for node in select.walk(prune=lambda n: n is not select and isinstance(n, exp.Query)):
        if isinstance(node, exp.Window) and node.arg_key != "windows":
            return True
    return False


def _lateral(select: exp.Select, owner: exp.Select, key: str, ctes: set[str]) -> Lateral | None:
    """The round-robin shape around a lock in a LATERAL sub-select; None when the sub-select
    is not correlated on a column of a table of the outer level (a WITH query or a function
    in FROM, such as pgqueuer's ``unnest($2)`` of entrypoints, is no rotation table)."""
    lateral = select.find_ancestor(exp.Lateral)
    outer = lateral.find_ancestor(exp.Select) if lateral else None
    if not isinstance(outer, exp.Select):
        return None
    inner_keys = {_source_key(s) for s in _sources(owner)}
    outer_tables = {_source_key(s): s for s in _sources(outer) if _is_base_table(s, ctes)}
    for conjunct in _filters(owner):
        if not isinstance(conjunct, exp.EQ):
            continue
        sides = [_unwrap(conjunct.this), _unwrap(conjunct.expression)]
        if not all(isinstance(s, exp.Column) for s in sides):
            continue
        for ours, theirs in (sides, sides[::-1]):
            assert isinstance(ours, exp.Column) and isinstance(theirs, exp.Column)
            correlated = _qualifier(theirs)
            if (
                _qualifier(ours) in (key, None)
                and correlated not in inner_keys
                and correlated in outer_tables
            ):
                table = outer_tables[correlated]
                assert isinstance(table, exp.Table)
                return Lateral(
                    outer_schema=_name(table.args.get("db")),
                    outer_table=_table_name(table),
                    inner_column=_column_name(ours),
                    outer_column=_column_name(theirs),
                    outer_order_by=_order_items(outer),
                )
    return None


def _unique(names: Iterator[str] | list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


# --- rewriting --------------------------------------------------------------------------


def normalise_for_planning(sql: str) -> tuple[str, dict[int, str]]:
    """pg_stat_statements text made fit to plan.

    pg_stat_statements replaces every constant with ``$n``, so ``LIMIT 1`` arrives as
    ``LIMIT $2``; planned as a parameter, the planner assumes 10 % of the rows are wanted and
    costs the dequeue as a large fetch. A LIMIT or FETCH FIRST whose count is a bare
    parameter gets ``1`` back; the remaining parameters are renumbered ``$1..$k`` without gaps,
    in order of first appearance, so that PREPARE / EXPLAIN (GENERIC_PLAN) accept the text.

    Returns the new text and ``{new number: original placeholder}``, e.g. ``{1: "$1"}``: keyed
    by the new number because that is what the caller binds or reports against; the value is
    the original ``$n`` as written so messages can quote it. The text is the original
    statement edited in place (comments and spelling kept, no trailing ';'), not a sqlglot
    regeneration. Raises StatementError as check_plannable does.
    """
    check_plannable(sql)
    text = split_statements(sql)[0]
    tokens = _tokens(text)
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    numbers: dict[str, int] = {}
    for i, (dollar, number) in enumerate(itertools.pairwise(tokens)):
        if not is_placeholder(dollar, number):
            continue
        original = f"${number.text}"
        if _counts_rows(tokens, i):
            edits.append((dollar.start, number.end + 1, "1"))
            continue
        new = numbers.setdefault(original, len(numbers) + 1)
        typed = tokens[i - 1] if i and tokens[i - 1].token_type in _TYPED_LITERALS else None
        if typed is not None and typed.end + 1 <= dollar.start:
            # INTERVAL '30 seconds' is recorded as INTERVAL $5, which is not SQL: only a
            # string may follow the type name there. A cast says the same.
            edits.append((typed.start, number.end + 1, f"${new}::{typed.text.lower()}"))
        else:
            edits.append((dollar.start, number.end + 1, f"${new}"))
    for start, end, replacement in reversed(edits):
        text = text[:start] + replacement + text[end:]
    return text, {new: original for original, new in numbers.items()}


# Type names that take a string constant after them (typed-literal syntax: DATE '2024-01-01').
_TYPED_LITERALS = {TokenType.INTERVAL, TokenType.DATE, TokenType.TIME, TokenType.TIMESTAMP,
                   TokenType.TIMESTAMPTZ}  # fmt: skip


def is_placeholder(dollar: Token, number: Token) -> bool:
    # The tokenizer reads $12 as PARAMETER '$' followed by NUMBER '12'.
    return (
        dollar.token_type == TokenType.PARAMETER
        and number.token_type == TokenType.NUMBER
        and number.start == dollar.end + 1
        and number.text.isdigit()
    )


def _counts_rows(tokens: list[Token], i: int) -> bool:
    """Token ``i`` is the count of ``LIMIT $n`` or ``FETCH FIRST|NEXT $n ROW(S)``."""
    before = [t.token_type for t in tokens[max(0, i - 2) : i]]
    return before[-1:] == [TokenType.LIMIT] or (
        len(before) == 2
        and before[0] == TokenType.FETCH
        and before[1] in (TokenType.FIRST, TokenType.NEXT)
    )


def with_literals(sql: str, values: Mapping[int, str]) -> str:
    """``sql`` with parameter ``$n`` replaced by the SQL literal ``values[n]``.

    Values are SQL text already quoted (``"'pending'"``, ``"1"``,
    ``"'queued'::job_status"``); parameters without a value stay. The result is sqlglot's
    pretty PostgreSQL output without a trailing ';' (it spells some things its own way:
    ``now()`` as ``CURRENT_TIMESTAMP``, ``x::text`` as ``CAST(x AS TEXT)``).
    """
    return _pretty(_bound(_parse(sql), values))


def _bound(tree: exp.Expr, values: Mapping[int, str]) -> exp.Expr:
    """The tree with parameter ``$n`` replaced by the literal ``values[n]`` (SQL text)."""
    literals = {n: _literal(text) for n, text in values.items()}

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Parameter) and _parameter_index(node) in literals:
            return literals[_parameter_index(node)].copy()
        return node

    return tree.transform(replace)


def index_probe(sql: str, keys: Sequence[str], values: Mapping[int, str]) -> str | None:
    """A question for the planner: can the claim's conditions on its queue table use an index
    whose key is ``keys``?

    ``SELECT 1 FROM <queue table> <alias> WHERE <the conditions of the claim's level that read
    only the queue table> ORDER BY <keys> LIMIT 1``, parameters replaced by ``values`` (SQL
    literals) so the planner sees the values, as in a custom plan. Planned with sequential
    scans, bitmap scans and sorts disabled, it is served by a partial index with that key
    exactly when PostgreSQL proves the index's predicate from the conditions. None when the
    statement takes no row lock. Key items are column names (``created_at DESC``), qualified
    here with the queue table's alias.
    """
    tree = _parse(sql)
    select = _locking_select(tree)
    if select is None:
        return None
    queue_table, owner = _queue_table(select, _cte_names(tree))
    key = _source_key(queue_table)
    conditions = [c.copy() for c in _filters(owner) if _reads_only(c, key)]
    probe = exp.select("1").from_(queue_table.copy())
    if conditions:
        probe = probe.where(exp.and_(*conditions))
    items = []
    for text in keys:
        ordered = _ordered(text)
        if isinstance(ordered.this, exp.Column) and not ordered.this.args.get("table"):
            ordered.this.set("table", exp.to_identifier(key))
        items.append(ordered)
    probe.set("order", exp.Order(expressions=items))
    return _pretty(_bound(probe.limit(1), values))


def _reads_only(condition: exp.Expr, key: str) -> bool:
    """The condition names no FROM item of its level but the queue table (``key``): columns of
    sub-selects inside it may name their own FROM items."""
    inner = {_source_key(t) for t in condition.find_all(exp.Table)}
    return all(
        _qualifier(c) in (None, key) or _qualifier(c) in inner
        for c in condition.find_all(exp.Column)
        if isinstance(c.this, exp.Identifier)
    )


def _literal(text: str) -> exp.Expr:
    try:
        with quiet_sqlglot():
            node = sqlglot.parse_one(text, dialect=DIALECT)
    except (ParseError, TokenError) as err:
        raise StatementError(f"not an SQL literal: {text!r} ({_first_line(str(err))})") from None
    if any(isinstance(n, exp.Query | exp.Command | exp.DML | exp.DDL) for n in node.walk()):
        raise StatementError(f"not an SQL literal: {text!r}")
    return node


def with_order_by(sql: str, columns: Sequence[str]) -> str:
    """``sql`` with the ORDER BY of the SELECT that carries the lock set to ``columns``.

    Each column is SQL for one ORDER BY item (``"enqueued_at"``, ``"id DESC"``). A plain
    column name is qualified with the queue table's alias when that SELECT reads several
    tables. Other levels (the outer ORDER BY of the round-robin query) are left alone. The
    result is sqlglot's pretty PostgreSQL output, like with_literals. Raises StatementError
    when ``sql`` is not plannable or takes no row lock.
    """
    if not columns:
        raise ValueError("with_order_by needs at least one column")
    tree = _parse(sql)
    select = _locking_select(tree)
    if select is None:
        raise StatementError("no SELECT ... FOR UPDATE/SHARE whose ORDER BY could be set")
    queue_table, _ = _queue_table(select, _cte_names(tree))
    qualify = len(_sources(select)) > 1
    items = []
    for column in columns:
        ordered = _ordered(column)
        target = ordered.this
        if qualify and isinstance(target, exp.Column) and not target.args.get("table"):
            target.set("table", exp.to_identifier(_source_key(queue_table)))
        items.append(ordered)
    select.set("order", exp.Order(expressions=items))
    return _pretty(tree)


def _ordered(text: str) -> exp.Ordered:
    try:
        with quiet_sqlglot():
            node = exp.maybe_parse(text, into=exp.Ordered, dialect=DIALECT)
    except (ParseError, TokenError) as err:
        raise StatementError(f"not an ORDER BY item: {text!r} ({_first_line(str(err))})") from None
    if not isinstance(node, exp.Ordered):
        raise StatementError(f"not an ORDER BY item: {text!r}")
    return node


class _Generator(_PostgresGenerator):
    """sqlglot's PostgreSQL generator with the locking clause on its own line when pretty
    (sqlglot 30 glues it after LIMIT with stray spaces: "LIMIT 1   FOR UPDATE")."""

    def after_limit_modifiers(self, expression: exp.Expr) -> list[str]:
        locks = "".join(self.seg(self.sql(lock)) for lock in expression.args.get("locks") or [])
        return [locks, self.sql(expression, "sample")]


def _pretty(tree: exp.Expr) -> str:
    return str(_Generator(dialect=DIALECT, pretty=True).generate(tree))


def with_skip_locked(sql: str, schema: str | None, table: str) -> str | None:
    """``sql`` with SKIP LOCKED on the locking clause of the level that claims (the one
    analyse reads), and, when that clause also locks rows of other tables than the queue
    ``schema.table`` (a tenant or rotation table), one clause ``FOR <strength> OF <queue>
    SKIP LOCKED`` in its place that locks only the job. ``<queue>`` is how that level names
    the queue table, or the sub-select that reads it, spelled as written there.

    None when ``sql`` cannot be parsed, takes no row lock, or its locking level does not read
    the queue table. Printed like with_literals.
    """
    try:
        tree = _parse(sql)
    except StatementError:
        return None
    select = _locking_select(tree)
    if select is None:
        return None
    ctes = _cte_names(tree)
    locks: list[exp.Lock] = select.args["locks"]
    locked = [t for t, _ in _covered(select, _of_names(locks), ctes)]
    if any(_table_name(t) != table for t in locked):
        name = _queue_source_name(select, schema, table, ctes)
        if name is None:
            return None
        first = locks[0]
        lock = exp.Lock(
            update=first.args.get("update"),
            key=first.args.get("key"),
            expressions=[exp.Table(this=name)],
            wait=False,
        )
        select.set("locks", [lock])
    else:
        for lock in locks:
            lock.set("wait", False)
    return _pretty(tree)


def _queue_source_name(
    select: exp.Select, schema: str | None, table: str, ctes: set[str]
) -> exp.Identifier | None:
    """The identifier the level uses for the FROM item holding the queue table: the table's
    alias (or name), or the alias of the sub-select / LATERAL that reads it."""

    def is_queue(node: exp.Expr) -> bool:
        if not _is_base_table(node, ctes) or _table_name(node) != table:  # type: ignore[arg-type]
            return False
        written = _name(node.args.get("db"))
        return written is None or schema is None or written == schema

    for source in _sources(select):
        alias = source.args.get("alias")
        alias_id = alias.this if isinstance(alias, exp.TableAlias) else None
        if is_queue(source):
            name = alias_id if isinstance(alias_id, exp.Identifier) else source.this
            return name.copy() if isinstance(name, exp.Identifier) else None
        if isinstance(source, exp.Subquery | exp.Lateral) and any(
            is_queue(t) for t in source.find_all(exp.Table)
        ):
            return alias_id.copy() if isinstance(alias_id, exp.Identifier) else None
    return None


def window_partitions(sql: str) -> tuple[str, ...]:
    """The PARTITION BY columns of every window function in ``sql``, each once, names folded
    as PostgreSQL folds them; () when it has none or cannot be parsed."""
    try:
        tree = _parse(sql)
    except StatementError:
        return ()
    found = (
        _column_name(col)
        for window in tree.find_all(exp.Window)
        for col in window.args.get("partition_by") or []
        if isinstance(col, exp.Column) and isinstance(col.this, exp.Identifier)
    )
    return _unique(found)


class KeyNotReturned(StatementError):
    """The statement does not return the key columns a rewrite needs."""


def with_lock_outside(sql: str, queue: str, keys: Sequence[str]) -> str | None:
    """The rows a top-level ``SELECT ... FOR ...`` picks, locked at a level of their own:
    ``SELECT * FROM <queue> WHERE <keys> IN (SELECT w.<keys> FROM (<sql without its locking
    clause>) AS w) FOR <its strength> SKIP LOCKED``. A window function of ``sql`` then sits in
    a sub-select of WHERE, a level the lock does not reach.

    ``queue`` is the queue table as SQL (qualified, quoted as needed), ``keys`` the names of
    its key columns, spelled in the rewrite as the statement's select list spells them. None
    when ``sql`` is not a top-level SELECT with a locking clause, or when there are no keys;
    KeyNotReturned when it does not return every key column.
    """
    try:
        tree = _parse(sql)
    except StatementError:
        return None
    if not (isinstance(tree, exp.Select) and tree.args.get("locks") and keys):
        return None
    returned = {e.output_name: e for e in tree.selects}
    if not all(k in returned for k in keys):
        raise KeyNotReturned(f"the statement does not return the key ({', '.join(keys)})")
    strength = _lock_clause(tree.args["locks"][0], tree, _cte_names(tree)).strength.upper()
    tree.set("locks", None)
    inner = _sql(tree)
    names = [_output_identifier(returned[k]) for k in keys]
    listed = ", ".join(names)
    outer = listed if len(keys) == 1 else f"({listed})"
    chosen = ", ".join(f"w.{n}" for n in names)
    wrapped = (
        f"SELECT * FROM {queue} WHERE {outer} IN (SELECT {chosen} FROM ({inner}) AS w) "
        f"FOR {strength} SKIP LOCKED"
    )
    try:
        return _pretty(_parse(wrapped))
    except StatementError:
        return None


def _output_identifier(select_item: exp.Expr) -> str:
    """How a select-list item names its output column, as SQL (quoted when it was)."""
    node = select_item.args.get("alias") if isinstance(select_item, exp.Alias) else select_item
    if isinstance(node, exp.Column):
        node = node.this
    return _sql(node) if isinstance(node, exp.Identifier) else select_item.output_name
