"""Row-locking statements inside PL/pgSQL and SQL functions, made plannable.

Some queue libraries claim jobs inside a database function (procrastinate's
``procrastinate_fetch_job_v2``): with pg_stat_statements' default ``track = top`` only the call
is visible, and with ``track = all`` the nested statement is recorded with the function's
variables in it (``... queue_name = any(target_queue_names) ...``), which cannot be planned
as it is. This module turns a function (its body and parameter list, read from ``pg_proc``)
into its row-locking statements as plain SQL that qadvisor can parse and plan:

- every statement of the body that takes a row lock (``FOR UPDATE`` / ``FOR NO KEY UPDATE`` /
  ``FOR SHARE`` / ``FOR KEY SHARE``, with or without ``SKIP LOCKED``, at any query level), in
  an SQL statement, ``PERFORM``, ``RETURN QUERY``, a ``FOR ... IN <query> LOOP``, a cursor, an
  assignment or a condition, with the PL/pgSQL parts taken out (``INTO [STRICT] target``,
  ``RETURN QUERY``, the loop header);
- every reference to a parameter (by name, ``fn.name`` or ``$n``), a declared variable (its
  type as declared, ``%TYPE`` and ``%ROWTYPE`` resolved through the catalog) or a record
  field (``r.id``, typed when the record's shape is known) replaced by a numbered
  placeholder ``$k`` whose type is recorded for ``PREPARE``. A name that is a column of the
  statement's tables stays a column: PL/pgSQL's default ``variable_conflict = error``
  refuses a statement where a name is both, which is reported as a reason not to plan it;
  ``use_column`` (and every SQL-language function) keeps the column, ``use_variable`` the
  variable; ``t.col`` of a table in the statement is a column.

What cannot be made plannable is still returned, with ``skip`` saying why (``dynamic SQL
(EXECUTE), not analysed``, a record whose fields are not known, an unknown ``%TYPE``...).

Interface (the collector is ``qadvisor.collect.functions``)::

    FunctionClaim(function: str, signature: str, line: int, text: str,
                  param_types: tuple[str, ...], params: tuple[str, ...], context: str,
                  as_run: str, language: str, search_path: tuple[str, ...] | None,
                  skip: str | None)

``text`` is the statement to plan (variables as ``$1..$k`` in order of first appearance),
``param_types[k-1]`` the type of ``$k`` and ``params[k-1]`` what it stands for
(``target_queue_names``, ``$2``, ``r.id``). ``line`` is the line of the body (``prosrc``)
where the statement starts, as PL/pgSQL counts lines in its error messages (for a
``BEGIN ATOMIC`` body: of the text pg_get_function_sqlbody() prints). Table names are left
as the body writes them: plan the text under ``search_path`` when the function sets one,
else under the application's search_path, as PostgreSQL resolves them when it runs.
``as_run`` is the text PL/pgSQL runs, which is what pg_stat_statements records for it with
``track = all`` (``toplevel = false``), constants aside; ``recorded_statements.match_nested``
finds the claim such a recorded text came from (plan that claim's ``text`` with its
``param_types``: its constants are the body's literals, not ``$n``).

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sqlglot import TokenType, exp
from sqlglot.dialects.postgres import Postgres

from qadvisor.sql import dequeue
from qadvisor.sql.catalog import Catalog, NamedType, Relation, split_path
from qadvisor.sql.plpgsql import (
    Body,
    BodyError,
    Scope,
    Site,
    Variable,
    is_placeholder,
    name_of,
    read_body,
    word,
)
from qadvisor.sql.printing import qualified
from qadvisor.sql.scope import (
    cte_columns,
    cte_named,
    ident,
    level_sources,
    main_statement,
    names_an_output_column,
    set_targets,
    source_key,
    span,
    table_name,
    visible_levels,
)

DYNAMIC_SQL = "dynamic SQL (EXECUTE), not analysed"


# --- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Argument:
    """One entry of a function's parameter list (pg_proc.proargnames/proallargtypes/
    proargmodes)."""

    name: str | None
    type: str  # format_type() of the argument's type
    mode: str = "i"  # i: IN, o: OUT, b: INOUT, v: VARIADIC, t: a column of RETURNS TABLE

    @property
    def is_input(self) -> bool:
        return self.mode in ("i", "b", "v")


@dataclass(frozen=True)
class FunctionSource:
    """A function as pg_proc describes it; ``body`` is prosrc (or, for an SQL-standard
    ``BEGIN ATOMIC`` body, pg_get_function_sqlbody())."""

    schema: str
    name: str
    language: str  # "plpgsql" | "sql"
    arguments: tuple[Argument, ...]
    return_type: str
    body: str
    config: tuple[str, ...] = ()  # proconfig: "search_path=app, public", ...

    @property
    def qualified(self) -> str:
        return qualified(self.schema, self.name)

    @property
    def signature(self) -> str:
        types = ", ".join(a.type for a in self.arguments if a.is_input)
        return f"{self.qualified}({types})"

    def setting(self, name: str) -> str | None:
        for item in self.config:
            key, sep, value = item.partition("=")
            if sep and key.strip().lower() == name:
                return value.strip()
        return None

    @property
    def search_path(self) -> tuple[str, ...] | None:
        """The function's own ``SET search_path`` (proconfig), without ``$user``."""
        value = self.setting("search_path")
        if value is None:
            return None
        return tuple(s for s in split_path(value) if s and s not in ("$user", "pg_temp"))


