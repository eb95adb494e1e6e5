"""Which columns of which table an UPDATE sets, read from its text.

A statement recorded by pg_stat_statements (a claim, a heartbeat, an acknowledgement) may hold
several UPDATEs (in WITH queries); each names its target table and the columns its SET
assigns. Whether PostgreSQL can write the new row version as a heap-only tuple depends on
those columns (qadvisor.derive.hot_updates). Nothing here talks to PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from qadvisor.sql.dequeue import StatementError, literal_value, parse
from qadvisor.sql.scope import folded_name, table_name


@dataclass(frozen=True)
class UpdateTarget:
    """One UPDATE of a statement: the table as written and the columns it sets."""

    schema: str | None
    table: str
    columns: tuple[str, ...]
    # (column, value) for each ``SET column = <literal>``: the value a row takes (a claim's
    # ``SET status = 'running'``, which is then no value the claim waits for).
    literals: tuple[tuple[str, str], ...] = ()


def update_targets(text: str) -> tuple[UpdateTarget, ...] | None:
    """Each UPDATE in the statement, in order of appearance; () for a statement that updates
    nothing, None for text that does not parse (what it sets is unknown)."""
    try:
        tree = parse(text, plannable=False)
    except StatementError:
        return None
    found = []
    for node in tree.walk():
        if not isinstance(node, exp.Update) or not isinstance(node.this, exp.Table):
            continue
        columns: list[str] = []
        literals: list[tuple[str, str]] = []
        for assignment in node.expressions or []:
            if not isinstance(assignment, exp.EQ):
                return None  # a SET form not read here: what it sets is unknown
            # SET a = ..., and SET (a, b) = (...): the names on the left.
            for column in assignment.this.find_all(exp.Column):
                name = folded_name(column.this)
                if name is not None and name not in columns:
                    columns.append(name)
            if isinstance(assignment.this, exp.Column):
                name = folded_name(assignment.this.this)
                value = literal_value(assignment.expression.sql(dialect="postgres"))
                if name is not None and value is not None:
                    literals.append((name, value))
        target = node.this
        schema = folded_name(target.args.get("db"))
        found.append(UpdateTarget(schema, table_name(target), tuple(columns), tuple(literals)))
    return tuple(found)
