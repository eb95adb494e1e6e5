"""QA302 predicate-does-not-imply-index."""

from __future__ import annotations

from collections.abc import Iterator

from qadvisor.api import (
    Dequeue,
    Finding,
    Fix,
    Index,
    LivePredicate,
    NoOptions,
    PlanNode,
    Severity,
    Skip,
    Snapshot,
    Target,
    check,
    describe_node,
    judgeable_dequeues,
    plan_outline,
    qualified,
    scans,
    statement_evidence,
    statement_label,
)
from qadvisor.api.provisional import (
    IndexFix,
    IndexKey,
    Predicate,
    covering_index,
    index_keys,
    indexes_used,
    operand_values,
    over_bindings,
    parse_index_predicate,
    predicate_implies,
    predicate_text,
    predicate_words,
    selects_waiting,
    statement_id,
)

# No options: the custom plan itself says whether a partial index is used.
# Its own evidence fields in words (those several checks share: qadvisor.render.labels).
LABELS = {
    "indexes_used": "Indexes used",
    "partial_index_rows": "Rows in the partial index",
    "partial_index_scans": "Scans of the partial index",
    "planner_probe": "Planner probe",
    "statement_predicates": "Statement conditions",
}


@check("QA302", "predicate-does-not-imply-index", severity=Severity.WARNING,
       category="statements", options=NoOptions,
       requires=("table_facts", "index_definitions", "statements", "plans"),
       labels=LABELS)  # fmt: skip
def run(snapshot: Snapshot, options: NoOptions) -> Iterator[Finding | Skip]:
    """The dequeue predicate cannot use the partial index even with a custom plan.

    ## What it finds
    A dequeue statement whose condition on the column of a partial index's predicate cannot
    prove that predicate whatever the values: `status IN ('queued', 'retry')` or
    `status <> 'done'` against an index `WHERE status = 'queued'`. Its custom plan (made with
    literal values) uses no partial index of the queue table, and the planner itself confirms
    that it cannot: asked for the statement's conditions ordered by the index's key, with
    sequential scans, bitmap scans and sorts disabled (in the rolled-back planning
    transaction), it still does not use the index.

    ## Why it matters
    PostgreSQL uses a partial index only when it proves, at planning time, that the query's
    WHERE implies the index predicate; it proves simple forms only (the same comparison, an
    IN list inside the index's list). Otherwise the dequeue reads the table or a full index,
    which grows with the archive, and the small partial index built for the live set sits
    unused.

    ## How to fix
    Build a partial index whose predicate is the query's own (`CREATE INDEX CONCURRENTLY ...
    (<ORDER BY columns>) WHERE status IN ('queued', 'retry')`), or rewrite the query so its
    predicate is the index's (when the other values need no dequeue). The index predicate
    must be spelled as the query spells it.
    The CREATE INDEX step names the recorded statements whose WHERE and ORDER BY the new
    index matches, derived from their text (not a plan: the index does not exist yet), or
    says that none does; an index that an existing valid one already covers (the same
    leading keys, a predicate the new one implies) is not proposed.

    ## When it stays quiet
    The partial index selects finished or running rows (a pruner's `WHERE state =
    'completed'`, a lock index), or waiting rows the statement does not want (a stager's
    index of scheduled jobs against a claim of available ones): the claim is not meant to use
    it. The custom plan uses a
    partial index of the queue table; the planner uses a partial index
    when asked (then the chosen plan avoided it for its cost, such as a sort order: see
    QA303); the statement's predicate implies a partial index's predicate (equality to one of
    its values, an IN list inside its list, `IS NULL` for `IS NULL`); the statement has no
    condition on the predicate's column; or its values are unknown (`status IN ($1, $2)` in
    pg_stat_statements text). When the planner's answer is not clear (it chose another index
    with the same key), the statement is reported as skipped. Values pg_stat_statements hid
    are bound from the evidence for their column (a partial index whose keys supply the
    ORDER BY, the queue's live values; never a value no row holds), each plausible binding
    is planned, and a predicate only some bindings cannot prove is info naming the binding
    (`binding`).
    """
    for d in judgeable_dequeues(snapshot):
        stmt, queue = d.statement, d.queue
        if stmt.custom_plan is None:
            if not stmt.plan_error:  # a plan error was reported as a skip already
                yield Skip(f"{statement_id(stmt)}: no custom plan was made", queue.qualified)
            continue
        # Values pg_stat_statements hid are hypotheses: each plausible binding is judged.
        answer = over_bindings(d, lambda v: _judge(snapshot, v))
        if answer is not None:
            yield answer