_Named = TypeVar("_Named", Relation, NamedType)


def _resolve(known: Iterable[_Named], path: Sequence[str], fn: FunctionSource) -> _Named | None:
    """The one of ``known`` that a name in ``fn``'s body (``jobs``, ``app.jobs``) means: as
    the function's own search_path resolves it (see ``FunctionSource.search_path``), and
    without one public first, then the function's own schema, then any other."""
    if not 1 <= len(path) <= 2:
        return None
    found = [k for k in known if k.name == path[-1]]
    if len(path) == 2:
        return next((f for f in found if f.schema == path[0]), None)
    search_path = fn.search_path
    order = list(search_path) if search_path is not None else ["public", fn.schema]
    for s in order:
        hit = next((f for f in found if f.schema == s), None)
        if hit is not None:
            return hit
    if search_path is not None:
        return None  # PostgreSQL looks nowhere else
    return min(found, key=lambda f: f.schema, default=None)


@dataclass(frozen=True)
class FunctionClaim:
    """One row-locking statement of a function body (see the module docstring)."""

    function: str  # "public.procrastinate_fetch_job_v2"
    signature: str  # "public.procrastinate_fetch_job_v2(character varying[], bigint)"
    line: int  # where the statement starts in the body (1-based)
    text: str  # the statement to plan, variables as $1..$k ("" if the body was unreadable)
    param_types: tuple[str, ...] = ()  # type of $k at index k-1, for PREPARE
    params: tuple[str, ...] = ()  # what $k stands for: "target_queue_names", "$2", "r.id"
    context: str = "SQL statement"  # "RETURN QUERY", "FOR loop", "PERFORM", "assignment"...
    as_run: str = ""  # the text PL/pgSQL runs (pg_stat_statements' nested text)
    language: str = "plpgsql"
    # The function's own SET search_path: its names resolve under it. None: under the
    # search_path of the session that calls it (the application's).
    search_path: tuple[str, ...] | None = None
    skip: str | None = None  # why it cannot be planned; then ``text`` is as written


# --- names the collector must look up -----------------------------------------------------


@dataclass
class FunctionReading:
    """A function read once: its body's structure and the SQL trees of its sites."""

    fn: FunctionSource
    body: Body | None
    error: BodyError | None
    trees: dict[str, exp.Expr | str] = field(default_factory=dict)

    def tree(self, text: str) -> exp.Expr:
        """sqlglot's tree of one site's SQL; _Refused when sqlglot cannot parse it."""
        if text not in self.trees:
            try:
                self.trees[text] = dequeue.parse(text, plannable=False)
            except dequeue.StatementError as exc:
                self.trees[text] = str(exc)
        found = self.trees[text]
        if isinstance(found, str):
            raise _Refused(found)
        return found


def read(fn: FunctionSource) -> FunctionReading:
    """Read a function's body; a body that cannot be read is kept with its error."""
    parameters = _parameters(fn)
    try:
        body = read_body(
            fn.body,
            fn.language,
            parameters,
            fn.name,
            variable_conflict=fn.setting("plpgsql.variable_conflict"),
            trigger=fn.return_type == "trigger",
        )
    except BodyError as exc:
        return FunctionReading(fn, None, exc)
    except Exception as exc:  # see _unexpected
        return FunctionReading(fn, None, BodyError(_unexpected(exc)))
    return FunctionReading(fn, body, None)


