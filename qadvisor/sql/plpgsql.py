"""The structure of a PL/pgSQL or SQL function body: its variables and the SQL it runs.

A function body (``pg_proc.prosrc``) is read into plain data: the blocks with the variables
they declare (parameters, DECLARE sections, loop variables), and every place where the body
hands SQL to the server (a *site*): SQL statements, ``PERFORM``, ``RETURN QUERY``, the query of
a ``FOR ... IN ... LOOP`` or of a cursor, the expressions of assignments and conditions, and
``EXECUTE`` (dynamic SQL, which is recorded but never analysed). Each site keeps the text as
PL/pgSQL runs it (``INTO`` targets removed, ``PERFORM`` run as ``SELECT``, an expression as
itself), which is also what pg_stat_statements records for it with ``track = all``, and the
text qadvisor plans (an expression as ``SELECT <expression>``).

Nothing here talks to PostgreSQL or does I/O. The text is split with sqlglot's PostgreSQL
tokenizer, so strings (dollar-quoted ones included), quoted names and comments are never
mistaken for structure. Unquoted names are folded to lower case as PostgreSQL does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from sqlglot import Token, TokenType

from qadvisor.sql import dequeue


class BodyError(ValueError):
    """The body cannot be read; the message is one line and names the line of the body."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


STRING_TOKENS = frozenset(
    {
        TokenType.STRING,
        TokenType.HEREDOC_STRING,
        TokenType.NATIONAL_STRING,
        TokenType.BYTE_STRING,
        TokenType.BIT_STRING,
        TokenType.HEX_STRING,
        TokenType.RAW_STRING,
        TokenType.UNICODE_STRING,
    }
)


def word(token: Token) -> str | None:
    """The upper-cased text of a bare word (keyword or unquoted name), None for anything else."""
    if token.token_type in STRING_TOKENS or token.token_type == TokenType.IDENTIFIER:
        return None
    text = token.text
    return text.upper() if text[:1].isalpha() or text[:1] == "_" else None


def name_of(token: Token) -> str | None:
    """A name as PostgreSQL folds it: a quoted name as written, a bare word in lower case."""
    if token.token_type == TokenType.IDENTIFIER:
        return str(token.text)
    w = word(token)
    return w.lower() if w is not None else None


def is_placeholder(tokens: Sequence[Token], i: int) -> bool:
    """Tokens ``i`` and ``i + 1`` are ``$n`` (the tokenizer reads ``$12`` as '$' then '12')."""
    return i + 1 < len(tokens) and dequeue.is_placeholder(tokens[i], tokens[i + 1])


def lock_at(tokens: Sequence[Token], i: int) -> int:
    """The number of tokens of a row-locking clause (``FOR UPDATE``, ``FOR NO KEY UPDATE``,
    ``FOR SHARE``, ``FOR KEY SHARE``) starting at ``i``; 0 when there is none."""
    words = [word(t) for t in tokens[i : i + 4]]
    if words[:1] != ["FOR"]:
        return 0
    if words[1:2] == ["UPDATE"]:
        return 2
    if words[1:2] == ["SHARE"] and words[2:3] != ["IN"]:  # FOR share IN ...: a loop
        return 2
    if words[1:4] == ["NO", "KEY", "UPDATE"]:
        return 4
    if words[1:3] == ["KEY", "SHARE"]:
        return 3
    return 0


def has_lock(tokens: Sequence[Token]) -> bool:
    return any(lock_at(tokens, i) for i in range(len(tokens)))


def mentions_lock(tokens: Sequence[Token]) -> bool:
    """A row-locking clause in the tokens or in the SQL text of their strings (dynamic SQL
    built with format() or string concatenation)."""
    if has_lock(tokens):
        return True
    for token in tokens:
        if token.token_type in STRING_TOKENS:
            try:
                inner = dequeue.tokenize(str(token.text), plpgsql=True)
            except dequeue.StatementError:
                inner = []
            if has_lock(inner):
                return True
    return False


