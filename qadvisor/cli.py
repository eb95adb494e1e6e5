"""Command line: `qadvisor check`, `snapshot`, `demo`, `explain`.

Exit codes (a CI gate depends on them): 0 no finding at or above --fail-on; 1 findings at or
above it (or, with --fail-on-skip, a check that could not judge a queue, or no queue found);
2 usage, connection or input error.
"""

from __future__ import annotations

import enum
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from qadvisor.config import Config
    from qadvisor.connect import SessionLimits
    from qadvisor.model import Report, Snapshot
    from qadvisor.registry import Check

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

app = typer.Typer(
    name="qadvisor",
    help=(
        "Health checks for job queues that live in PostgreSQL tables: finds archive-bloated "
        "indexes, vacuum thresholds set by the archive and more, with the SQL that fixes them."
        "\n\nExit codes: 0 no finding at or above --fail-on, 1 findings at or above it (or, "
        "with --fail-on-skip, a check that could not judge a queue, or no queue found), "
        "2 usage, connection or input error."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class Format(enum.StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"
    junit = "junit"


class FailOn(enum.StrEnum):
    critical = "critical"
    warning = "warning"
    info = "info"
    never = "never"


class UserError(Exception):
    """Bad input or an unreachable server: one line on stderr, exit 2."""


def _fail(message: str) -> NoReturn:
    typer.echo(f"qadvisor: error: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


DsnArg = Annotated[
    str | None,
    typer.Argument(
        help="libpq connection string or URI, e.g. 'host=db dbname=app user=monitor' or "
        "postgresql://monitor@db/app. Omitted: the PG* environment, .pgpass and "
        "pg_service.conf are used, as psql does.",
        show_default=False,
        metavar="DSN",
    ),
]
TableOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--table",
        "-t",
        help="Queue table to check (schema.name; repeatable). Skips discovery.",
        metavar="SCHEMA.TABLE",
        show_default=False,
    ),
]
SampleOpt = Annotated[
    float | None,
    typer.Option(
        "--sample",
        min=1,
        max=3600,
        help="Read the table counters again after SECONDS to measure dead tuples/s and "
        "inserts/s (sizes the vacuum fix from the real rate).",
        metavar="SECONDS",
        show_default=False,
    ),
]
StatementTimeoutOpt = Annotated[
    int,
    typer.Option(
        "--statement-timeout", min=100, metavar="MS", help="statement_timeout of the session, ms."
    ),
]
LockTimeoutOpt = Annotated[
    int,
    typer.Option(
        "--lock-timeout",
        min=1,
        metavar="MS",
        help="lock_timeout of the session, ms: qadvisor never waits long on the application.",
    ),
]
QueryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--query",
        "-q",
        help="A dequeue statement to analyse against this database (repeatable). Planned "
        "with EXPLAIN, never executed; must be one SELECT, UPDATE, DELETE or WITH statement.",
        metavar="SQL",
        show_default=False,
    ),
]
QueryFileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--query-file",
        help="A SQL file of the application (repeatable); its row-locking statements are "
        "analysed like --query, other statements are left alone.",
        metavar="PATH",
        show_default=False,
    ),
]
AnalyzeOpt = Annotated[
    bool,
    typer.Option(
        "--analyze",
        help="Also EXPLAIN ANALYZE the dequeue statements, each inside a transaction that is "
        "rolled back (it runs the statement: use a staging or scratch database).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Settings file (qadvisor.toml, or a pyproject.toml with [tool.qadvisor]). "
        "Default: ./qadvisor.toml, else ./pyproject.toml. Flags override it.",
        show_default=False,
    ),
]
ConnectTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--connect-timeout",
        min=1,
        metavar="SECONDS",
        help="Seconds to wait for a connection (default: the DSN's connect_timeout, "
        "PGCONNECT_TIMEOUT, else 10).",
        show_default=False,
    ),
]


