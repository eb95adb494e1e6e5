"""Screening user input: split SQL text into statements, refuse what must not be planned,
and parse what may be.

A plannable statement is exactly one SELECT, UPDATE, DELETE or WITH ... statement; anything
else is refused here, before it reaches the analysis or the server. Parsing is sqlglot's,
dialect ``postgres``; tokenizing alone (splitting, fingerprints, placeholders) never fails on
text the grammar does not know.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import ClassVar

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import TokenizerCore

from qadvisor.sql.scope import main_statement

_PLANNABLE = "a single SELECT/UPDATE/DELETE/WITH statement"


class StatementError(ValueError):
    """The text is not one statement that qadvisor may plan (or it cannot be parsed)."""


# A plannable statement starts with one of these; anything else is refused before sqlglot
# parses it (EXPLAIN, DO, CALL, VACUUM are COMMAND tokens that sqlglot would only parse into
# an opaque exp.Command, after logging a warning).
_STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.UPDATE, TokenType.DELETE, TokenType.L_PAREN}
_KEYWORDS = Postgres.tokenizer_class.KEYWORDS


class _Core(TokenizerCore):
    __slots__ = ()

    def _scan_string(self, start: str) -> bool:
        # A dollar-quote tag follows the rules of an unquoted identifier, so it never starts
        # with a digit: "$" then a digit is a positional parameter. sqlglot reads "$3,$4)" as
        # a dollar-quoted string tagged "3," that never ends; PostgreSQL before 18 records
        # IN ('queued','retry') just so.
        if start == "$" and self._peek.isdigit():
            self._add(self.heredoc_string_alternative)
            return True
        return bool(super()._scan_string(start))


class _Postgres(Postgres):
    """sqlglot's PostgreSQL dialect with PostgreSQL's own reading of positional parameters."""

    class Tokenizer(Postgres.Tokenizer):
        def _init_core(self) -> TokenizerCore:
            core = super()._init_core()
            core.__class__ = _Core  # the same state, with PostgreSQL's reading of "$1"
            return core


_Tokenizer = _Postgres.Tokenizer


# The dialect qadvisor reads and prints SQL in.
DIALECT = _Postgres


class _PlpgsqlTokenizer(_Tokenizer):
    # The SQL tokenizer reads the rest of a statement that starts with EXECUTE, FETCH or a
    # COMMAND word (DECLARE) as one string; in a function body those words start PL/pgSQL
    # statements and sections whose tokens are needed.
    COMMANDS: ClassVar[set[TokenType]] = set()


UNSPLITTABLE = "cannot split it into tokens (an unterminated string, quoted name or comment?)"


def tokenize(sql: str, *, plpgsql: bool = False) -> list[Token]:
    """Tokens of SQL text, comments dropped; StatementError when it cannot be split.

    ``plpgsql``: as PL/pgSQL text (a function body, a statement PL/pgSQL ran), where
    EXECUTE, FETCH and DECLARE are words like any other instead of swallowing the rest of the
    statement into one string token.
    """
    try:
        if plpgsql:
            return list(_PlpgsqlTokenizer().tokenize(sql))
        return list(_Tokenizer().tokenize(sql))
    except TokenError:
        raise StatementError(f"unparsable SQL: {UNSPLITTABLE}") from None


def _statement_tokens(sql: str) -> list[list[Token]]:
    """Tokens of each statement, split on top-level ';' (the tokenizer already skipped
    comments and kept ';' inside strings, quoted names and dollar-quoted bodies)."""
    statements: list[list[Token]] = [[]]
    for token in tokenize(sql):
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


def first_line(message: str) -> str:
    # sqlglot error messages carry the SQL with ANSI underline codes on following lines.
    return message.replace("\x1b[4m", "").replace("\x1b[0m", "").strip().splitlines()[0]


def _parse_error(err: ParseError | TokenError) -> str:
    """Where sqlglot stopped, without its token dumps and terminal colour codes."""
    if isinstance(err, TokenError):
        return UNSPLITTABLE
    if not err.errors:
        return first_line(str(err))
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


def parse(sql: str, *, plannable: bool = True) -> exp.Expr:
    """sqlglot's tree of one statement; StatementError (one line) saying why there is none.

    ``plannable`` (the default): the statement must be one qadvisor may plan (see
    check_plannable). Otherwise any statement sqlglot reads in full is taken (an INSERT that
    fills a PL/pgSQL record, too), still not one it reads in part as an opaque command.
    """
    if not plannable:
        tree = _tree(sql)
        opaque = next((n for n in tree.walk() if isinstance(n, exp.Command)), None)
        if opaque is not None:
            raise _opaque(opaque)
        return tree
    statements = _statement_tokens(sql)
    if not statements:
        raise StatementError("no SQL statement: the text is empty or only comments")
    if len(statements) > 1:
        raise StatementError(f"{len(statements)} statements where {_PLANNABLE} is expected")
    tokens = statements[0]
    if tokens[0].token_type not in _STARTS:
        raise _refused(_leading_words(tokens))
    tree = _tree(_span(sql, tokens))
    _check_tree(tree, tokens)
    return tree


# The deepest tree qadvisor reads: sqlglot parses and prints by recursion, and so do the
# analysis and the rewrites, so a statement nested deeper (parentheses, subqueries, NOT,
# CASE, ARRAY) would exhaust Python's stack. Claims nest about 15 levels.
MAX_TREE_DEPTH = 40
_TOO_DEEP = f"unparsable SQL: nested deeper than qadvisor reads ({MAX_TREE_DEPTH} levels)"
# sqlglot's time grows about threefold with each level of ARRAY[...] in ARRAY[...] (12 levels:
# seconds, 20: hours); an array of arrays of arrays is already rare.
MAX_BRACKET_DEPTH = 6
_TOO_DEEP_BRACKETS = (
    f"unparsable SQL: square brackets nested deeper than qadvisor reads ({MAX_BRACKET_DEPTH})"
)


def _tree(sql: str) -> exp.Expr:
    try:
        return _bounded_parse(sql)
    except (ParseError, TokenError) as err:
        raise StatementError(f"unparsable SQL: {_parse_error(err)}") from None


def _bounded_parse(sql: str, into: type[exp.Expr] | None = None) -> exp.Expr:
    """sqlglot's tree, or StatementError when it nests deeper than MAX_TREE_DEPTH (or
    square brackets deeper than MAX_BRACKET_DEPTH).

    A run reads the same few texts many times (a claim for its analysis, its fingerprint, its
    planning forms, its rewrites; an index predicate for every statement it is compared
    with): the tree is parsed once and each caller gets a copy of its own, since callers
    transform trees in place."""
    if into is not None:  # a fragment read as one node type: rare, not worth a cache entry
        return _parse(sql, into)
    return _parsed(sql).copy()


@lru_cache(maxsize=256)
def _parsed(sql: str) -> exp.Expr:
    return _parse(sql, None)


def _parse(sql: str, into: type[exp.Expr] | None) -> exp.Expr:
    with suppress(TokenError):  # parse_one says what is wrong with such text
        parens = brackets = 0
        for token in _Tokenizer().tokenize(sql):
            kind = token.token_type
            parens += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
            brackets += (kind == TokenType.L_BRACKET) - (kind == TokenType.R_BRACKET)
            if parens > MAX_TREE_DEPTH:
                raise StatementError(_TOO_DEEP)
            if brackets > MAX_BRACKET_DEPTH:
                raise StatementError(_TOO_DEEP_BRACKETS)
    try:
        with quiet_sqlglot():
            tree = sqlglot.parse_one(sql, dialect=DIALECT, into=into)
    except RecursionError:
        raise StatementError(_TOO_DEEP) from None
    if _depth(tree) > MAX_TREE_DEPTH:
        raise StatementError(_TOO_DEEP)
    return tree


def _depth(tree: exp.Expr) -> int:
    """How many nodes deep ``tree`` goes (without recursion: it is what bounds recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    return deepest


def _opaque(command: exp.Expr) -> StatementError:
    return StatementError(f"unparsable SQL: sqlglot cannot parse {command.name!r} here")


def _check_tree(tree: exp.Expr, tokens: list[Token]) -> None:
    main = main_statement(tree)
    if not isinstance(main, exp.Select | exp.SetOperation | exp.Update | exp.Delete):
        if tokens[0].token_type == TokenType.WITH:
            raise _refused(f"WITH ... {main.key.upper()}")
        # "(values (1))" starts with a parenthesis: name what sqlglot found inside instead.
        raise _refused(_leading_words(tokens) if tokens[0].text.isalpha() else main.key.upper())
    for node in tree.walk():
        if isinstance(node, exp.Command):
            raise _opaque(node)
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
    parse(sql)


def is_placeholder(dollar: Token, number: Token) -> bool:
    # The tokenizer reads $12 as PARAMETER '$' followed by NUMBER '12'.
    return (
        dollar.token_type == TokenType.PARAMETER
        and number.token_type == TokenType.NUMBER
        and number.start == dollar.end + 1
        and number.text.isdigit()
    )


def expression(text: str, what: str, into: type[exp.Expr] | None = None) -> exp.Expr:
    """One SQL expression (a literal, an ORDER BY item, a condition), never a statement:
    StatementError saying it is not ``what`` ("an SQL literal") otherwise."""
    try:
        node = _bounded_parse(text, into)
    except (ParseError, TokenError) as err:
        raise StatementError(f"not {what}: {text!r} ({first_line(str(err))})") from None
    if any(isinstance(n, exp.Query | exp.Command | exp.DML | exp.DDL) for n in node.walk()):
        raise StatementError(f"not {what}: {text!r}")
    return node