def _judge(snapshot: Snapshot, d: Dequeue) -> Finding | Skip | None:
    """The finding about the dequeue's custom plan and probes, a skip when the planner's
    answer is not clear, or None."""
    stmt, queue, table = d.statement, d.queue, d.table
    if stmt.custom_plan is None:
        return None
    used = set(indexes_used(stmt.custom_plan, table.schema, table.name))
    if any(i.is_partial and i.name in used for i in table.indexes):
        return None
    probes = stmt.index_probes
    if any(answer == "proved" for answer in probes.values()):
        return None  # usable: the plan chose another path for its cost
    candidates = []
    usable = False  # some partial index is provably usable: not using it is a cost choice
    for idx in table.indexes:
        target = parse_index_predicate(idx.predicate) if idx.predicate else None
        if not idx.is_valid or target is None or not selects_waiting(target):
            continue  # a pruner's index on finished states is not one a claim should use
        judged = predicate_implies(d.parsed.predicates, target, stmt.custom_values)
        usable = usable or judged.implies is True
        if (
            judged.implies is False
            and judged.predicates
            and _meant_for(target, judged.predicates, queue.live, stmt.custom_values)
        ):
            candidates.append((idx, target, judged.predicates))
    if usable or not candidates:
        return None
    # Only the planner's own "no" counts: the forms it proves go beyond simple ones.
    confirmed = [c for c in candidates if probes.get(c[0].name) == "not proved"]
    if not confirmed:
        answers = "; ".join(
            f"{c[0].name}: {probes.get(c[0].name, 'not asked')}" for c in candidates
        )
        return Skip(
            f"{statement_label(stmt)}: whether its conditions can use the partial index "
            f"is not clear ({answers})",
            queue.qualified,
        )
    # The live set's own index first: that is the one the dequeue was meant to use.
    confirmed.sort(key=lambda c: (queue.live is None or c[1] != queue.live, c[0].name))
    idx, target, preds = confirmed[0]
    return _finding(snapshot, d, stmt.custom_plan, idx, target, preds)


def _meant_for(
    target: LivePredicate,
    preds: tuple[Predicate, ...],
    live: LivePredicate | None,
    values: dict[str, str],
) -> bool:
    """The partial index holds rows the statement wants: the live set's own index, or one
    whose values the statement's condition shares (``IN ('pending', 'retry')`` against
    ``'pending'``). A stager's index of scheduled jobs is not meant for a claim of available
    ones, so its not being usable is no finding."""
    if live is not None and live.column == target.column and set(live.values) & set(target.values):
        return True
    wanted: set[str] = set()
    for pred in preds:
        got = operand_values(pred, values)
        if got is None:
            continue
        if pred.op in ("=", "in", "any"):
            wanted |= set(got)
        elif pred.op in ("<>", "not in") and set(target.values) - set(got):
            return True
    return bool(wanted & set(target.values))