@app.command()
def check(
    dsn: DsnArg = None,
    table: TableOpt = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Report format.", case_sensitive=False)
    ] = Format.text,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a finding is at or above this severity (never: no finding fails "
            "the run). Default: the config file's fail_on, else warning.",
            case_sensitive=False,
            show_default=False,
        ),
    ] = None,
    fail_on_skip: Annotated[
        bool | None,
        typer.Option(
            "--fail-on-skip/--no-fail-on-skip",
            help="Also exit 1 when a check could not judge a discovered or named queue (a "
            "hidden fact, another session's lock, an unknown claim) or when no queue was "
            "found: a CI gate that refuses a blind pass. Default: the config file's "
            "fail_on_skip, else off.",
            show_default=False,
        ),
    ] = None,
    sample: SampleOpt = None,
    query: QueryOpt = None,
    query_file: QueryFileOpt = None,
    analyze: AnalyzeOpt = False,
    snapshot: Annotated[
        Path | None,
        typer.Option(
            "--snapshot",
            metavar="FILE",
            help="Check a snapshot saved by `qadvisor snapshot` instead of a server.",
            show_default=False,
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            help="Check code (QA201) or finding key (QA201:public.jobs) to leave out; repeatable.",
            metavar="CODE|KEY",
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = None,
    statement_timeout: StatementTimeoutOpt = 5000,
    lock_timeout: LockTimeoutOpt = 1000,
    connect_timeout: ConnectTimeoutOpt = None,
) -> None:
    """Check the queue tables of a database and print findings with the SQL that fixes them.

    Read-only: the session runs with default_transaction_read_only, statement_timeout and
    lock_timeout, and only reads catalogs and statistics (never counts the archive).
    """
    if snapshot is not None and (dsn or table or sample or query or query_file or analyze):
        _fail(
            "--snapshot checks a saved snapshot: it takes no DSN, --table, --sample, "
            "--query, --query-file or --analyze"
        )
    try:
        cfg = _config(config)
        _check_ignores(cfg, ignore or [])
        if snapshot is not None:
            snap = _load_snapshot(snapshot)
        else:
            queries = _read_queries([*cfg.queries, *(query or [])],
                                    [*cfg.query_files, *(query_file or [])])  # fmt: skip
            limits = _limits(statement_timeout, lock_timeout, connect_timeout)
            snap = _collect(dsn, table or list(cfg.tables), sample, limits, queries, analyze)
        report = _run(snap, [*cfg.ignore, *(ignore or [])], cfg)
        gate = fail_on or FailOn(cfg.fail_on or "warning")
        blind = fail_on_skip if fail_on_skip is not None else bool(cfg.fail_on_skip)
    except UserError as exc:
        _fail(str(exc))
    _print_report(report, fmt)
    raise typer.Exit(_exit_code(report, gate, blind))


@app.command("snapshot")
def snapshot_cmd(
    dsn: DsnArg = None,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="File to write the snapshot JSON to ('-': stdout)."),
    ] = Path("-"),
    table: TableOpt = None,
    sample: SampleOpt = None,
    query: QueryOpt = None,
    query_file: QueryFileOpt = None,
    analyze: AnalyzeOpt = False,
    config: ConfigOpt = None,
    statement_timeout: StatementTimeoutOpt = 5000,
    lock_timeout: LockTimeoutOpt = 1000,
    connect_timeout: ConnectTimeoutOpt = None,
) -> None:
    """Save the facts qadvisor reads (no table data) so they can be checked later offline.

    `qadvisor check --snapshot FILE` runs the checks on it without a server.
    """
    try:
        cfg = _config(config)
        queries = _read_queries([*cfg.queries, *(query or [])],
                                [*cfg.query_files, *(query_file or [])])  # fmt: skip
        limits = _limits(statement_timeout, lock_timeout, connect_timeout)
        snap = _collect(dsn, table or list(cfg.tables), sample, limits, queries, analyze)
    except UserError as exc:
        _fail(str(exc))
    text = json.dumps(snap.to_dict(), indent=2, sort_keys=True) + "\n"
    if str(output) == "-":
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror}")
    typer.echo(f"snapshot of {len(snap.queues)} queue table(s) written to {output}", err=True)


@app.command()
def demo(
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the server running and print its DSN.")
    ] = False,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="Report format.", case_sensitive=False)
    ] = Format.text,
    rows: Annotated[
        int,
        typer.Option("--rows", min=10_000, max=50_000_000, help="Finished jobs in the archive."),
    ] = 2_000_000,
) -> None:
    """Build a queue in a throwaway PostgreSQL 18 and check it.

    The queue is in the state the findings describe: a large archive of finished jobs, a
    small live set, a composite (status, created_at) index and default autovacuum settings.
    """
    from qadvisor import demo as demo_mod

    try:
        report, kept = demo_mod.run(rows=rows, keep=keep, progress=_stderr_status)
    except demo_mod.DemoError as exc:
        _fail(str(exc))
    _print_report(report, fmt)
    if kept:
        typer.echo(
            f"\nThe demo server is still running: qadvisor check '{kept.dsn}'\n"
            f"Stop it with: {kept.stop_command}",
            err=True,
        )


@app.command()
def explain(
    code: Annotated[
        str | None, typer.Argument(help="Check code, e.g. QA101. Omitted: list all checks.")
    ] = None,
) -> None:
    """Show what a check finds, why it matters, how to fix it and when it stays quiet."""
    try:
        checks = _load_checks()
    except UserError as exc:
        _fail(str(exc))
    if code is None:
        width = max((len(c.code) for c in checks), default=5)
        for c in checks:
            typer.echo(f"{c.code:<{width}}  {c.name:<36} {c.severity.label:<8} {c.summary}")
        return
    match = [c for c in checks if code.upper() in (c.code, c.name.upper())]
    if not match:
        _fail(f"no check {code!r}; `qadvisor explain` lists them")
    from qadvisor.docs import check_page

    typer.echo(check_page(match[0]))


