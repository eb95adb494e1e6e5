"""Names in an SQL statement, read from sqlglot's tree: what a reference can see.

Names as PostgreSQL folds them (unquoted identifiers in lower case, quoted ones as written, so
that they compare equal to catalog names), which query levels a column reference sees (its
own, the levels around a sub-select in an expression or a LATERAL one; not the level a derived
table or WITH query sits in), the FROM items of a level and how its columns refer to them, and
where a reference is in the text. PostgreSQL's own rules, written for the ones the dequeue
analysis and function claims need. Nothing here parses text (``qadvisor.sql.dequeue`` does),
talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

QUERIES = (exp.Select, exp.Update, exp.Delete)


def folded_name(node: object) -> str | None:
    """An identifier (or the identifier inside a TableAlias) as PostgreSQL folds it: quoted as
    written, unquoted in lower case; None for anything else."""
    if isinstance(node, exp.TableAlias):
        node = node.this
    if not isinstance(node, exp.Identifier):
        return None
    text = str(node.this)
    return text if node.quoted else text.lower()


def ident(node: object) -> str:
    """:func:`folded_name` of a node that is a name (an identifier, an alias); "" otherwise."""
    return folded_name(node) or ""


def table_name(table: exp.Table) -> str:
    return folded_name(table.this) or table.name


def source_key(source: exp.Expr) -> str:
    """How the columns of a level refer to a FROM item: its alias, else its table name."""
    alias = folded_name(source.args.get("alias"))
    if alias:
        return alias
    return table_name(source) if isinstance(source, exp.Table) else ""


def main_statement(tree: exp.Expr) -> exp.Expr:
    """The main statement: a parenthesised query unwrapped (WITH is already an argument of
    its body in sqlglot's tree)."""
    while isinstance(tree, exp.Subquery | exp.Paren) and isinstance(tree.this, exp.Expr):
        tree = tree.this
    return tree


def span(column: exp.Column) -> tuple[int, int] | None:
    """Character span (inclusive) of a column reference, qualifiers included; None when
    sqlglot did not record where its names are."""
    idents = [p for p in column.parts if isinstance(p, exp.Identifier)]
    starts = [p.meta.get("start") for p in idents]
    ends = [p.meta.get("end") for p in idents]
    if any(s is None for s in starts) or any(e is None for e in ends):
        return None
    return min(s for s in starts if s is not None), max(e for e in ends if e is not None)


def set_targets(tree: exp.Expr) -> Iterator[exp.Column]:
    """Columns assigned by UPDATE ... SET (and ON CONFLICT DO UPDATE SET): names of the
    target table, never variables."""
    for node in tree.walk():
        if isinstance(node, exp.Update | exp.OnConflict):
            for assignment in node.expressions or []:
                if isinstance(assignment, exp.EQ):
                    yield from assignment.this.find_all(exp.Column)


def names_an_output_column(column: exp.Column, name: str) -> bool:
    """``ORDER BY due`` where the SELECT has an output column ``due``: PostgreSQL resolves
    the name to that column before PL/pgSQL is asked about variables."""
    ordered = column.parent
    order = ordered.parent if isinstance(ordered, exp.Ordered) else None
    select = order.parent if isinstance(order, exp.Order) else None
    if not isinstance(select, exp.Select):
        return False
    for item in select.expressions:
        if isinstance(item, exp.Alias) and ident(item.args["alias"]) == name:
            return True
    return False


def visible_levels(node: exp.Expr) -> Iterator[exp.Expr]:
    """The query levels whose FROM items a reference at ``node`` can see: its own, and the
    levels around it for a sub-select in an expression or a LATERAL one. A derived table or a
    WITH query does not see the level it sits in (levels further out are not followed)."""
    query: exp.Expr | None = node.find_ancestor(*QUERIES)
    while query is not None:
        yield query
        query = _outer_level(query)


def _outer_level(query: exp.Expr) -> exp.Expr | None:
    child: exp.Expr = query
    lateral = False
    in_expression = False
    while (parent := child.parent) is not None:
        if isinstance(child, exp.CTE):
            return None
        if isinstance(child, exp.Lateral):
            lateral = True
        key = child.arg_key
        if key == "on" or key == "where":
            in_expression = True
        if key in ("from_", "joins", "using") and not in_expression and not lateral:
            return None
        if isinstance(parent, QUERIES):
            return parent
        child = parent
    return None


def level_sources(query: exp.Expr) -> list[exp.Expr]:
    """The FROM items of one query level: FROM, JOINs, an UPDATE/DELETE target, USING."""
    roots: list[exp.Expr] = []
    if isinstance(query, exp.Update | exp.Delete) and isinstance(query.this, exp.Expr):
        roots.append(query.this)
    from_ = query.args.get("from_")
    if isinstance(from_, exp.From):
        roots.append(from_.this)
        roots += list(from_.expressions or [])
    roots += [j.this for j in query.args.get("joins") or []]
    roots += list(query.args.get("using") or [])
    out: list[exp.Expr] = []
    for root in roots:
        out.append(root)
        out += [j.this for j in root.args.get("joins") or [] if isinstance(j, exp.Join)]
    return out


def cte_named(level: exp.Expr, name: str) -> exp.CTE | None:
    """The WITH query called ``name`` that ``level`` or a level around it defines."""
    node: exp.Expr | None = level
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if isinstance(cte, exp.CTE) and ident(cte.args["alias"]) == name:
                    return cte
        node = node.parent
    return None


def cte_columns(cte: exp.CTE) -> tuple[str, ...]:
    """The column names a WITH query's alias list gives (``WITH c(a, b) AS ...``)."""
    alias = cte.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return tuple(ident(c) for c in alias.columns if isinstance(c, exp.Identifier))
    return ()