# Sites whose SQL is an expression that qadvisor plans as "SELECT <expression>".
EXPRESSION_CONTEXTS = frozenset(
    {
        "assignment",
        "IF condition",
        "WHILE condition",
        "CASE expression",
        "CASE WHEN",
        "RETURN",
        "DECLARE default",
        "FOREACH array",
    }
)


# --- data -------------------------------------------------------------------------------


@dataclass(eq=False)
class Variable:
    """A name the body can use for a value: a parameter, a declared variable, a loop
    variable, or a special one (FOUND, SQLSTATE...).

    ``declared`` is the type as written (``bigint``, ``jobs.id%TYPE``, ``jobs%ROWTYPE``,
    ``record``); parameters carry the catalog's ``format_type`` spelling.
    """

    name: str
    kind: str  # "parameter" | "variable" | "loop" | "special" | "cursor" | "alias"
    declared: str
    position: int | None = None  # parameters: $n, by input position
    alias_of: str | None = None  # "name ALIAS FOR $1 | other": the name or "$1" it stands for
    # A record variable's shape comes from the query that last filled it, by body offset.
    filled_by: list[tuple[int, Site]] = field(default_factory=list)
    # A cursor's query, for FOR r IN cursor LOOP.
    cursor_query: Site | None = None


@dataclass(eq=False)
class Scope:
    """The names one block (or loop, or the parameter list) declares."""

    label: str | None
    names: dict[str, Variable]
    parent: Scope | None = None

    def lookup(self, name: str) -> Variable | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def labelled(self, label: str) -> Scope | None:
        scope: Scope | None = self
        while scope is not None:
            if scope.label == label:
                return scope
            scope = scope.parent
        return None

    def chain(self) -> Iterator[Scope]:
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent


@dataclass(eq=False)
class Site:
    """One place where the body hands SQL to the server."""

    context: str  # "SQL statement", "PERFORM", "RETURN QUERY", "FOR loop", "cursor", ...
    line: int  # 1-based, within the body
    offset: int  # character offset of its first token in the body
    as_run: str  # the text PL/pgSQL runs (what pg_stat_statements records, constants aside)
    planned: str  # the text to plan: an SQL statement
    scope: Scope
    locks: bool  # a row-locking clause is in it
    dynamic: bool = False  # EXECUTE: the text is built at run time
    # The record variables it fills (SELECT ... INTO r, FOR r IN <query> LOOP).
    fills: tuple[Variable, ...] = ()


@dataclass
class Body:
    language: str
    sites: list[Site]
    top: Scope  # the innermost scope of the outermost block (parameters are its ancestors)
    variable_conflict: str  # "error" | "use_variable" | "use_column"


# --- reading a body ---------------------------------------------------------------------

_SQL_STARTS = frozenset(
    {"SELECT", "WITH", "UPDATE", "DELETE", "INSERT", "MERGE", "VALUES", "TABLE", "IMPORT"}
)
# Statements that hold no query of their own: a lock inside one is reported, not planned.
_OTHER_STATEMENTS = frozenset(
    {
        "RAISE",
        "ASSERT",
        "EXIT",
        "CONTINUE",
        "NULL",
        "COMMIT",
        "ROLLBACK",
        "CLOSE",
        "FETCH",
        "MOVE",
        "CALL",
        "DO",
        "GET",
    }
)
_SPECIAL = (("found", "boolean"),)
_HANDLER_SPECIAL = (("sqlstate", "text"), ("sqlerrm", "text"))
_OPEN = (TokenType.L_PAREN, TokenType.L_BRACKET)
_CLOSE = (TokenType.R_PAREN, TokenType.R_BRACKET)
_ASSIGN = (TokenType.COLON_EQ, TokenType.EQ)


