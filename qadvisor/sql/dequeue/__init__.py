"""Dequeue statements (``... FOR UPDATE SKIP LOCKED``): the one place where qadvisor parses
and prints SQL text.

Job-queue dequeue statements come from pg_stat_statements or from the user's SQL files. This
package turns one of them into frozen, JSON-serialisable dataclasses so that pure checks can
judge its shape (lock strength, SKIP LOCKED, which table the lock takes, the predicate on
the queue table, the round-robin LATERAL form) without a database; it refuses anything that
must not be planned, and prints the rewritten statements that fixes propose. By job:

- ``screening``: split text into statements, refuse what must not be planned, parse the rest;
- ``analysis``: :func:`analyse`, into the dataclasses of :mod:`qadvisor.statement` (which
  the snapshot holds, so they import no parser), from its sections: ``locks`` (the row lock
  and the table it claims), ``predicates`` (the filters about the queue table), ``order``
  (ORDER BY, LIMIT, windows, LATERAL);
- ``identity``: :func:`fingerprint`, the statement's shape whatever its constants;
- ``conditions``: the conjuncts, columns, literal and array values of SQL conditions the
  catalog and EXPLAIN give;
- ``rewriting``: the text made fit to plan, the planner's index probe, the rewrites.

(``levels`` holds what the analysis and the rewriting both read of a tree: FROM items, what a
lock reaches.) Other modules import the names below from ``qadvisor.sql.dequeue``.

Nothing here talks to PostgreSQL or does I/O. Parsing is sqlglot's, dialect ``postgres``.
Names are folded as :mod:`qadvisor.sql.scope` folds them: unquoted identifiers in lower case
as PostgreSQL does, quoted ones keep their spelling, so names compare equal to catalog names.
"""

from qadvisor.sql.dequeue.analysis import analyse, analyse_write, queue_columns_read, tables_named
from qadvisor.sql.dequeue.conditions import (
    array_values,
    condition_columns,
    condition_predicates,
    disjuncts,
    literal_value,
    nullness_arms,
)
from qadvisor.sql.dequeue.identity import fingerprint
from qadvisor.sql.dequeue.order import window_partitions
from qadvisor.sql.dequeue.rewriting import (
    KeyNotReturned,
    index_probe,
    locking_level,
    normalise_for_planning,
    read_only_scan,
    typed_placeholders,
    value_placeholder,
    with_literals,
    with_lock_outside,
    with_order_by,
    with_placeholders,
    with_set_kept,
    with_skip_locked,
    without_locks,
)
from qadvisor.sql.dequeue.screening import (
    StatementError,
    check_plannable,
    is_placeholder,
    parse,
    split_statements,
    statement_lines,
    statement_ranges,
    tokenize,
)
from qadvisor.statement import (
    DequeueStatement,
    JoinKey,
    Lateral,
    LockClause,
    LockLevel,
    LockStrength,
    OrderItem,
    Param,
    ParamKind,
    Predicate,
    PredicateOp,
    StatementKind,
    WaitPolicy,
)

__all__ = [
    "DequeueStatement",
    "JoinKey",
    "KeyNotReturned",
    "Lateral",
    "LockClause",
    "LockLevel",
    "LockStrength",
    "OrderItem",
    "Param",
    "ParamKind",
    "Predicate",
    "PredicateOp",
    "StatementError",
    "StatementKind",
    "WaitPolicy",
    "analyse",
    "analyse_write",
    "array_values",
    "check_plannable",
    "condition_columns",
    "condition_predicates",
    "disjuncts",
    "fingerprint",
    "index_probe",
    "is_placeholder",
    "literal_value",
    "locking_level",
    "normalise_for_planning",
    "nullness_arms",
    "parse",
    "queue_columns_read",
    "read_only_scan",
    "split_statements",
    "statement_lines",
    "statement_ranges",
    "tables_named",
    "tokenize",
    "typed_placeholders",
    "value_placeholder",
    "window_partitions",
    "with_literals",
    "with_lock_outside",
    "with_order_by",
    "with_placeholders",
    "with_set_kept",
    "with_skip_locked",
    "without_locks",
]
