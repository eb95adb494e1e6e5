"""A statement's short, stable name: what finding keys, the report's placing of findings and
the incident page's lookup of a finding's plans share. Apart from the statement checks'
iterations so that a renderer can name statements without reaching the checks' registry."""

from __future__ import annotations

from qadvisor.model import Statement


def statement_id(statement: Statement) -> str:
    """A short, stable name for a statement: its queue table and shape, ``jobs@3f9a2c1b0d``.

    Used as the finding target's name, so keys (``QA301:app.jobs@3f9a2c1b0d``) stay the same
    on a restored copy and across major versions, where a queryid changes. A statement
    without a fingerprint (an old snapshot) is named by its queryid or source.
    """
    table = statement.queue.rpartition(".")[2] if statement.queue else None
    if table is None and statement.parsed is not None:
        table = statement.parsed.table
    if statement.fingerprint:
        return f"{table or 'statement'}@{statement.fingerprint}"
    if statement.queryid is not None:
        return f"pgss:{statement.queryid}"
    return statement.source