def _unexpected(exc: Exception) -> str:
    # A body is the user's text: whatever in it trips the reader (or sqlglot, which raises
    # more than ParseError on text it half understands) costs that statement, not the other
    # claims or the report; the reason says it was qadvisor that could not read it.
    return f"qadvisor could not read it ({type(exc).__name__}: {str(exc)[:200]})"


def _parameters(fn: FunctionSource) -> list[Variable]:
    out = []
    position = 0
    for arg in fn.arguments:
        if arg.is_input:
            position += 1
        elif fn.language == "sql":
            continue  # an SQL function cannot refer to its OUT parameters
        if arg.name:
            out.append(
                Variable(
                    arg.name,
                    "parameter",
                    arg.type,
                    position=position if arg.is_input else None,
                )
            )
    return out


def names_to_look_up(readings: Iterable[FunctionReading]) -> set[str]:
    """Relation and type names (unqualified, as the catalog spells them) that the claims of
    these functions may need: tables of their row-locking statements and of the queries that
    fill their records, ``%ROWTYPE`` / ``%TYPE`` references, declared and parameter types."""
    names: set[str] = set()
    for reading in readings:
        body = reading.body
        if body is None:
            continue
        for site in body.sites:
            if site.dynamic or not site.planned or not (site.locks or site.fills):
                continue
            try:
                tree = reading.tree(site.planned)
            except _Refused:
                continue
            names.update(table_name(t) for t in tree.find_all(exp.Table) if t.name)
        declared = [v.declared for scope in _all_scopes(body) for v in scope.names.values()]
        for text in declared + [a.type for a in reading.fn.arguments]:
            ref = _type_reference(text)
            if ref is None:
                continue
            # jobs.id%TYPE names the table jobs; jobs%ROWTYPE and a plain name name themselves.
            relation = ref.path[-2] if ref.suffix == "%type" and len(ref.path) > 1 else None
            names.add(relation or ref.path[-1])
    return names


def _all_scopes(body: Body) -> Iterator[Scope]:
    seen: set[int] = set()
    for site in body.sites:
        for scope in site.scope.chain():
            if id(scope) not in seen:
                seen.add(id(scope))
                yield scope
    for scope in body.top.chain():
        if id(scope) not in seen:
            seen.add(id(scope))
            yield scope


# --- the claims ---------------------------------------------------------------------------


def extract(reading: FunctionReading, catalog: Catalog) -> list[FunctionClaim]:
    """The row-locking statements of one function, each plannable or with a skip reason."""
    fn = reading.fn
    base = FunctionClaim(
        function=fn.qualified,
        signature=fn.signature,
        line=1,
        text="",
        language=fn.language,
        search_path=fn.search_path,
    )
    if reading.body is None:
        error = reading.error
        line = error.line if error is not None else 1
        return [_replace(base, line=line, skip=f"the body could not be read: {error}")]
    claims = []
    for site in reading.body.sites:
        if not site.locks:
            continue
        try:
            claim = _site_claim(reading, catalog, site, base)
        except Exception as exc:  # see _unexpected
            claim = _replace(base, line=site.line, text=site.as_run, skip=_unexpected(exc))
        if claim is not None:
            claims.append(claim)
    return claims


def _site_claim(
    reading: FunctionReading, catalog: Catalog, site: Site, base: FunctionClaim
) -> FunctionClaim | None:
    """One site's claim: plannable, or with the reason it is not; None if it locks nothing."""
    claim = _replace(
        base,
        line=site.line,
        text=site.planned or site.as_run,
        context=site.context,
        as_run=site.as_run,
    )
    if site.dynamic:
        return _replace(claim, text=site.as_run, skip=DYNAMIC_SQL)
    if not site.planned:
        return _replace(
            claim, text=site.as_run, skip=f"a row lock inside a {site.context}, not analysed"
        )
    try:
        text, types, params = _Placeholders(reading, catalog, site).run()
    except _Refused as exc:
        return _replace(claim, skip=str(exc))
    try:
        parsed = dequeue.analyse(text)
    except dequeue.StatementError as exc:
        return _replace(claim, skip=str(exc))
    if parsed is None:
        return None  # the lock takes no table's rows (FOR UPDATE of a WITH query only)
    return _replace(claim, text=text, param_types=types, params=params)


