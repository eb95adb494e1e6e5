"""What qadvisor must say about a queue library's database, and the tests that hold it to it.

Each library module writes its expectations from the library's own code (its claim SQL, its
indexes, what its worker leaves behind), not from qadvisor's output, and subclasses
`CorpusSuite` with them. Live predicates are compared by meaning: the text qadvisor prints is
parsed and evaluated over the status column's values, so ``state = 'available'``,
``state IN ('available')`` and an enum range such as ``state < 'active'`` are judged by the
set of values they admit.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
import sqlglot
from sqlglot import exp

from qadvisor.demo.pgserver import LocalServer
from qadvisor.sql.dequeue import Predicate, analyse, disjuncts
from tests.corpus.fixwalk import foreign_literals, used_indexes_dropped, verdicts
from tests.corpus.library import Library, Observed, maintained_since, server_now, stale_tables
from tests.helpers import qadvisor
from tests.sql.postgres_parser import compare

# The lock checks judge claims only; none of the libraries claims without SKIP LOCKED.
LOCK_CODES = frozenset({"QA501", "QA502", "QA503"})
# Wrong on every library's database here, whatever the library: each reason says why.
COMMON_FORBIDDEN = {
    "QA102": "its partial indexes hold a few thousand entries, far under the 1 MiB minimum",
    "QA202": "no session, prepared transaction or slot holds the horizon",
    "QA203": "autovacuum is on for the server and the table",
    "QA401": "no round-robin over a tenant rotation table walks the backlog",
    "QA402": "there is no tenant rotation table",
}


@dataclass(frozen=True)
class Live:
    """A live predicate by meaning: the values of `column` that are live (empty: IS NULL);
    without a column, every row (`every_row`).

    `labels` is the column's enum in declaration order, so a range such as
    ``state < 'active'`` can be evaluated.
    """

    column: str
    values: frozenset[str]
    labels: tuple[str, ...] = ()

    @classmethod
    def every_row(cls) -> Live:
        """Every row of the table is live (a claim with no condition on it): ``TRUE``."""
        return cls("", frozenset())

    def admits(self, predicate_sql: str) -> bool:
        if not self.column:
            return _always_true(predicate_sql)
        judged = _evaluate(predicate_sql, self.column, self.labels)
        if judged is None:
            return False
        admits_null, values = judged
        if not self.values:  # IS NULL
            return admits_null and not values
        return not admits_null and values == self.values

    def describe(self) -> str:
        if not self.column:
            return "TRUE (every row)"
        return f"{self.column} in {sorted(self.values) or 'IS NULL'}"


@dataclass(frozen=True)
class LiveRows:
    """A live predicate by meaning over several nullable columns, for a design with no status
    column where NULL or not in each says where a row is (``next_run_at``, ``locked_at``).

    `live` holds the combinations the claim can take, one value per column: None for NULL,
    ``"set"`` for any value. A comparison of a column with anything but another of these
    columns (``next_run_at <= $3``, ``locked_at <= now() - interval '5 minutes'``) holds for a
    row that has a value: time narrows which live rows are due, it does not move a row in or
    out of the live set. A condition on other columns (a name, a disabled flag) narrows the
    same way and is passed over where it is ANDed.
    """

    columns: tuple[str, ...]
    live: frozenset[tuple[str | None, ...]]

    def admits(self, predicate_sql: str) -> bool:
        try:
            tree = sqlglot.parse_one(predicate_sql, read="postgres")
        except sqlglot.errors.ParseError:
            return False
        admitted = set()
        for row in itertools.product((None, "set"), repeat=len(self.columns)):
            verdict = _holds_on_row(tree, dict(zip(self.columns, row, strict=True)))
            if verdict is None:
                return False
            if verdict:
                admitted.add(row)
        return admitted == set(self.live)

    def describe(self) -> str:
        shown = [
            " AND ".join(
                f"{c} IS {'NOT ' if v else ''}NULL" for c, v in zip(self.columns, row, strict=True)
            )
            for row in sorted(self.live, key=str)
        ]
        return "rows where " + " | ".join(shown)


def _holds_on_row(node: exp.Expr, row: dict[str, str | None]) -> bool | None:
    """Whether `node` holds on a row given by which of `row`'s columns are NULL; None when it
    cannot be judged."""

    def mentions(n: exp.Expr) -> bool:
        return any(c.name in row for c in n.find_all(exp.Column))

    def column(n: exp.Expr) -> str | None:
        while isinstance(n, exp.Cast | exp.Paren):
            n = n.this
        return n.name if isinstance(n, exp.Column) and n.name in row else None

    if isinstance(node, exp.Paren):
        return _holds_on_row(node.this, row)
    if isinstance(node, exp.Not):
        inner = _holds_on_row(node.this, row)
        return None if inner is None else not inner
    if isinstance(node, exp.And):
        if not mentions(node.left):
            return _holds_on_row(node.right, row)
        if not mentions(node.right):
            return _holds_on_row(node.left, row)
        a, b = _holds_on_row(node.left, row), _holds_on_row(node.right, row)
        return None if a is None or b is None else a and b
    if isinstance(node, exp.Or):
        a, b = _holds_on_row(node.left, row), _holds_on_row(node.right, row)
        return None if a is None or b is None else a or b
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        name = column(node.this)
        return None if name is None else (row[name] is None) != bool(node.args.get("negate"))
    comparisons = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
    if isinstance(node, comparisons):
        left, right = column(node.left), column(node.right)
        if left is not None and not mentions(node.right):
            return row[left] is not None
        if right is not None and not mentions(node.left):
            return row[right] is not None
    return None


@dataclass(frozen=True)
class Claim:
    """A claim statement qadvisor must find and plan: on `table`, recognised by `marks`
    (fragments of its text, or of its source when it came from a function's body)."""

    table: str  # schema.table (a partitioned table's parent or the partition it names)
    marks: tuple[str, ...]
    why: str

    def matches(self, statement: dict[str, Any]) -> bool:
        text = _squash(f"{statement.get('text', '')} {statement.get('source', '')}")
        return all(_squash(mark) in text for mark in self.marks)


@dataclass(frozen=True)
class NotClaim:
    """A row-locking statement the library runs that is not a claim: never judged as one."""

    marks: tuple[str, ...]
    why: str

    def matches(self, statement: dict[str, Any]) -> bool:
        return Claim("", self.marks, self.why).matches(statement)


# Row-locking statements every library's database runs that are never claims.
COMMON_NOT_CLAIMS = (
    NotClaim(
        ("for key share", "operator(pg_catalog.="),
        "PostgreSQL's own foreign-key check, run by the RI triggers",
    ),
    NotClaim(("qadvisor_stmt",), "qadvisor's own PREPARE"),
    NotClaim(("explain (",), "qadvisor's own EXPLAIN"),
)


@dataclass(frozen=True)
class Codes:
    """Codes that must fire and codes that must not, each with the reason from the library."""

    required: dict[str, str] = field(default_factory=dict)
    forbidden: dict[str, str] = field(default_factory=dict)
    # Allowed as info only: a latent finding from pg_stat_statements text, whose literals
    # show as $n too, is what the check's docs promise when the server cannot confirm it.
    info_only: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Expect:
    # every queue table, schema.table -> what its claim waits for
    queues: dict[str, Live | LiveRows]
    not_queues: dict[str, str]  # tables that look like queues but are not, with why
    claims: tuple[Claim, ...]
    not_claims: tuple[NotClaim, ...]
    codes: dict[str, Codes]  # by stage; the stale stage takes the aged stage's unless named
    # Findings that must name this target (code -> "schema.name" of the index or table).
    targets: dict[str, dict[str, str]] = field(default_factory=dict)  # by stage
    # Tables whose status as a queue is arguable either way (why): neither required nor wrong.
    optional: dict[str, str] = field(default_factory=dict)
    # Another name for an expected queue: a partitioned parent for the partition its claim
    # reads. Either name (or both) counts as finding the queue.
    aliases: dict[str, str] = field(default_factory=dict)
    # Skips the library's schema earns (code -> a fragment of the reason, and why): a check
    # that cannot judge what the library does not record. Allowed, never required.
    skips: dict[str, tuple[str, str]] = field(default_factory=dict)


# The stages a test judges when it also judges the aged database with statistics older than
# its waiting rows (conftest.STALE): what must hold however stale the statistics are.
WITH_STALE = pytest.mark.parametrize("stage", ["fresh", "aged", "stale"], indirect=True)


class CorpusSuite:
    """The corpus tests, run for each stage (fresh, aged) of one library's database; those
    marked WITH_STALE also on the aged database once a fresh batch of waiting rows arrived
    after its last ANALYZE (stale)."""

    library: ClassVar[Library]
    expect: ClassVar[Expect]

    @WITH_STALE
    def test_queue_tables(self, observed: Observed) -> None:
        found = set(observed.queues())
        wrong = sorted(found & set(self.expect.not_queues))
        assert not wrong, (
            "taken for queues: "
            + "; ".join(f"{t} ({self.expect.not_queues[t]})" for t in wrong)
            + _context(observed)
        )
        canonical = {self.expect.aliases.get(t, t) for t in found}
        missing = sorted(set(self.expect.queues) - canonical)
        assert not missing, f"queues not found: {missing}" + _context(observed)
        extra = sorted(canonical - set(self.expect.queues) - set(self.expect.optional))
        assert not extra, f"tables taken for queues that are not: {extra}" + _context(observed)

    @WITH_STALE
    def test_live_predicates(self, observed: Observed) -> None:
        queues = observed.queues()
        wrong = []
        for table, live in sorted(self.expect.queues.items()):
            names = [t for t in queues if self.expect.aliases.get(t, t) == table]
            if not names:
                pytest.fail(f"queue {table} not found" + _context(observed), pytrace=False)
            for name in names:
                printed = queues[name]["live_predicate"]
                if printed is None or not live.admits(printed):
                    wrong.append(f"{name}: {printed!r}, expected {live.describe()}")
        assert not wrong, "wrong live predicates: " + "; ".join(wrong) + _context(observed)

    @WITH_STALE
    def test_claims_found_and_planned(self, observed: Observed) -> None:
        statements = observed.statements()
        problems = []
        for claim in self.expect.claims:
            found = [s for s in statements if claim.matches(s)]
            if not found:
                problems.append(f"claim not found: {claim.why} ({' ... '.join(claim.marks)})")
                continue
            for s in found:
                if s.get("plan_error") or s.get("custom_plan") is None:
                    problems.append(f"claim not planned: {claim.why}: {s.get('plan_error')}")
        unplanned = [s for s in statements if s.get("plan_error")]
        for s in unplanned:
            problems.append(f"statement skipped: {_squash(s['text'])[:160]}: {s['plan_error']}")
        assert not problems, "\n".join(problems) + _statements(statements)

    def test_not_claims_left_out(self, observed: Observed) -> None:
        not_claims = (*COMMON_NOT_CLAIMS, *self.expect.not_claims)
        judged = [(n, s) for s in observed.statements() for n in not_claims if n.matches(s)]
        assert not judged, "judged as claims: " + "; ".join(
            f"{n.why}: {_squash(s['text'])[:160]}" for n, s in judged
        )

    @WITH_STALE
    def test_no_check_skipped(self, observed: Observed) -> None:
        # Run as a superuser on a database the library built and worked: every check has what
        # it needs, so a skip is a claim not found or not planned, or a table wrongly taken.
        skipped = [
            s
            for s in observed.report["skipped"]
            if not (
                s["code"] in self.expect.skips and self.expect.skips[s["code"]][0] in s["reason"]
            )
        ]
        assert not skipped, "checks skipped: " + "; ".join(
            f"{s['code']} ({s.get('queue')}): {s['reason']}" for s in skipped
        )

    @WITH_STALE
    def test_no_claim_is_planned_with_the_archive_s_value(self, observed: Observed) -> None:
        # A status the claim's text hides ($n) is bound from the evidence; a value that is
        # not live and holds most of the table's rows (the archive, by pg_stats) is never it:
        # plans of a query the application never runs would be judged.
        problems = []
        checked = 0
        for stmt in observed.statements():
            queue = stmt.get("queue") or ""
            live = self.expect.queues.get(self.expect.aliases.get(queue, queue))
            if not isinstance(live, Live) or not live.column:
                continue
            # A backlog may be most of a fresh table: its values are the live ones.
            bulk = _bulk_values(observed.snapshot, queue).get(live.column, set()) - live.values
            parsed = analyse(stmt["text"]) if stmt.get("custom_values") else None
            if not bulk or parsed is None or stmt.get("plan_error"):
                continue
            for pred in _equalities(parsed.predicates):
                values = bulk if pred.column == live.column else None
                for operand in pred.operands:
                    if values is None or operand.kind != "parameter" or operand.index is None:
                        continue
                    checked += 1
                    bound = stmt["custom_values"].get(str(operand.index), "")
                    hit = sorted(v for v in values if f"'{v}'" in bound or f'"{v}"' in bound)
                    if hit:
                        problems.append(
                            f"{pred.text} planned with {bound} ({', '.join(hit)} holds most of "
                            f"the rows): {_squash(stmt['text'])[:160]}"
                        )
        assert not problems, "\n".join(problems) + f"\n({checked} bound values checked)"

    @pytest.mark.parametrize("stage", ["stale"], indirect=True)
    def test_the_statistics_predate_the_batch(self, observed: Observed) -> None:
        # The stale tier's premise: no ANALYZE ran on a queue table since the clone (its
        # counters started at zero), unless its changes since passed autoanalyze's threshold
        # (a table of a few hundred rows), and the changes since are counted.
        found = {f"{t['schema']}.{t['name']}": t for t in observed.snapshot["tables"]}
        problems, seen = [], []
        for name in sorted(found):
            t = found[name]
            counters = t["stats"]
            analyzed = counters["analyze_count"] + counters["autoanalyze_count"]
            changed = counters["n_mod_since_analyze"]
            reloption = t["reloptions"]
            threshold = float(reloption.get("autovacuum_analyze_threshold", 50)) + float(
                reloption.get("autovacuum_analyze_scale_factor", 0.1)
            ) * max(t["reltuples"], 0)
            if analyzed and changed + 1 < threshold:
                problems.append(f"{name} was analyzed although only {changed} rows changed")
            seen.append(
                f"{name}: analyzed {counters['analyze_count']} + auto "
                f"{counters['autoanalyze_count']}, {changed} changed since"
            )
        assert not problems, "\n".join(problems)
        assert stale_tables(observed) or not found, (
            "no queue table's statistics are stale (the build tried again while autovacuum "
            "had analyzed them): " + "; ".join(seen)
        )

    def test_statements_read_as_postgresql_reads_them(self, observed: Observed) -> None:
        # Every statement the library ran that qadvisor kept (claims, maintenance, the other
        # statements on its tables, those left out), as pg_stat_statements recorded it, is
        # read by qadvisor's parser as by PostgreSQL's. A refusal is allowed only where the
        # report says the statement was left out.
        snap = observed.snapshot
        problems: list[str] = []
        compared = 0
        for kind in ("statements", "maintenance", "stakeholders", "left_out"):
            for s in snap.get(kind) or ():
                verdict = compare(s["text"])
                if verdict is None:
                    continue
                compared += 1
                problems += [f"{kind}: {m}\n    {s['text']}" for m in verdict.misread]
                if verdict.refused and kind != "left_out":
                    problems.append(f"{kind}: refused ({verdict.refused})\n    {s['text']}")
        assert compared, "no statement of the library was compared"
        assert not problems, "\n".join(problems)

    def test_a_second_run_gives_the_same_findings(
        self, observed: Observed, corpus_server: LocalServer
    ) -> None:
        # Collected again on the unchanged database (the snapshot run in between only read
        # it): thresholds on noisy counters have margins, so codes, targets and severities
        # are the same. Unchanged by qadvisor and the library, that is: autovacuum may still
        # analyze a small queue table the last work changed (past its threshold of 50 rows
        # and a tenth), and new statistics may rightly give another plan and finding. Then
        # the runs compared are a fresh pair with no ANALYZE or VACUUM between them.
        def check() -> list[Any]:
            run = qadvisor("check", corpus_server.dsn(observed.db), "--format", "json")
            assert run.rc in (0, 1) and run.stdout.startswith("{"), run.stderr
            return verdicts(run.report)

        first, second = verdicts(observed.report), check()
        maintained = [] if first == second else maintained_since(corpus_server, observed)
        for _ in range(3 if maintained else 0):
            began = server_now(corpus_server, observed.db)
            first, second = check(), check()
            if not maintained_since(corpus_server, observed, began):
                break
        else:
            assert not maintained, "autovacuum maintained tables during every pair of runs"
        because = f"\n(after autovacuum maintained {', '.join(maintained)})" if maintained else ""
        assert first == second, f"first run {first}\nsecond run {second}{because}" + _findings(
            observed
        )

    def test_fixes_write_no_foreign_literal_and_drop_no_index_in_use(
        self, observed: Observed
    ) -> None:
        problems = [
            *foreign_literals(observed.report, observed.snapshot),
            *used_indexes_dropped(observed.report, observed.snapshot),
        ]
        assert not problems, "\n".join(problems) + _findings(observed)

    @WITH_STALE
    def test_codes(self, observed: Observed, stage: str) -> None:
        codes = self.expect.codes.get(stage) or self.expect.codes["aged"]
        found = observed.codes()
        report = observed.report
        problems = [
            f"{code} must fire: {why}" for code, why in codes.required.items() if code not in found
        ]
        # A lock code is wrong unless the library's claim has the lock it names (kombu's has
        # no SKIP LOCKED): then the stage requires it.
        locks = {c: "every claim uses SKIP LOCKED" for c in LOCK_CODES if c not in codes.required}
        forbidden = {**locks, **COMMON_FORBIDDEN, **codes.forbidden}
        for code, why in sorted(forbidden.items()):
            for f in observed.check.findings(code):
                problems.append(f"{code} must not fire ({why}): {f['message']}")
        for code, why in sorted(codes.info_only.items()):
            for f in observed.check.findings(code):
                if f["severity"] != "info":
                    problems.append(f"{code} at most info ({why}): {f['severity']}: {f['message']}")
        # Quiet means judged: a code that stayed silent on a queue it never saw, or skipped,
        # or did not run, has not said the library's database is fine.
        queues = {self.expect.aliases.get(t, t) for t in observed.queues()}
        for table in sorted(set(self.expect.queues) - queues):
            problems.append(f"no code judged {table}: it is not among the queues found")
        ran = report.get("checks_run")
        for code in sorted({*forbidden, *codes.info_only}):
            if ran is not None and code not in ran:
                problems.append(f"{code} did not run, so its silence says nothing")
            for skip in report["skipped"]:
                if skip["code"] == code:
                    problems.append(
                        f"{code} skipped, so its silence says nothing: {skip['reason']}"
                    )
        targets = self.expect.targets.get(stage) or (
            self.expect.targets.get("aged", {}) if stage == "stale" else {}
        )
        for code, target in targets.items():
            named = {
                f"{f['target']['schema']}.{f['target']['name'] or f['target']['table']}"
                for f in observed.check.findings(code)
            }
            if code in found and target not in named:
                problems.append(f"{code} must name {target}, named {sorted(named)}")
        assert not problems, "\n".join(problems) + _findings(observed)


def _bulk_values(snapshot: dict[str, Any], queue: str | None) -> dict[str, set[str]]:
    """Column -> the values pg_stats says hold half the queue table's rows or more."""
    out: dict[str, set[str]] = {}
    for t in snapshot.get("tables") or ():
        if f"{t['schema']}.{t['name']}" != queue:
            continue
        for c in t.get("column_stats") or ():
            pairs = zip(
                c.get("most_common_vals") or (), c.get("most_common_freqs") or (), strict=False
            )
            bulk = {v for v, f in pairs if f >= 0.5}
            if bulk:
                out[c["column"]] = bulk
    return out


def _equalities(predicates: Sequence[Predicate]) -> list[Predicate]:
    """The conditions that compare a column with values for equality, an OR's arms included."""
    out = []
    for pred in predicates:
        arms = disjuncts(pred.text) if pred.op == "other" else (pred,)
        out += [a for a in arms if a.op in ("=", "in", "any")]
    return out


def _evaluate(
    predicate_sql: str, column: str, labels: Sequence[str]
) -> tuple[bool, frozenset[str]] | None:
    """Whether the predicate admits NULL in `column`, and which of `labels` (or, without
    labels, of the values it names) it admits; None when it cannot be judged."""
    try:
        tree = sqlglot.parse_one(predicate_sql, read="postgres")
    except sqlglot.errors.ParseError:
        return None
    named = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    for any_ in tree.find_all(exp.Any):
        named |= _array_values(any_.this) or set()
    universe = list(labels) or sorted(named)

    def holds(node: exp.Expr, value: str | None) -> bool | None:
        if _is_column(node, column):  # a boolean column alone: it holds where it is true
            return value == "true"
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            if not _is_column(node.this, column):
                return None
            return (value == _literal(node.expression)) != bool(node.args.get("negate"))
        if isinstance(node, exp.Paren):
            return holds(node.this, value)
        if isinstance(node, exp.Not):
            inner = holds(node.this, value)
            return None if inner is None else not inner
        if isinstance(node, exp.Or):
            a, b = holds(node.left, value), holds(node.right, value)
            return None if a is None or b is None else a or b
        if isinstance(node, exp.And):
            # A condition on other columns (NOT blocked, a time) narrows the live set without
            # changing which values of this column are live.
            if not _mentions(node.left, column):
                return holds(node.right, value)
            if not _mentions(node.right, column):
                return holds(node.left, value)
            a, b = holds(node.left, value), holds(node.right, value)
            return None if a is None or b is None else a and b
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            if not _is_column(node.this, column):
                return None
            return (value is None) != bool(node.args.get("negate"))
        if isinstance(node, exp.In) and _is_column(node.this, column):
            return value in {e.this for e in node.expressions if isinstance(e, exp.Literal)}
        if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Any):
            if not _is_column(node.this, column):
                return None
            listed = _array_values(node.expression.this)
            return None if listed is None else value in listed
        comparisons = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
        if isinstance(node, comparisons) and _is_column(node.left, column):
            other = _literal(node.right)
            if other is None or value is None:
                return None if other is None else False
            if isinstance(node, exp.EQ):
                return value == other
            if isinstance(node, exp.NEQ):
                return value != other
            if other not in universe or value not in universe:
                return None
            i, j = universe.index(value), universe.index(other)
            return {exp.LT: i < j, exp.LTE: i <= j, exp.GT: i > j, exp.GTE: i >= j}[type(node)]
        return None

    admitted = set()
    for value in universe:
        verdict = holds(tree, value)
        if verdict is None:
            return None
        if verdict:
            admitted.add(value)
    return holds(tree, None) is True, frozenset(admitted)


