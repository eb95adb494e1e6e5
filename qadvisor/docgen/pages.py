"""The docs page of a check, made from the check itself (docstring, options and their comments,
the facts it reads), the privileges page, made from qadvisor.facts and every check's
``requires``, and the safety page, made from qadvisor.collect.sent (every statement qadvisor
sends).

``python -m qadvisor.docgen.pages docs/checks`` writes one page per installed check, and
``docs/privileges.md`` and ``docs/safety.md`` next to that directory; a test keeps the pages
in the repository identical to what this produces, so the docs cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from qadvisor.collect.sent import GROUPS, SENT, Sent
from qadvisor.docgen.promises import promises_section
from qadvisor.facts import FACTS, Fact
from qadvisor.registry import Check, load_checks

PRIVILEGES_PAGE = "privileges.md"
SAFETY_PAGE = "safety.md"


def option_rows(chk: Check) -> list[tuple[str, str, str]]:
    """(name, default, why) for each option; "why" is the comment above the field."""
    comments: dict[str, str] = {}
    try:
        source = inspect.getsource(chk.options)
    except (OSError, TypeError):
        source = ""
    pending: list[str] = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("# ").strip())
            continue
        m = re.match(r"(\w+)\s*:", stripped)
        if m and pending:
            comments[m.group(1)] = " ".join(pending)
        pending = []
    rows = []
    for f in dataclasses.fields(chk.options):
        default = f.default if f.default is not dataclasses.MISSING else None
        rows.append((f.name, _fmt(default), comments.get(f.name, "")))
    return rows


def _fmt(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def check_list(checks: Sequence[Check]) -> str:
    """One line per check: code, name, default severity, summary (``qadvisor explain``)."""
    width = max((len(c.code) for c in checks), default=5)
    return "\n".join(
        f"{c.code:<{width}}  {c.name:<36} {c.severity.label:<8} {c.summary}" for c in checks
    )


# How a kind of GRANT reads in the list of checks.
_GRANT_WORDS = {"usage": "USAGE on the schema", "select": "SELECT", "update": "UPDATE",
                "read_all_stats": "pg_read_all_stats (in pg_monitor)",
                "sequence": "SELECT on the sequence"}  # fmt: skip


def privilege_summary(chk: Check) -> str:
    """What the role needs beyond CONNECT for the facts the check reads, in a few words."""
    kinds = dict.fromkeys(k for name in chk.requires for k in FACTS[name].grants)
    return ", ".join(_GRANT_WORDS.get(k, k) for k in kinds) or "nothing"


def checks_table(checks: Sequence[Check]) -> str:
    """``qadvisor checks``: one row per check, with a header, columns aligned."""
    rows = [("code", "name", "severity", "category", "reads", "needs (beyond CONNECT)")]
    rows += [
        (c.code, c.name, c.severity.label, c.category, ", ".join(c.requires) or "-",
         privilege_summary(c))
        for c in checks
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(f"{v:<{w}}" for v, w in zip(r, widths, strict=False)) + "  " + r[-1]
             for r in rows]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines)


def checks_json(checks: Sequence[Check]) -> str:
    """``qadvisor checks --format json``: a list, one object per check."""
    out = []
    for c in checks:
        facts = [FACTS[name] for name in c.requires]
        out.append(
            {
                "code": c.code,
                "name": c.name,
                "severity": c.severity.label,
                "category": c.category,
                "summary": c.summary,
                "requires": list(c.requires),
                "privileges": list(dict.fromkeys(f.privilege for f in facts)),
                "grants": list(dict.fromkeys(g for f in facts for g in f.grants.values())),
                "min_server_version": c.min_server_version,
                "docs": c.docs_path,
            }
        )
    return json.dumps(out, indent=2)


def find_check(checks: Sequence[Check], code_or_name: str) -> Check | None:
    """The check with this code or name, in any case."""
    wanted = code_or_name.upper()
    return next((c for c in checks if wanted in (c.code, c.name.upper())), None)


def check_page(chk: Check) -> str:
    lines = [
        f"# {chk.code} {chk.name}",
        "",
        f"*{chk.summary}*",
        "",
        f"Default severity: **{chk.severity.label}**. Category: {chk.category}.",
    ]
    if chk.min_server_version:
        lines.append(f"Needs PostgreSQL {chk.min_server_version // 10000} or newer.")
    body = chk.doc.split("\n", 1)[1].strip() if "\n" in chk.doc else ""
    if body:
        lines += ["", body]
    if chk.requires:
        lines += [
            "",
            "## What it reads",
            "",
            "Where one of these is hidden from the role or behind another session's lock for a "
            "queue, the check reports a skip for that queue naming the GRANT or the lock.",
            "",
            "| fact | needs | locks |",
            "|---|---|---|",
        ]
        lines += [_fact_row(FACTS[name]) for name in chk.requires]
    rows = option_rows(chk)
    if rows:
        lines += ["", "## Options", "", "| option | default | why |", "|---|---|---|"]
        lines += [f"| `{n}` | {d} | {w} |" for n, d, w in rows]
    lines += [
        "",
        "## Silencing it",
        "",
        f"`qadvisor check --ignore {chk.code}` drops the check; "
        f"`--ignore {chk.code}:schema.name` drops one finding (the finding's `key`).",
        "",
    ]
    return "\n".join(lines)


def _lock_text(fact: Fact) -> str:
    if not fact.lock:
        return "none taken"
    return f"takes {fact.lock}; when another session's lock conflicts, {fact.when_locked}"


def _fact_row(fact: Fact) -> str:
    lock = _lock_text(fact)
    return f"| `{fact.name}`: {fact.title} | {fact.privilege} | {lock} |"


def privileges_page(checks: tuple[Check, ...]) -> str:
    """What each check reads, what each fact needs, and the GRANTs, as one page."""
    lines = [
        "# Privileges and locks",
        "",
        "qadvisor reads catalogs, statistics and plans. A role with `pg_monitor` sees most of",
        "it: the catalogs and the `pg_stat_get_*` counters are read by OID, which needs no",
        "USAGE on the application's schemas. The rest needs a grant, and some of it cannot be",
        "read while another session holds (or waits for) a conflicting lock. qadvisor checks",
        "the role's privileges (by OID) and the other sessions' locks (`pg_locks`) before it",
        "sends a query: what it may not read is not sent, and every check that needs it reports",
        "a skip for that queue, with the exact GRANT (the real role name, identifiers quoted)",
        "or the blocking pid, its lock mode, its state and the start of its query. The report",
        "lists the GRANTs together at the end of what could not be judged.",
        "",
        "This page is generated from `qadvisor/facts.py` and each check's `requires`",
        "(`python -m qadvisor.docgen.pages docs/checks`); a test keeps it in sync.",
        "",
        "## What each check reads",
        "",
        "| check | reads | GRANTs beyond pg_monitor |",
        "|---|---|---|",
    ]
    for chk in checks:
        facts = [FACTS[name] for name in chk.requires]
        grants = dict.fromkeys(
            f"`{g}`" + (f" ({f.only_when[kind]})" if kind in f.only_when else "")
            for f in facts
            for kind, g in f.grants.items()
            if kind != "read_all_stats"
        )
        reads = ", ".join(f"`{f.name}`" for f in facts) or "nothing"
        need = "<br>".join(grants) or "none"
        lines.append(f"| {chk.code} {chk.name} | {reads} | {need} |")
    lines += [
        "",
        "In a GRANT, `{role}` is the role qadvisor connects as, `{schema}` the queue table's",
        "schema (or the rotation table's), `{table}` the table, `{columns}` the columns the",
        "fact reads; the report prints each one filled in. Only what is missing is asked for.",
        "",
        "A check judges only the queues qadvisor finds. Named with `--table`, claimed by a",
        "known statement (pg_stat_statements, `--query`, `--query-file`) or marked by a partial",
        "index on its live predicate, a queue is found without a grant (which rows wait may",
        "still need the GRANT of `live_set`: a pg_stat_statements text shows every value as",
        "`$n`). A table whose only evidence is its status values (pg_stats) is found with the",
        "GRANT of `discovery` below; until then the report names the table and that GRANT.",
        "",
        "## The facts",
        "",
        "| fact | read from | needs | locks |",
        "|---|---|---|---|",
    ]
    for fact in FACTS.values():
        lock = _lock_text(fact)
        lines.append(f"| `{fact.name}`: {fact.title} | {fact.source} | {fact.privilege} | {lock} |")
    lines += [
        "",
        "A lock conflicts when PostgreSQL's table of conflicting lock modes says so: ACCESS",
        "SHARE (reading a size or a definition) waits only for ACCESS EXCLUSIVE (`ALTER TABLE`,",
        "`VACUUM FULL`, `LOCK TABLE`, `DROP`, `REINDEX` of an index); ROW SHARE (planning a",
        "`SELECT ... FOR UPDATE`) also for EXCLUSIVE; ROW EXCLUSIVE (planning an `UPDATE` or",
        "`DELETE` claim) also for SHARE and SHARE ROW EXCLUSIVE (a plain `CREATE INDEX`). A",
        "request still waiting counts as much as one granted: every later conflicting request",
        "queues behind it. Row locks (workers holding `FOR UPDATE` on jobs) conflict with none",
        "of these: qadvisor never executes a statement, and `--analyze` executes only the",
        "SELECT that finds a claim's rows with its locking clause removed, in a read-only",
        "transaction: it takes no row lock and waits for none.",
        "",
        "## The smallest role",
        "",
        "`qadvisor role DSN --role monitor` prints it for the database at hand: connected as",
        "a role that may read the queue tables (their owner, a DBA), it collects as the",
        "monitoring role would and prints every GRANT the checks ask for, with what each shows",
        "([cli.md](cli.md#qadvisor-role)). What every check needs, and nothing it does not:",
        "",
        "```sql",
        "CREATE ROLE monitor LOGIN IN ROLE pg_read_all_stats;  -- or pg_monitor, which has it",
        "-- For each queue table (app.jobs here):",
        "GRANT USAGE ON SCHEMA app TO monitor;",
        "GRANT SELECT (status, created_at, tenant_id, started_at, finished_at)",
        "    ON app.jobs TO monitor;",
        "GRANT SELECT ON SEQUENCE app.jobs_id_seq TO monitor;  -- reads it, cannot advance it",
        "-- The rotation table of a round-robin dequeue (QA401 plans it, QA402 probes it):",
        "GRANT SELECT ON app.queue_tenants TO monitor;",
        "```",
        "",
        "| grant | what it shows |",
        "|---|---|",
        "| `pg_read_all_stats` | other roles' statements in pg_stat_statements (the claims "
        "the application runs) and the state of their sessions in pg_stat_activity (the "
        "transaction that holds the xmin horizon) |",
        "| `USAGE` on the schema | the table by name: plans, the tenant probes and the "
        "rotation probe name it |",
        "| `SELECT` on the live column (`status`) | pg_stats of it: which values wait and how "
        "many rows hold them, where no partial index counts the live rows |",
        "| `SELECT` on the columns the claim's conditions and ORDER BY read | the claim's "
        "custom and generic plans |",
        "| `SELECT` on the tenant and job-time columns | live rows per tenant, recent job "
        "durations (QA403) |",
        "| `SELECT` on the rotation table | its idle tenants (QA402), the round-robin claim's "
        "plan (QA401) |",
        "| `SELECT` on the id's sequence | how far an integer id has gone (QA206); not needed "
        "for a bigint id |",
        "| `SELECT` on the finish timestamp (`finished_at`), else the timestamp the live "
        "predicate waits on (`dequeued_at IS NULL`), else the creation timestamp | "
        "pg_stats of it: how old the oldest finished row is (QA204) |",
        "",
        "The column list is the application's: a report run without it names, in each skip,",
        "the columns a fact needs as one column GRANT, and only those the role lacks. No grant",
        "of the job's payload is needed: a claim's select list (`SELECT *`, `RETURNING *`) is",
        "left out of the plan when the role may not read it, since the plan of the rows a claim",
        "finds does not depend on it. No `UPDATE` is needed: PostgreSQL checks a statement's",
        "privileges for `EXPLAIN` too, so without `UPDATE` qadvisor plans the claim's locking",
        "level alone without its row locks, the scan the claim's LockRows reads (index-only and",
        "parallel scans, which a row lock rules out, switched off), and the report says so",
        "beside the plan. `UPDATE` lets it plan the claim as written, and is needed for a",
        "claim that locks its rows in no SELECT (a plain `UPDATE ... WHERE`). qadvisor's",
        "session stays read-only (`default_transaction_read_only`) whatever it is granted.",
        "Without these grants the report still comes: the checks that need no hidden fact judge,",
        "the others are skipped with the GRANT.",
        "",
    ]
    return "\n".join(lines)


def _statement_cell(sent: Sent) -> str:
    if sent.file is not None:
        return f"`{sent.name}`: [`sql/{sent.file}.sql`](../qadvisor/collect/sql/{sent.file}.sql)"
    text = sent.text.replace("|", "\\|")
    return f"`{sent.name}`: `{text}`"


def _sent_row(sent: Sent, group: str) -> str:
    first = sent.groups[0]
    if group != first:
        return f"| `{sent.name}` | as under {GROUPS[first].split(' (')[0]} | | | |"
    what = sent.what
    if sent.embeds:
        what += f" Carries {sent.embeds}."
    if sent.facts:
        what += " Reads " + ", ".join(f"`{f}`" for f in sent.facts) + "."
    when = sent.when or "always"
    return f"| {_statement_cell(sent)} | {what} | {sent.lock} | {sent.privilege} | {when} |"


def safety_page() -> str:
    """Every statement qadvisor sends, by what needs it, and what a run leaves behind."""
    shapes = [s for s in SENT if s.embeds]
    lines = [
        "# What qadvisor sends, and what it leaves",
        "",
        "qadvisor opens one session, pins it read-only (`default_transaction_read_only`, with",
        "`statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout`), reads,",
        "and closes it; with `--all-databases` or `--dsn-file`, one such session per database",
        "(at most `--jobs` at once). Below is every statement it can send, grouped by what",
        "makes it send them, with the lock each takes and the privilege it needs (the facts they",
        "read, and the GRANTs, are in [privileges.md](privileges.md)). A statement that embeds",
        f"text qadvisor did not write ({len(shapes)} of the {len(SENT)} below) is listed as its",
        "shape:",
        "`{...}` is a piece written in (a quoted identifier, a literal qadvisor built, the",
        "application's statement where the row says it carries one), `%s` a bound parameter.",
        "",
        "This page is generated from `qadvisor/collect/sent.py`",
        "(`python -m qadvisor.docgen.pages docs/checks`). A test on real PostgreSQL 15 and 18",
        "records what a full run sends (`log_statement = all`: `check` in every format, with",
        "`--sample`, `--query`, `--query-file`, `--table` and `--analyze`, and `snapshot`, as a",
        "superuser and as a pg_monitor role with and without the GRANTs of privileges.md) and",
        "fails on a statement this page does not list, and on one it did not send unless the",
        'row says when it is sent: "always" means every time its section applies (every run,',
        "every planned claim, every `--analyze`).",
        "",
        *promises_section(),
        "## What a run leaves",
        "",
        "Nothing is written: no row, no table counter (inserts, updates, deletes, HOT updates),",
        "no object, no setting that outlives the session (`set_config(..., false)` lasts as",
        "long as the session, `SET LOCAL` and `set_config(..., true)` as long as the",
        "transaction, every planning transaction is rolled back and each prepared statement",
        "deallocated). Under `--analyze` no row is locked: the rows a claim would take are",
        "still waiting afterwards, and its scan moves no read counter either where the role",
        "may switch `track_counts` off (else it counts as docs/cli.md says). A test compares",
        "the catalog and the counters before and after a full run, and locks the waiting rows",
        "from another session after `--analyze`.",
        "",
        "The one trace: where `pg_stat_statements` is installed it records qadvisor's",
        "statements, as it records every session's (qadvisor leaves its own out when it reads",
        "the view: each of its statements on an application table names `qadvisor`). The",
        "server's log holds what its own settings ask for (`log_statement`,",
        "`log_min_duration_statement`, `log_connections`); the full run of the test leaves no",
        "ERROR there (a statement that fails on the server, a timeout say, would, as any",
        "session's does).",
        "",
    ]
    for group, title in GROUPS.items():
        rows = [s for s in SENT if group in s.groups]
        lines += [
            f"## {title}",
            "",
            "| statement | what it does | lock | needs | sent |",
            "|---|---|---|---|---|",
            *(_sent_row(s, group) for s in rows),
            "",
        ]
    return "\n".join(lines)


# README's table of checks lies between these lines: the first list a user reads, kept from
# the registry like the pages it links to.
README_TABLE_START = "<!-- checks: python -m qadvisor.docgen.pages docs/checks -->"
README_TABLE_END = "<!-- end of checks -->"


def readme_table(checks: Sequence[Check]) -> str:
    """README's table: a row per check in code order, linked to its page, with its summary."""
    rows = ["| code | name | what |", "|---|---|---|"]
    rows += [f"| [{c.code}]({c.docs_path}) | {c.name} | {c.summary.rstrip('.')} |" for c in checks]
    return "\n".join(rows)


def with_readme_table(readme: str, checks: Sequence[Check]) -> str:
    """``readme`` with the table between its markers made from ``checks`` (as it was when it
    has no markers)."""
    start, end = readme.find(README_TABLE_START), readme.find(README_TABLE_END)
    if start < 0 or end < start:
        return readme
    head = readme[: start + len(README_TABLE_START)]
    return f"{head}\n{readme_table(checks)}\n{readme[end:]}"


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    checks = load_checks()
    for chk in checks:
        path = directory / f"{chk.code}.md"
        path.write_text(check_page(chk))
        written.append(path)
    privileges = directory.resolve().parent / PRIVILEGES_PAGE
    privileges.write_text(privileges_page(checks))
    written.append(privileges)
    safety = directory.resolve().parent / SAFETY_PAGE
    safety.write_text(safety_page())
    written.append(safety)
    # The README of the repository whose docs/checks this is, when it holds the markers.
    readme = directory.resolve().parent.parent / "README.md"
    if readme.is_file():
        text = readme.read_text()
        if with_readme_table(text, checks) != text:
            readme.write_text(with_readme_table(text, checks))
            written.append(readme)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/checks")
    for p in write_pages(target):
        print(p)