def _replace(claim: FunctionClaim, **changes: object) -> FunctionClaim:
    return replace(claim, **changes)  # type: ignore[arg-type]


class _Refused(Exception):
    """A statement that cannot be made plannable; the message says why, in one line."""


@dataclass(frozen=True)
class _Ref:
    """What a placeholder stands for."""

    key: tuple[object, ...]
    description: str
    type: str


class _Placeholders:
    """Variable references of one site's SQL replaced by typed placeholders."""

    def __init__(self, reading: FunctionReading, catalog: Catalog, site: Site) -> None:
        assert reading.body is not None
        self.reading = reading
        self.fn = reading.fn
        self.body = reading.body
        self.catalog = catalog
        self.site = site
        self.scope = site.scope
        self.types = _Types(reading, catalog)

    def run(self) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        text = self.site.planned
        tree = self.reading.tree(text)
        edits: list[tuple[int, int, _Ref]] = []  # (start, end inclusive, what)
        targets = {id(c) for c in set_targets(tree)}
        for column in tree.find_all(exp.Column):
            if id(column) in targets:
                continue
            ref = self.column_ref(column)
            if ref is not None:
                where = span(column)
                if where is None:
                    raise _Refused(f"cannot locate {column.sql(dialect='postgres')} in the text")
                edits.append((*where, ref))
        tokens = dequeue.tokenize(text, plpgsql=True)
        for i, token in enumerate(tokens):
            if is_placeholder(tokens, i):
                n = int(tokens[i + 1].text)
                edits.append((token.start, tokens[i + 1].end, self.positional(n)))
        edits.sort(key=lambda e: e[0])
        numbers: dict[tuple[object, ...], int] = {}
        refs: list[_Ref] = []
        for _, _, ref in edits:
            if ref.key not in numbers:
                numbers[ref.key] = len(numbers) + 1
                refs.append(ref)
        for start, end, ref in reversed(edits):
            text = f"{text[:start]}${numbers[ref.key]}{text[end + 1 :]}"
        return text, tuple(r.type for r in refs), tuple(r.description for r in refs)

    # References.

    def positional(self, n: int) -> _Ref:
        inputs = [a for a in self.fn.arguments if a.is_input]
        if not 1 <= n <= len(inputs):
            raise _Refused(f"${n} is not a parameter of {self.fn.signature}")
        arg = inputs[n - 1]
        return _Ref(("parameter", n), arg.name or f"${n}", arg.type)

    def column_ref(self, column: exp.Column) -> _Ref | None:
        parts = [p for p in column.parts if isinstance(p, exp.Identifier | exp.Star)]
        if any(isinstance(p, exp.Star) for p in parts):
            if len(parts) == 2 and isinstance(parts[0], exp.Identifier):
                variable = self.variable(ident(parts[0]))
                if variable is not None and self.sources_named(column, ident(parts[0])) == 0:
                    raise _Refused(f"{ident(parts[0])}.* of a record variable is not planned")
            return None
        names = [ident(p) for p in parts if isinstance(p, exp.Identifier)]
        if len(names) == 1:
            return self.bare(column, names[0])
        if len(names) == 2:
            return self.qualified_ref(column, names[0], names[1])
        if len(names) == 3:
            scope = self.scope.labelled(names[0])
            variable = scope.names.get(names[1]) if scope is not None else None
            if variable is not None:
                return self.field(variable, names[2], f"{names[1]}.{names[2]}")
        return None

    def variable(self, name: str) -> Variable | None:
        variable = self.scope.lookup(name)
        seen = 0
        while variable is not None and variable.kind == "alias" and seen < 10:
            seen += 1
            target = variable.alias_of or ""
            if target.startswith("$") and target[1:].isdigit():
                n = int(target[1:])
                inputs = [a for a in self.fn.arguments if a.is_input]
                if 1 <= n <= len(inputs):
                    arg = inputs[n - 1]
                    return Variable(arg.name or target, "parameter", arg.type, position=n)
                return None
            variable = self.scope.lookup(target)
        return variable

    def bare(self, column: exp.Column, name: str) -> _Ref | None:
        variable = self.variable(name)
        if variable is None or names_an_output_column(column, name):
            return None
        owner = self.column_owner(column, name)
        if owner is not None and not self.prefer_variable(name, owner):
            return None
        return self.whole(variable, name)

    def qualified_ref(self, column: exp.Column, first: str, second: str) -> _Ref | None:
        labelled = self.scope.labelled(first)
        candidate: tuple[Variable, str | None] | None = None
        if labelled is not None and second in labelled.names:
            candidate = (labelled.names[second], None)
        else:
            variable = self.variable(first)
            if variable is not None and variable.kind != "cursor":
                candidate = (variable, second)
        if candidate is None:
            return None
        if self.sources_named(column, first) and not self.prefer_variable(
            f"{first}.{second}", first
        ):
            return None
        variable, field_name = candidate
        if field_name is None:
            return self.whole(variable, f"{first}.{second}")
        return self.field(variable, field_name, f"{first}.{second}")

    def prefer_variable(self, name: str, owner: str) -> bool:
        """A name that is both a variable and a column: decided as PL/pgSQL decides."""
        mode = self.body.variable_conflict
        if mode == "use_variable":
            return True
        if mode == "use_column":
            return False
        raise _Refused(
            f'"{name}" is both a variable of the function and a column of {owner}: PL/pgSQL '
            "refuses such a statement (variable_conflict = error)"
        )

    def whole(self, variable: Variable, written: str) -> _Ref:
        key = _identity(variable)
        # A parameter is named by its name however it is written; a variable as written,
        # so that two variables of one name in nested blocks stay apart (q, blk.q).
        description = variable.name if variable.kind == "parameter" else written
        if variable.kind == "cursor":
            return _Ref(key, description, "refcursor")
        shape = self.types.of(variable, self.scope)
        if shape.record:
            raise _Refused(f"record variable {written} is used as a whole value: not planned")
        if shape.type is None:
            raise _Refused(f"the type of {written} is not known: {shape.why}")
        return _Ref(key, description, shape.type)

    def field(self, variable: Variable, field_name: str, written: str) -> _Ref:
        fields = self.types.fields(variable, self.scope, self.site)
        if isinstance(fields, str):
            raise _Refused(f"{written}: {fields}")
        for name, type_ in fields:
            if name == field_name:
                return _Ref(("field", *_identity(variable), field_name), written, type_)
        raise _Refused(f"{written}: {variable.name} has no field {field_name}")

    # What the statement's tables are called and hold, at the column's level and above.

    def column_owner(self, column: exp.Column, name: str) -> str | None:
        """The FROM item whose columns include ``name``, at a level the column can see."""
        for level in visible_levels(column):
            for source in level_sources(level):
                columns = self.types.source_columns(source, level)
                if columns is not None and any(c == name for c, _ in columns):
                    return source_key(source) or "the statement"
        return None

    def sources_named(self, column: exp.Column, key: str) -> int:
        return sum(
            1
            for level in visible_levels(column)
            for source in level_sources(level)
            if source_key(source) == key
        )