def read_body(
    body: str,
    language: str,
    parameters: Sequence[Variable],
    function_name: str,
    variable_conflict: str | None = None,
    trigger: bool = False,
) -> Body:
    """Read a ``plpgsql`` or ``sql`` function body.

    ``parameters`` are the names the function's parameter list gives (PL/pgSQL sees its
    inputs and its OUT parameters, an SQL function only its inputs); they live in a scope
    labelled with the function's name, as in PL/pgSQL (``fn.param``). ``variable_conflict`` is
    the function's own ``plpgsql.variable_conflict`` setting (proconfig), if any; a
    ``#variable_conflict`` line in the body wins over it. An SQL function resolves a name
    that is both a column and a parameter to the column. Raises BodyError when the body
    cannot be read.
    """
    try:
        tokens = dequeue.tokenize(body, plpgsql=True)
    except dequeue.StatementError:
        raise BodyError(
            "cannot be split into tokens (an unterminated string, quoted name or comment?)"
        ) from None
    outer = Scope(function_name, {p.name: p for p in parameters if p.name})
    if language == "sql":
        sql_reader = _SqlReader(body, tokens, outer)
        sql_reader.read()
        return Body(language, sql_reader.sites, outer, "use_column")
    if language != "plpgsql":
        raise BodyError(f"functions in language {language} are not read")
    special = Scope(None, {n: Variable(n, "special", t) for n, t in _SPECIAL}, outer)
    if trigger:
        for n in ("new", "old"):
            special.names[n] = Variable(n, "special", "record")
    reader = _PlpgsqlReader(body, tokens, special)
    top = reader.read()
    conflict = reader.variable_conflict or variable_conflict or "error"
    return Body(language, reader.sites, top, conflict)


class _Reader:
    def __init__(self, body: str, tokens: list[Token]) -> None:
        self.body = body
        self.tokens = tokens
        self.i = 0
        self.sites: list[Site] = []

    # Tokens.

    def at_end(self) -> bool:
        return self.i >= len(self.tokens)

    def word(self, k: int = 0) -> str | None:
        j = self.i + k
        return word(self.tokens[j]) if j < len(self.tokens) else None

    def kind(self, j: int) -> TokenType | None:
        return self.tokens[j].token_type if j < len(self.tokens) else None

    def line(self, j: int | None = None) -> int:
        if not self.tokens:
            return 1
        j = self.i if j is None else j
        offset = self.tokens[min(j, len(self.tokens) - 1)].start
        return self.body.count("\n", 0, offset) + 1

    def fail(self, what: str, j: int | None = None) -> BodyError:
        line = self.line(j)
        return BodyError(f"{what} (line {line} of the body)", line)

    def expect(self, *words: str) -> None:
        for w in words:
            if self.word() != w:
                found = repr(self.tokens[self.i].text) if not self.at_end() else "the end"
                raise self.fail(f"expected {w}, found {found}")
            self.i += 1

    def skip_semicolon(self) -> None:
        if self.kind(self.i) == TokenType.SEMICOLON:
            self.i += 1

    def text(self, a: int, b: int) -> str:
        """Body text of tokens a..b-1, comments between them kept (PL/pgSQL keeps them)."""
        if a >= b:
            return ""
        return self.body[self.tokens[a].start : self.tokens[b - 1].end + 1]

    def until(self, stops: frozenset[str]) -> int:
        """Index of the first stop word from here at depth 0 (parentheses, brackets and the
        CASE ... END of an expression nest); raises at a ';' or the end of the body."""
        depth = 0
        cases = 0
        for j in range(self.i, len(self.tokens)):
            token = self.tokens[j]
            w = word(token)
            if token.token_type in _OPEN:
                depth += 1
            elif token.token_type in _CLOSE:
                depth -= 1
            elif w == "CASE":
                cases += 1
            elif w == "END" and cases:
                cases -= 1
            elif depth == 0 and not cases and w in stops:
                return j
            elif token.token_type == TokenType.SEMICOLON:
                break
        raise self.fail(f"no {' or '.join(sorted(stops))} after this")

    def next_semicolon(self) -> int:
        for j in range(self.i, len(self.tokens)):
            if self.tokens[j].token_type == TokenType.SEMICOLON:
                return j
        return len(self.tokens)

    def operator_at_depth0(self, a: int, b: int) -> int:
        """The first ``:=`` or ``=`` at depth 0 in tokens a..b-1, else b."""
        depth = 0
        for j in range(a, b):
            kind = self.tokens[j].token_type
            if kind in _OPEN:
                depth += 1
            elif kind in _CLOSE:
                depth -= 1
            elif depth == 0 and kind in _ASSIGN:
                return j
        return b

    # Sites.

    def add_site(
        self,
        context: str,
        a: int,
        b: int,
        scope: Scope,
        *,
        as_run: str | None = None,
        planned: str | None = None,
        expression: bool = False,
        dynamic: bool = False,
        fills: tuple[Variable, ...] = (),
    ) -> Site | None:
        """A site over tokens a..b-1; ``as_run`` defaults to their text, ``planned`` to
        ``as_run`` (``SELECT <text>`` for an ``expression``)."""
        if a >= b:
            return None
        part = self.tokens[a:b]
        text = self.text(a, b)
        run = as_run if as_run is not None else text
        if planned is None:
            planned = f"SELECT {text}" if expression else run
        site = Site(
            context=context,
            line=self.line(a),
            offset=self.tokens[a].start,
            as_run=run,
            planned=planned,
            scope=scope,
            locks=mentions_lock(part) if dynamic else has_lock(part),
            dynamic=dynamic,
            fills=fills,
        )
        self.sites.append(site)
        for variable in fills:
            variable.filled_by.append((site.offset, site))
        return site