def _finding(
    snapshot: Snapshot,
    d: Dequeue,
    custom_plan: PlanNode,
    idx: Index,
    target: LivePredicate,
    preds: tuple[Predicate, ...],
) -> Finding:
    """The statement's conditions ``preds`` cannot prove the partial index's predicate
    ``target``, and its custom plan does not use the index."""
    stmt, table = d.statement, d.table
    name = statement_id(stmt)
    label = statement_label(stmt)
    found = scans(custom_plan, table.schema, table.name)
    scan = describe_node(found[0]) if found else describe_node(custom_plan)
    conditions = [predicate_text(p, stmt.custom_values) or p.text for p in preds]
    message = (
        f"{label} filters {target.column} with {' AND '.join(conditions)}, which cannot prove "
        f"the predicate of partial index {idx.name} ({idx.predicate}): even its custom plan "
        f"reads {scan}."
    )
    return Finding(
        target=Target("statement", table.schema, table.name, name),
        message=message,
        evidence={
            **statement_evidence(stmt),
            "source": stmt.source,
            "statement_text": stmt.text,
            "statement_predicates": [p.text for p in preds],
            "partial_index": idx.name,
            "index_predicate": idx.predicate,
            "index_definition": idx.definition,
            "custom_values": dict(stmt.custom_values),
            "custom_plan": "\n".join(plan_outline(custom_plan)),
            "custom_plan_cost": custom_plan.total_cost,
            "custom_plan_scan": scan,
            "indexes_used": list(indexes_used(custom_plan, table.schema, table.name)),
            "table_rows": round(table.reltuples),
            "partial_index_rows": round(idx.reltuples),
            "partial_index_scans": idx.idx_scan,
            "planner_probe": stmt.index_probes.get(idx.name),
        },
        explanation=(
            "PostgreSQL proves that a WHERE implies a partial index's predicate only for "
            "simple forms: the same comparison, or an IN list inside the index's list. "
            "Anything wider (more values, a negation, a range) reads past the index."
        ),
        fix=_fix(snapshot, d, idx, preds),
    )


def _fix(snapshot: Snapshot, d: Dequeue, idx: Index, preds: tuple[Predicate, ...]) -> Fix:
    stmt, table = d.statement, d.table
    conditions = [predicate_text(p, stmt.custom_values) for p in preds]
    keys = index_keys(d.parsed.order_by, table) if d.parsed.order_by else None
    if keys is None:
        directions = idx.descending or (False,) * len(idx.columns)
        keys = tuple(
            IndexKey(c, d) for c, d in zip(idx.columns, directions, strict=True) if c is not None
        )
    notes = [
        "The new index's WHERE is the query's predicate, spelled as the query spells it, so "
        "the planner can prove it; its key is the dequeue's ORDER BY (else the old index's), "
        "so it supplies the order.",
        f"If the extra values need no dequeue, rewrite the query's condition to the index's "
        f"own predicate ({idx.predicate}) instead, and keep {idx.name}.",
    ]
    if any(p.operands and p.operands[0].kind == "parameter" for p in preds):
        notes.append(
            "pg_stat_statements shows constants as $n: the values here are the ones qadvisor "
            f"planned with ({dict(stmt.custom_values)}); use the ones your code sends."
        )
    # A standby counts its own scans only: 0 there says nothing of the primary's.
    if not snapshot.server.is_standby and idx.idx_scan == 0:
        notes.append(
            f"{idx.name} has never been scanned: once nothing needs it, "
            f"DROP INDEX CONCURRENTLY {qualified(table.schema, idx.name)}."
        )
    if any(c is None for c in conditions) or not keys:
        return Fix(notes=" ".join(notes[1:]))
    where = " AND ".join(c for c in conditions if c)
    words = predicate_words(preds, stmt.custom_values)
    build = IndexFix(table, keys, where, tuple(words))
    covered = covering_index(build)
    if covered is not None:
        notes[0] = (
            f"Index {covered.name} already has the keys and a predicate the query's implies "
            f"({covered.predicate}): no new index is proposed; check that the query's "
            "predicate is written so the planner can prove it (a literal, not $n)."
        )
        return Fix(notes=" ".join(notes))
    return Fix(notes=" ".join(notes), steps=build.steps(snapshot, stmt))