def _identity(variable: Variable) -> tuple[object, ...]:
    """One placeholder per parameter however it is written (name, fn.name, $n, ALIAS)."""
    if variable.position is not None:
        return ("parameter", variable.position)
    return ("variable", id(variable))


# --- types --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    type: str | None  # the SQL type for PREPARE; None when unknown or a record
    record: bool = False
    fields: tuple[tuple[str, str], ...] | None = None  # a row type's fields
    why: str = ""  # why the type is not known


@dataclass(frozen=True)
class _TypeRef:
    """``a.b%TYPE`` / ``a%ROWTYPE`` / a plain (possibly qualified) type name."""

    path: tuple[str, ...]
    suffix: str  # "%type" | "%rowtype" | ""
    array: str  # "[]" repeated, after the reference


class _Types:
    def __init__(self, reading: FunctionReading, catalog: Catalog) -> None:
        self.reading = reading
        self.fn = reading.fn
        self.catalog = catalog

    def of(self, variable: Variable, scope: Scope, depth: int = 0) -> _Shape:
        if depth > 10:
            return _Shape(None, why="%TYPE references go round in a circle")
        # A declaration sees the names of its own block and the blocks around it.
        scope = next((s for s in scope.chain() if s.names.get(variable.name) is variable), scope)
        declared = variable.declared.strip()
        if declared.lower() == "record":
            return _Shape(None, record=True)
        if variable.kind == "parameter":
            # format_type() output: a composite argument has fields.
            relation = self._relation_of_type(declared)
            if relation is not None:
                return _Shape(declared, fields=relation.columns)
            return _Shape(declared)
        ref = _type_reference(declared)
        if ref is None:
            return _Shape(declared)  # a built-in type as written: "character varying(128)"
        if ref.suffix == "%rowtype":
            relation = self._relation(ref.path)
            if relation is None:
                return _Shape(None, why=f"{declared}: no table {'.'.join(ref.path)} found")
            return _Shape(relation.type_sql + ref.array, fields=relation.columns)
        if ref.suffix == "%type":
            return self._type_of(ref, declared, scope, depth)
        relation = self._relation(ref.path)
        if relation is not None:
            return _Shape(relation.type_sql + ref.array, fields=relation.columns)
        named = self._named_type(ref.path)
        if named is not None:
            return _Shape(named.type_sql + ref.array)
        return _Shape(declared)

    def _type_of(self, ref: _TypeRef, declared: str, scope: Scope, depth: int) -> _Shape:
        path = ref.path
        if len(path) == 1:
            other = scope.lookup(path[0])
            if other is None:
                return _Shape(None, why=f"{declared}: no variable {path[0]}")
            shape = self.of(other, scope, depth + 1)
            return _Shape(shape.type + ref.array, fields=shape.fields) if shape.type else shape
        relation = self._relation(path[:-1])
        if relation is None:
            return _Shape(None, why=f"{declared}: no table {'.'.join(path[:-1])} found")
        for name, type_ in relation.columns:
            if name == path[-1]:
                return _Shape(type_ + ref.array)
        return _Shape(None, why=f"{declared}: {relation.name} has no column {path[-1]}")

    def _relation(self, path: Sequence[str]) -> Relation | None:
        return _resolve(self.catalog.relations, path, self.fn)

    def _named_type(self, path: Sequence[str]) -> NamedType | None:
        return _resolve(self.catalog.types, path, self.fn)

    def _relation_of_type(self, type_sql: str) -> Relation | None:
        return next((r for r in self.catalog.relations if r.type_sql == type_sql), None)

    def fields(
        self, variable: Variable, scope: Scope, site: Site
    ) -> tuple[tuple[str, str], ...] | str:
        """The fields of a row or record variable at ``site``, or why they are not known."""
        shape = self.of(variable, scope)
        if shape.fields is not None:
            return shape.fields
        if not shape.record:
            return f"{variable.name} is not a row or record variable ({variable.declared})"
        filled = [s for offset, s in variable.filled_by if offset < site.offset]
        if not filled:
            return (
                f"the fields of record {variable.name} are not known here (no query fills it "
                "before this statement)"
            )
        source = filled[-1]
        try:
            tree = self.reading.tree(source.planned)
        except _Refused as exc:
            return f"the fields of record {variable.name} are not known: {exc}"
        outputs = self.query_outputs(main_statement(tree))
        if outputs is None:
            return (
                f"the fields of record {variable.name} are not known (the query that fills it "
                f"at line {source.line} has outputs qadvisor cannot type)"
            )
        return outputs

    # Columns of FROM items and outputs of queries.

    def source_columns(
        self, source: exp.Expr, level: exp.Expr, depth: int = 0
    ) -> tuple[tuple[str, str], ...] | None:
        """(name, type) of what a FROM item provides; None when not known."""
        if depth > 8:
            return None
        alias = source.args.get("alias")
        alias_columns = (
            tuple(ident(c) for c in alias.columns if isinstance(c, exp.Identifier))
            if isinstance(alias, exp.TableAlias) and alias.columns
            else ()
        )
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
            schema = ident(source.args["db"]) if source.args.get("db") else None
            name = table_name(source)
            if schema is None:
                cte = cte_named(level, name)
                if cte is not None:
                    outputs = self.query_outputs(cte.this, depth + 1)
                    return _renamed(outputs, cte_columns(cte))
            relation = self._relation((schema, name) if schema is not None else (name,))
            return _renamed(relation.columns if relation else None, alias_columns)
        inner = source.this if isinstance(source, exp.Lateral) else source
        if isinstance(inner, exp.Subquery):
            outputs = self.query_outputs(inner.this, depth + 1)
            return _renamed(outputs, alias_columns)
        if alias_columns:
            return tuple((c, "unknown") for c in alias_columns)
        return None

    def query_outputs(
        self, query: exp.Expr | None, depth: int = 0
    ) -> tuple[tuple[str, str], ...] | None:
        """(name, type) of a query's output columns: its select list or RETURNING list."""
        while isinstance(query, exp.Subquery | exp.Paren):
            query = query.this
        if isinstance(query, exp.SetOperation):
            return self.query_outputs(query.this, depth)
        if isinstance(query, exp.Select):
            items = list(query.expressions)
        elif isinstance(query, exp.Update | exp.Delete):
            returning = query.args.get("returning")
            items = list(returning.expressions) if returning else []
        else:
            return None
        sources = level_sources(query)
        out: list[tuple[str, str]] = []
        for item in items:
            target = item.this if isinstance(item, exp.Alias) else item
            alias = ident(item.args["alias"]) if isinstance(item, exp.Alias) else None
            if isinstance(target, exp.Star):
                for source in sources:
                    columns = self.source_columns(source, query, depth + 1)
                    if columns is None:
                        return None
                    out += columns
                continue
            if isinstance(target, exp.Column) and isinstance(target.this, exp.Star):
                key = ident(target.args["table"]) if target.args.get("table") else None
                owner = next((s for s in sources if source_key(s) == key), None)
                columns = self.source_columns(owner, query, depth + 1) if owner else None
                if columns is None:
                    return None
                out += columns
                continue
            type_ = self.expression_type(target, query, sources, depth)
            if alias is not None:
                name = alias
            elif isinstance(target, exp.Column) and isinstance(target.this, exp.Identifier):
                name = ident(target.this)
            else:
                name = "?column?"  # not a name a record field can be reached by
            out.append((name, type_))
        return tuple(out)

    def expression_type(
        self, node: exp.Expr, query: exp.Expr, sources: Sequence[exp.Expr], depth: int
    ) -> str:
        if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
            return node.to.sql(dialect="postgres").lower()
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
            name = ident(node.this)
            key = ident(node.args["table"]) if node.args.get("table") else None
            for source in sources:
                if key is not None and source_key(source) != key:
                    continue
                columns = self.source_columns(source, query, depth + 1)
                for column, type_ in columns or ():
                    if column == name:
                        return type_
        return "unknown"