def _exit_code(report: Report, fail_on: FailOn, fail_on_skip: bool = False) -> int:
    from qadvisor.model import Severity

    if fail_on_skip and not report.fully_judged:
        return EXIT_FINDINGS
    if fail_on is FailOn.never:
        return EXIT_OK
    floor = Severity.parse(fail_on.value)
    return EXIT_FINDINGS if any(f.severity >= floor for f in report.findings) else EXIT_OK


def _load_snapshot(path: Path) -> Snapshot:
    from qadvisor.model import Snapshot

    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{path} is not a qadvisor snapshot (not JSON)") from None
    try:
        return Snapshot.from_dict(data)
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{path} is not a qadvisor snapshot: {exc}") from None


def _read_queries(queries: list[str], files: list[Path]) -> list[tuple[str, str]]:
    """(source, text) pairs; a --query that is not one plannable statement is refused."""
    from qadvisor import dequeue

    out: list[tuple[str, str]] = []
    for i, text in enumerate(queries, 1):
        try:
            dequeue.check_plannable(text)
        except dequeue.StatementError as exc:
            raise UserError(f"--query {i} refused: {exc}") from None
        out.append((f"--query {i}", text))
    for path in files:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UserError(f"cannot read --query-file {path}: {reason}") from None
        try:
            statements = dequeue.statement_lines(text)
        except dequeue.StatementError as exc:
            raise UserError(f"--query-file {path}: {exc}") from None
        out += [(f"{path}:{line}", stmt) for line, stmt in statements]
    return out


def _limits(
    statement_timeout: int, lock_timeout: int, connect_timeout: int | None
) -> SessionLimits:
    from qadvisor.connect import SessionLimits

    return SessionLimits(statement_timeout, lock_timeout, connect_timeout)


def _collect(
    dsn: str | None,
    tables: list[str],
    sample: float | None,
    limits: SessionLimits,
    queries: list[tuple[str, str]],
    analyze: bool,
) -> Snapshot:
    import psycopg

    from qadvisor.collect.snapshot import CollectError, collect
    from qadvisor.connect import ConnectError, connect, redact

    try:
        conn = connect(dsn, limits)
    except ConnectError as exc:
        raise UserError(str(exc)) from None
    try:
        with conn:
            if sample:
                with _sample_progress() as progress:
                    return collect(conn, tables, sample, progress, queries, analyze)
            return collect(conn, tables, None, None, queries, analyze)
    except CollectError as exc:
        raise UserError(str(exc)) from None
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"reading the catalog failed: {redact(first, dsn)}") from None


class _sample_progress:
    """A progress bar on stderr while --sample waits (hidden when stderr is not a terminal)."""

    def __enter__(self) -> _sample_progress:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("sampling table counters"),
            BarColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("sample", total=1.0)
        return self

    def __call__(self, elapsed: float, total: float) -> None:
        self._progress.update(self._task, completed=elapsed, total=total)

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def _stderr_status(message: str) -> None:
    typer.echo(f"demo: {message}", err=True)


def _config(path: Path | None) -> Config:
    from qadvisor.config import ConfigError, find_config

    try:
        return find_config(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def _check_ignores(cfg: Config, flags: list[str]) -> None:
    """Unknown codes in --ignore or the config's ignore: refused before anything is read."""
    from qadvisor.config import ConfigError, check_ignores

    checks = _load_checks()
    for where, patterns in ((f"{cfg.source}: ignore", cfg.ignore), ("--ignore", flags)):
        try:
            check_ignores(patterns, checks)
        except ConfigError as exc:
            raise UserError(f"{where} {exc}") from None


def _load_checks() -> tuple[Check, ...]:
    from qadvisor.registry import PackError, load_checks

    try:
        return load_checks()
    except PackError as exc:
        raise UserError(str(exc)) from None


def _run(snapshot: Snapshot, ignore: list[str], cfg: Config) -> Report:
    from qadvisor.config import ConfigError, check_options
    from qadvisor.engine import run_checks

    checks = _load_checks()
    try:
        options = check_options(checks, cfg)
    except ConfigError as exc:
        raise UserError(f"{cfg.source}: {exc}") from None
    return run_checks(snapshot, checks, options, ignore=ignore)


def _print_report(report: Report, fmt: Format) -> None:
    if fmt is Format.json:
        from qadvisor.render import json as json_render

        sys.stdout.write(json_render.render(report))
        return
    if fmt is Format.markdown:
        from qadvisor.render import markdown

        sys.stdout.write(markdown.render(report))
        return
    if fmt is Format.sarif:
        from qadvisor.render import sarif

        ran = set(report.checks_run)
        sys.stdout.write(sarif.render(report, [c for c in _load_checks() if c.code in ran]))
        return
    if fmt is Format.junit:
        from qadvisor.render import junit

        sys.stdout.write(junit.render(report))
        return
    from rich.console import Console

    from qadvisor.render import terminal

    terminal.render(report, Console())
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from qadvisor.render import github

        sys.stdout.write(github.render(report))


def main() -> None:
    app()