class _SqlReader(_Reader):
    """An SQL function: statements separated by ';' (also a ``BEGIN ATOMIC ... END`` body as
    pg_get_function_sqlbody prints it)."""

    def __init__(self, body: str, tokens: list[Token], scope: Scope) -> None:
        super().__init__(body, tokens)
        self.scope = scope

    def read(self) -> None:
        atomic = self.word() == "BEGIN" and self.word(1) == "ATOMIC"
        if atomic:
            self.i += 2
        while not self.at_end():
            if self.kind(self.i) == TokenType.SEMICOLON:
                self.i += 1
                continue
            end = self.next_semicolon()
            rest = self.tokens[self.i + 1 :]
            if atomic and self.word() == "END" and all(_is_semicolon(t) for t in rest):
                break  # the END of BEGIN ATOMIC
            if self.word() == "RETURN":  # RETURN expression: an SQL-standard body
                self.add_site("RETURN", self.i + 1, end, self.scope, expression=True)
            else:
                self.add_site("SQL statement", self.i, end, self.scope)
            self.i = end + 1


class _PlpgsqlReader(_Reader):
    def __init__(self, body: str, tokens: list[Token], scope: Scope) -> None:
        super().__init__(body, tokens)
        self.outer = scope
        self.variable_conflict: str | None = None

    def read(self) -> Scope:
        self.options()
        label = self.label()
        if self.word() not in ("DECLARE", "BEGIN"):
            raise self.fail("a PL/pgSQL body starts with DECLARE or BEGIN")
        top = self.block(self.outer, label)
        while self.kind(self.i) == TokenType.SEMICOLON:
            self.i += 1
        if not self.at_end():
            raise self.fail("text after the END of the function's block")
        return top

    def options(self) -> None:
        """``#variable_conflict use_column`` / ``#print_strict_params on`` lines."""
        while self.kind(self.i) == TokenType.HASH:
            option = self.tokens[self.i + 1 : self.i + 3]
            names = [name_of(t) for t in option]
            if names[:1] == ["variable_conflict"] and names[1:] in (
                ["error"],
                ["use_variable"],
                ["use_column"],
            ):
                self.variable_conflict = names[1]
            self.i += 1 + len(option)

    def label(self) -> str | None:
        """``<<name>>`` (the tokenizer reads << and >> as two < and two >)."""
        toks = self.tokens[self.i : self.i + 5]
        kinds = [t.token_type for t in toks]
        if kinds[:2] == [TokenType.LT, TokenType.LT] and kinds[3:5] == [TokenType.GT] * 2:
            self.i += 5
            return name_of(toks[2])
        return None

    # Blocks and declarations.

    def block(self, parent: Scope, label: str | None) -> Scope:
        scope = Scope(label, {}, parent)
        while self.word() == "DECLARE":
            self.i += 1
            self.declarations(scope)
        self.expect("BEGIN")
        self.statements(scope, frozenset({"END", "EXCEPTION"}))
        if self.word() == "EXCEPTION":
            self.i += 1
            names = {n: Variable(n, "special", t) for n, t in _HANDLER_SPECIAL}
            handler = Scope(None, names, scope)
            while self.word() == "WHEN":
                self.i = self.until(frozenset({"THEN"})) + 1
                self.statements(handler, frozenset({"WHEN", "END"}))
        self.expect("END")
        if not self.at_end() and self.kind(self.i) != TokenType.SEMICOLON:
            self.i += 1  # END label
        self.skip_semicolon()
        return scope

    def declarations(self, scope: Scope) -> None:
        while not self.at_end() and self.word() not in ("BEGIN", "DECLARE"):
            if self.label() is not None:  # a label in the DECLARE section is allowed, unused
                continue
            name = name_of(self.tokens[self.i])
            if name is None:
                raise self.fail(f"expected a variable name, found {self.tokens[self.i].text!r}")
            self.i += 1
            end = self.next_semicolon()
            if self.word() == "ALIAS":
                self.expect("ALIAS", "FOR")
                target = self.text(self.i, end).strip()
                target = target if target.startswith("$") else target.lower()
                scope.names[name] = Variable(name, "alias", "", alias_of=target)
            elif self.word() == "CONSTANT" or not self.cursor_declaration(scope, name, end):
                if self.word() == "CONSTANT":
                    self.i += 1
                self.variable_declaration(scope, name, end)
            self.i = end + 1

    def variable_declaration(self, scope: Scope, name: str, end: int) -> None:
        """``name type [COLLATE c] [NOT NULL] [{DEFAULT | := | =} expression]``"""
        type_end = self.operator_at_depth0(self.i, end)
        default = type_end + 1 if type_end < end else None
        for j in range(self.i, type_end):
            w = word(self.tokens[j])
            if w == "DEFAULT":
                type_end, default = j, j + 1
                break
            if w in ("COLLATE", "NOT"):
                type_end = j
                break
        declared = self.text(self.i, type_end)
        if not declared:
            raise self.fail(f"no type for variable {name}")
        if default is not None:
            # Evaluated when the block starts, with the names declared before it.
            self.add_site("DECLARE default", default, end, scope, expression=True)
        scope.names[name] = Variable(name, "variable", declared)

    def cursor_declaration(self, scope: Scope, name: str, end: int) -> bool:
        """``name [[NO] SCROLL] CURSOR [(arguments)] FOR|IS query``"""
        k = self.i
        if word(self.tokens[k]) == "NO":
            k += 1
        if k < end and word(self.tokens[k]) == "SCROLL":
            k += 1
        if k >= end or word(self.tokens[k]) != "CURSOR":
            return False
        self.i = k + 1
        cursor = Variable(name, "cursor", "refcursor")
        scope.names[name] = cursor
        query_scope = scope
        if self.kind(self.i) == TokenType.L_PAREN:
            # The cursor's arguments are variables of its query: (name type, ...).
            close = self.until(frozenset({"FOR", "IS"})) - 1
            query_scope = Scope(None, self.cursor_arguments(self.i + 1, close), scope)
            self.i = close + 1
        if self.word() not in ("FOR", "IS"):
            raise self.fail(f"expected FOR or IS in the declaration of cursor {name}")
        cursor.cursor_query = self.add_site("cursor", self.i + 1, end, query_scope)
        return True

    def cursor_arguments(self, a: int, b: int) -> dict[str, Variable]:
        """``name type, name type`` of a cursor declaration (tokens a..b-1)."""
        found: dict[str, Variable] = {}
        start = a
        depth = 0
        for j in range(a, b + 1):
            kind = self.tokens[j].token_type if j < b else TokenType.COMMA
            if kind in _OPEN:
                depth += 1
            elif kind in _CLOSE:
                depth -= 1
            elif kind == TokenType.COMMA and depth == 0:
                name = name_of(self.tokens[start]) if start < j else None
                declared = self.text(start + 1, j)
                if name is None or not declared:
                    raise self.fail("cannot read the cursor's arguments", start)
                found[name] = Variable(name, "variable", declared)
                start = j + 1
        return found

    # Statements.

    def statements(self, scope: Scope, stops: frozenset[str]) -> None:
        while True:
            if self.at_end():
                raise self.fail("the body ends inside a block (no END)", len(self.tokens) - 1)
            if self.word() in stops:
                return
            self.statement(scope)

    def statement(self, scope: Scope) -> None:
        if self.kind(self.i) == TokenType.SEMICOLON:
            self.i += 1
            return
        label = self.label()
        w = self.word()
        if w in ("DECLARE", "BEGIN"):
            self.block(scope, label)
        elif w == "IF":
            self.if_statement(scope)
        elif w == "CASE":
            self.case_statement(scope)
        elif w == "LOOP":
            self.loop_body(scope, label)
        elif w == "WHILE":
            self.i += 1
            loop = self.until(frozenset({"LOOP"}))
            self.add_site("WHILE condition", self.i, loop, scope, expression=True)
            self.i = loop
            self.loop_body(scope, label)
        elif w == "FOR":
            self.for_loop(scope, label)
        elif w == "FOREACH":
            self.foreach_loop(scope, label)
        elif w == "RETURN":
            self.return_statement(scope)
        elif w == "PERFORM":
            end = self.next_semicolon()
            # PL/pgSQL runs "PERFORM rest" as "SELECT rest".
            run = f"SELECT {self.text(self.i + 1, end)}"
            self.add_site("PERFORM", self.i, end, scope, as_run=run)
            self.i = end + 1
        elif w == "EXECUTE":
            end = self.next_semicolon()
            self.add_site("EXECUTE", self.i, end, scope, dynamic=True)
            self.i = end + 1
        elif w == "OPEN":
            self.open_statement(scope)
        elif w in _SQL_STARTS or self.kind(self.i) == TokenType.L_PAREN:
            self.sql_statement(scope)
        elif w in _OTHER_STATEMENTS:
            end = self.next_semicolon()
            self.add_site(f"{w} statement", self.i, end, scope, planned="")
            self.i = end + 1
        else:
            self.assignment_or_command(scope)

    def if_statement(self, scope: Scope) -> None:
        self.i += 1
        while True:
            then = self.until(frozenset({"THEN"}))
            self.add_site("IF condition", self.i, then, scope, expression=True)
            self.i = then + 1
            self.statements(scope, frozenset({"ELSIF", "ELSEIF", "ELSE", "END"}))
            if self.word() in ("ELSIF", "ELSEIF"):
                self.i += 1
                continue
            if self.word() == "ELSE":
                self.i += 1
                self.statements(scope, frozenset({"END"}))
            self.expect("END", "IF")
            self.skip_semicolon()
            return

    def case_statement(self, scope: Scope) -> None:
        self.i += 1
        when = self.until(frozenset({"WHEN"}))
        self.add_site("CASE expression", self.i, when, scope, expression=True)
        self.i = when
        while self.word() == "WHEN":
            self.i += 1
            then = self.until(frozenset({"THEN"}))
            self.add_site("CASE WHEN", self.i, then, scope, expression=True)
            self.i = then + 1
            self.statements(scope, frozenset({"WHEN", "ELSE", "END"}))
        if self.word() == "ELSE":
            self.i += 1
            self.statements(scope, frozenset({"END"}))
        self.expect("END", "CASE")
        self.skip_semicolon()

    def loop_body(self, scope: Scope, label: str | None, names: Sequence[Variable] = ()) -> None:
        inner = Scope(label, {v.name: v for v in names}, scope)
        self.expect("LOOP")
        self.statements(inner, frozenset({"END"}))
        self.expect("END", "LOOP")
        if not self.at_end() and self.kind(self.i) != TokenType.SEMICOLON:
            self.i += 1  # END LOOP label
        self.skip_semicolon()

    def for_loop(self, scope: Scope, label: str | None) -> None:
        self.i += 1
        in_at = self.until(frozenset({"IN"}))
        names = [n for t in self.tokens[self.i : in_at] if (n := name_of(t)) is not None]
        self.i = in_at + 1
        if self.word() == "REVERSE":
            self.i += 1
        loop = self.until(frozenset({"LOOP"}))
        first = name_of(self.tokens[self.i]) if self.i < loop else None
        cursor = scope.lookup(first) if first else None
        if self.word() == "EXECUTE":
            self.add_site("FOR ... IN EXECUTE", self.i, loop, scope, dynamic=True)
            self.i = loop
            self.loop_body(scope, label)
        elif cursor is not None and cursor.kind == "cursor" and len(names) == 1:
            # FOR r IN cursor LOOP declares r, shaped by the cursor's query.
            record = Variable(names[0], "loop", "record")
            if cursor.cursor_query is not None:
                record.filled_by.append((cursor.cursor_query.offset, cursor.cursor_query))
            self.i = loop
            self.loop_body(scope, label, [record])
        elif self.integer_range(self.i, loop):
            # FOR i IN 1..n LOOP declares i as an integer of the loop.
            declared = [Variable(names[0], "loop", "integer")] if len(names) == 1 else []
            self.add_site("FOR range", self.i, loop, scope, planned="")
            self.i = loop
            self.loop_body(scope, label, declared)
        else:
            target = scope.lookup(names[0]) if len(names) == 1 else None
            fills = (target,) if target is not None and _is_record(target) else ()
            self.add_site("FOR loop", self.i, loop, scope, fills=fills)
            self.i = loop
            self.loop_body(scope, label)

    def foreach_loop(self, scope: Scope, label: str | None) -> None:
        self.i += 1
        array = self.until(frozenset({"ARRAY"}))
        self.i = array + 1
        loop = self.until(frozenset({"LOOP"}))
        self.add_site("FOREACH array", self.i, loop, scope, expression=True)
        self.i = loop
        self.loop_body(scope, label)

    def integer_range(self, a: int, b: int) -> bool:
        """``1..10``, ``a .. b`` at depth 0 (the tokenizer reads ``1..`` as '1.' then '.')."""
        depth = 0
        for j in range(a, b):
            token = self.tokens[j]
            if token.token_type in _OPEN:
                depth += 1
            elif token.token_type in _CLOSE:
                depth -= 1
            elif depth == 0 and token.token_type == TokenType.DOT and j > a:
                before = self.tokens[j - 1]
                if self.kind(j + 1) == TokenType.DOT or (
                    before.token_type == TokenType.NUMBER and before.text.endswith(".")
                ):
                    return True
        return False

    def return_statement(self, scope: Scope) -> None:
        end = self.next_semicolon()
        if self.word(1) == "QUERY":
            if self.word(2) == "EXECUTE":
                self.add_site("RETURN QUERY EXECUTE", self.i + 2, end, scope, dynamic=True)
            else:
                self.add_site("RETURN QUERY", self.i + 2, end, scope)
        else:
            start = self.i + (2 if self.word(1) == "NEXT" else 1)
            self.add_site("RETURN", start, end, scope, expression=True)
        self.i = end + 1

    def open_statement(self, scope: Scope) -> None:
        end = self.next_semicolon()
        j = self.i + 2  # OPEN name
        while j < end and word(self.tokens[j]) in ("NO", "SCROLL"):
            j += 1
        if j < end and word(self.tokens[j]) == "FOR":
            if j + 1 < end and word(self.tokens[j + 1]) == "EXECUTE":
                self.add_site("OPEN ... FOR EXECUTE", j + 1, end, scope, dynamic=True)
            else:
                self.add_site("OPEN ... FOR", j + 1, end, scope)
        self.i = end + 1

    def sql_statement(self, scope: Scope) -> None:
        """An SQL statement, with PL/pgSQL's ``INTO [STRICT] target`` taken out."""
        start = self.i
        end = self.next_semicolon()
        into = self.into_target(start, end)
        fills: tuple[Variable, ...] = ()
        text = None
        if into is not None:
            a, b, targets = into
            text = " ".join(t for t in (self.text(start, a), self.text(b, end)) if t)
            target = scope.lookup(targets[0]) if len(targets) == 1 else None
            if target is not None and _is_record(target):
                fills = (target,)
        self.add_site("SQL statement", start, end, scope, as_run=text, fills=fills)
        self.i = end + 1

    def into_target(self, a: int, b: int) -> tuple[int, int, list[str]] | None:
        """Token range of ``INTO [STRICT] target[, target...]`` and the target names.

        As PL/pgSQL reads it: the first INTO that does not follow INSERT or MERGE (at any
        depth), then a list of names, each possibly qualified (``r.field``, ``label.var``).
        """
        if word(self.tokens[a]) == "IMPORT":
            return None
        for j in range(a, b):
            if word(self.tokens[j]) != "INTO" or (
                j > a and word(self.tokens[j - 1]) in ("INSERT", "MERGE")
            ):
                continue
            k = j + 1
            if k < b and word(self.tokens[k]) == "STRICT":
                k += 1
            names: list[str] = []
            while k < b:
                parts: list[str] = []
                while k < b and (part := name_of(self.tokens[k])) is not None:
                    parts.append(part)
                    k += 1
                    if self.kind(k) != TokenType.DOT or k >= b:
                        break
                    k += 1
                if not parts:
                    break
                names.append(".".join(parts))
                if k < b and self.tokens[k].token_type == TokenType.COMMA:
                    k += 1
                    continue
                break
            return j, k, names
        return None

    def assignment_or_command(self, scope: Scope) -> None:
        end = self.next_semicolon()
        op = self.operator_at_depth0(self.i, end)
        if op < end and _assignment_target(self.tokens[self.i : op]):
            rhs = self.text(op + 1, end)
            self.add_site("assignment", self.i, end, scope, planned=f"SELECT {rhs}")
        else:
            # Another SQL command (LOCK, CREATE, SET...), run as written.
            self.add_site("SQL statement", self.i, end, scope)
        self.i = end + 1


def _is_semicolon(token: Token) -> bool:
    return bool(token.token_type == TokenType.SEMICOLON)


def _assignment_target(tokens: Sequence[Token]) -> bool:
    """``name``, ``r.field``, ``label.name``, ``arr[1]``: a PL/pgSQL assignment target."""
    if not tokens or name_of(tokens[0]) is None:
        return False
    depth = 0
    previous_name = True
    for token in tokens[1:]:
        if token.token_type == TokenType.L_BRACKET:
            depth += 1
        elif token.token_type == TokenType.R_BRACKET:
            depth -= 1
        elif depth:
            continue
        elif token.token_type == TokenType.DOT and previous_name:
            previous_name = False
            continue
        elif name_of(token) is not None and not previous_name:
            previous_name = True
            continue
        else:
            return False
    return previous_name and depth == 0


def _is_record(variable: Variable) -> bool:
    return variable.declared.strip().lower() == "record"