def _renamed(
    columns: tuple[tuple[str, str], ...] | None, names: Sequence[str]
) -> tuple[tuple[str, str], ...] | None:
    """Columns with the first ones renamed by an alias list (``AS t(a, b)``)."""
    if columns is None or not names:
        return columns
    renamed = [(n, t) for n, (_, t) in zip(names, columns, strict=False)]
    return tuple(renamed + list(columns[len(names) :]))


# The tokenizer gives built-in type names (and their aliases) token types of their own.
_BUILT_IN_TYPES = frozenset(Postgres.parser_class.TYPE_TOKENS)


def _type_reference(declared: str) -> _TypeRef | None:
    """A declared type that names something in the catalog; None for built-in spellings
    (several words, a length: ``character varying(128)``, ``timestamp with time zone``)."""
    try:
        tokens = dequeue.tokenize(declared, plpgsql=True)
    except dequeue.StatementError:
        return None
    array = ""
    while (
        len(tokens) >= 2
        and tokens[-1].token_type == TokenType.R_BRACKET
        and tokens[-2].token_type == TokenType.L_BRACKET
    ):
        array += "[]"
        tokens = tokens[:-2]
    suffix = ""
    if (
        len(tokens) >= 2
        and tokens[-2].token_type == TokenType.MOD
        and word(tokens[-1]) in ("TYPE", "ROWTYPE")
    ):
        suffix = "%" + str(tokens[-1].text).lower()
        tokens = tokens[:-2]
    if not suffix and len(tokens) == 1 and tokens[0].token_type in _BUILT_IN_TYPES:
        return None  # text, bigint, name, uuid...: nothing to look up
    path: list[str] = []
    for k, token in enumerate(tokens):
        if k % 2 == 1:
            if token.token_type != TokenType.DOT:
                return None
            continue
        name = name_of(token)
        if name is None:
            return None
        path.append(name)
    if not path or len(tokens) % 2 == 0:
        return None
    return _TypeRef(tuple(path), suffix, array)


__all__ = [
    "DYNAMIC_SQL",
    "Argument",
    "FunctionClaim",
    "FunctionReading",
    "FunctionSource",
    "extract",
    "names_to_look_up",
    "read",
]