def _always_true(predicate_sql: str) -> bool:
    """Whether the predicate is the constant true (``TRUE``, ``(true)``), which admits every
    row whatever its columns hold."""
    try:
        tree = sqlglot.parse_one(predicate_sql, read="postgres")
    except sqlglot.errors.ParseError:
        return False
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return isinstance(tree, exp.Boolean) and bool(tree.this)


def _array_values(node: exp.Expression) -> set[str] | None:
    """The strings of ``'{a,b}'`` or ``ARRAY['a', 'b']`` (inside ANY's parentheses)."""
    while isinstance(node, exp.Paren | exp.Cast):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        text = str(node.this)
        if text.startswith("{") and text.endswith("}"):
            return {part.strip().strip('"') for part in text[1:-1].split(",") if part.strip()}
        return None
    if isinstance(node, exp.Array):
        found = [_literal(e) for e in node.expressions]
        return None if any(v is None for v in found) else {v for v in found if v is not None}
    return None


def _mentions(node: exp.Expr, column: str) -> bool:
    return any(c.name == column for c in node.find_all(exp.Column))


def _is_column(node: exp.Expr, column: str) -> bool:
    while isinstance(node, exp.Cast):
        node = node.this
    return isinstance(node, exp.Column) and node.name == column


def _literal(node: exp.Expr) -> str | None:
    while isinstance(node, exp.Cast):
        node = node.this
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    return str(node.this) if isinstance(node, exp.Literal) and node.is_string else None


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _context(observed: Observed) -> str:
    lines = [
        f"  {q['schema']}.{q['table']}: {q['live_predicate']} ({q['reason']})"
        for q in observed.report["queues"]
    ]
    return "\nqueues qadvisor found:\n" + ("\n".join(lines) or "  (none)")


def _statements(statements: list[dict[str, Any]]) -> str:
    lines = [
        f"  [{s.get('source')}] calls={s.get('calls')} plan_error={s.get('plan_error')}: "
        f"{_squash(s['text'])[:200]}"
        for s in statements
    ]
    return "\nstatements qadvisor found:\n" + ("\n".join(lines) or "  (none)")


def _findings(observed: Observed) -> str:
    lines = [f"  {f['code']} {f['key']}: {f['message']}" for f in observed.report["findings"]]
    return "\nfindings:\n" + ("\n".join(lines) or "  (none)")
