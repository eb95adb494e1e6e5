"""Command line: `qadvisor check`, `snapshot`, `demo`, `checks`, `explain`.

Exit codes (a CI gate depends on them): 0 no finding at or above --fail-on; 1 findings at or
above it (only new ones with --baseline; or, with --fail-on-skip, a check that could not judge
a queue, or no queue found); 2 usage, connection or input error.
"""

from __future__ import annotations

import enum
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer

from qadvisor.errors import InputError

if TYPE_CHECKING:
    from rich.progress import Progress

    from qadvisor.model import Report
    from qadvisor.settings.resolve import Settings

T = TypeVar("T")

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

app = typer.Typer(
    name="qadvisor",
    help=(
        "Health checks for job queues that live in PostgreSQL tables: finds archive-bloated "
        "indexes, vacuum thresholds set by the archive and more, with the SQL that fixes them."
        "\n\nExit codes: 0 no finding at or above --fail-on, 1 findings at or above it (only "
        "new ones with --baseline; or, with --fail-on-skip, a check that could not judge a "
        "queue, or no queue found), 2 usage, connection or input error."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from qadvisor import __version__

        typer.echo(f"qadvisor {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print qadvisor's version and exit.",
        ),
    ] = False,
) -> None:
    # Options before the command; the help text is the app's.
    pass


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


def _fail(message: str) -> NoReturn:
    typer.echo(f"qadvisor: error: {message}", err=True)
    raise typer.Exit(EXIT_ERROR)


def _or_fail(step: Callable[[], T]) -> T:
    """The step's result; bad input, an unreachable server or a broken pack is one line on
    stderr and exit 2."""
    try:
        return step()
    except InputError as exc:
        _fail(str(exc))


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
    int | None,
    typer.Option(
        "--statement-timeout",
        min=100,
        metavar="MS",
        help="statement_timeout of the session, ms (default: QADVISOR_STATEMENT_TIMEOUT, the "
        "config file's statement_timeout, else 5000).",
        show_default=False,
    ),
]
LockTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--lock-timeout",
        min=1,
        metavar="MS",
        help="lock_timeout of the session, ms: qadvisor never waits long on the application "
        "(default: QADVISOR_LOCK_TIMEOUT, the config file's lock_timeout, else 1000).",
        show_default=False,
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
        help="Also EXPLAIN ANALYZE what finds each dequeue statement's rows: its SELECT with "
        "every FOR UPDATE/SHARE removed, in a read-only transaction that is rolled back. No "
        "row is locked or written and no worker is waited for; an UPDATE or DELETE itself is "
        "never executed. It does read the rows: mind the load on a busy primary.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        metavar="FILE",
        help="Settings file (qadvisor.toml, or a pyproject.toml with [tool.qadvisor]). "
        "Default: QADVISOR_CONFIG, else ./qadvisor.toml, else ./pyproject.toml. The "
        "QADVISOR_* environment overrides it, flags override both.",
        show_default=False,
    ),
]
RunTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--run-timeout",
        min=1,
        metavar="SECONDS",
        help="Seconds the whole visit to the server may take before qadvisor stops it (exit 2) "
        "(default: QADVISOR_RUN_TIMEOUT, the config file's run_timeout, else 120 + the connect "
        "timeout + --sample + 3 x (statement timeout + 5) per --query/--query-file statement).",
        show_default=False,
    ),
]
ConnectTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--connect-timeout",
        min=1,
        metavar="SECONDS",
        help="Seconds to wait for a connection, per address tried (default: "
        "QADVISOR_CONNECT_TIMEOUT, the config file's connect_timeout, else 10); a stricter "
        "connect_timeout in the DSN or PGCONNECT_TIMEOUT wins, a 0 there never disables it.",
        show_default=False,
    ),
]


FormatOpt = Annotated[
    Format, typer.Option("--format", "-f", help="Report format.", case_sensitive=False)
]


@app.command()
def check(
    dsn: DsnArg = None,
    table: TableOpt = None,
    fmt: FormatOpt = Format.text,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a finding is at or above this severity (never: no finding fails "
            "the run). Default: QADVISOR_FAIL_ON, the config file's fail_on, else warning.",
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
            "found: a CI gate that refuses a blind pass. Default: QADVISOR_FAIL_ON_SKIP, the "
            "config file's fail_on_skip, else off.",
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
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="In the text report, also list the tables discovery did not take for queues "
            "and the row-locking statements it did not judge as claims, each with why (JSON "
            "always carries them: rejected, left_out).",
        ),
    ] = False,
    statement_timeout: StatementTimeoutOpt = None,
    lock_timeout: LockTimeoutOpt = None,
    connect_timeout: ConnectTimeoutOpt = None,
    run_timeout: RunTimeoutOpt = None,
    output: Annotated[
        list[str] | None,
        typer.Option(
            "--output",
            help="Also write the report in FORMAT to PATH (repeatable: --output "
            "sarif:qadvisor.sarif --output junit:report.xml); each file is written whole or "
            "not at all, and stdout still gets --format.",
            metavar="FORMAT:PATH",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="FILE",
            help="Findings accepted earlier (written with --write-baseline): each finding is "
            "new or preexisting, only new ones count for --fail-on, and baselined ones that "
            "are gone are reported as fixed. Default: the config file's baseline.",
            show_default=False,
        ),
    ] = None,
    write_baseline: Annotated[
        Path | None,
        typer.Option(
            "--write-baseline",
            metavar="FILE",
            help="Write this run's findings to FILE as a baseline (keys, severities and "
            "targets; no measurements, no secrets).",
            show_default=False,
        ),
    ] = None,
    sarif_anchor: Annotated[
        Path | None,
        typer.Option(
            "--sarif-anchor",
            metavar="FILE",
            help="A file of the repository where SARIF shows findings that have no "
            "--query-file line of their own and no config file naming the tables (e.g. the "
            "workflow file). Default: the config file's sarif_anchor.",
            show_default=False,
        ),
    ] = None,
    prove: Annotated[
        bool,
        typer.Option(
            "--prove",
            help="Apply each printed fix to a scratch copy of its queue at the measured shape "
            "(synthetic rows, no production row read) on a throwaway PostgreSQL 18, and report "
            "the before and after it measured: claim time and buffers, plan, index sizes, and "
            "whether the finding went. Nothing more is sent to the checked server. Needs the "
            "demo extra: pip install 'qadvisor[demo]'.",
        ),
    ] = False,
    prove_rows: Annotated[
        int,
        typer.Option(
            "--prove-rows",
            min=1_000,
            max=50_000_000,
            help="Largest copy --prove builds; a larger table is built scaled down (its live "
            "set whole, its archive shortened) and the proof says so.",
        ),
    ] = 2_000_000,
    docs_url: Annotated[
        str | None,
        typer.Option(
            "--docs-url",
            metavar="URL",
            help="Absolute URL where qadvisor's docs/ directory is published: SARIF rules get "
            "helpUri URL/docs/checks/CODE.md. Default: the config file's docs_url, else none.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check the queue tables of a database and print findings with the SQL that fixes them.

    Read-only: the session runs with default_transaction_read_only, statement_timeout and
    lock_timeout, and only reads catalogs and statistics (never counts the archive).
    """
    from qadvisor import engine, render
    from qadvisor.settings.resolve import Flags, resolve

    started = time.monotonic()
    flags = Flags(
        dsn=dsn,
        config=config,
        snapshot=snapshot,
        tables=table or (),
        sample=sample,
        queries=query or (),
        query_files=query_file or (),
        analyze=analyze,
        ignore=ignore or (),
        fail_on=fail_on.value if fail_on else None,
        fail_on_skip=fail_on_skip,
        format=fmt.value,
        verbose=verbose,
        command=("qadvisor", *sys.argv[1:]),
        statement_timeout=statement_timeout,
        lock_timeout=lock_timeout,
        connect_timeout=connect_timeout,
        run_timeout=run_timeout,
        baseline=baseline,
        write_baseline=write_baseline,
        outputs=output or (),
        sarif_anchor=sarif_anchor,
        docs_url=docs_url,
    )
    settings = _or_fail(lambda: resolve(flags))  # imports the checks
    _imported()
    if prove:
        from qadvisor.prove import scratch_binaries

        _or_fail(scratch_binaries)
    with _SampleBar() as bar:
        report = _or_fail(lambda: engine.check(settings, bar))
    if prove:
        report = _proven(report, settings, prove_rows, started)
    _write_files(report, settings)
    render.write(
        report,
        settings.format,
        sys.stdout,
        annotations=settings.github_annotations,
        verbose=settings.verbose,
    )
    raise typer.Exit(EXIT_FINDINGS if engine.gate(report, settings) else EXIT_OK)


def _proven(report: Report, settings: Settings, rows: int, started: float | None = None) -> Report:
    """``report`` proven (--prove): within what is left of the run timeout when one is set,
    else within --prove's own bound."""
    from qadvisor.prove import PROVE_TIMEOUT_S, prove
    from qadvisor.prove.scratch import Deadline

    def say(message: str) -> None:
        typer.echo(message, err=True)

    bound = settings.limits.run_timeout_s
    if bound is not None and started is not None:
        deadline = Deadline(bound - (time.monotonic() - started), f"the run timeout of {bound} s")
    else:
        deadline = Deadline(PROVE_TIMEOUT_S, "--prove's own bound without a run timeout")
    return _or_fail(lambda: prove(report, settings, rows=rows, say=say, deadline=deadline))


def _write_files(report: Report, settings: Settings) -> None:
    """The --output files and the --write-baseline file, before stdout: a file that cannot
    be written is exit 2 with nothing on stdout."""
    import io

    from qadvisor import render
    from qadvisor.settings import baseline
    from qadvisor.settings.outputs import OutputError, write_atomic

    files = []
    for fmt, path in settings.outputs:
        buffer = io.StringIO()
        render.write(report, fmt, buffer, verbose=settings.verbose)
        files.append((path, buffer.getvalue()))
    if settings.write_baseline is not None:
        files.append((settings.write_baseline, baseline.dumps(report)))
    for path, text in files:
        try:
            write_atomic(path, text)
        except OutputError as exc:
            _fail(str(exc))


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
    statement_timeout: StatementTimeoutOpt = None,
    lock_timeout: LockTimeoutOpt = None,
    connect_timeout: ConnectTimeoutOpt = None,
    run_timeout: RunTimeoutOpt = None,
) -> None:
    """Save the facts qadvisor reads (no table data) so they can be checked later offline.

    `qadvisor check --snapshot FILE` runs the checks on it without a server.
    """
    from qadvisor import engine
    from qadvisor.settings.outputs import OutputError, unwritable, write_atomic
    from qadvisor.settings.resolve import Flags, resolve

    flags = Flags(
        dsn=dsn,
        config=config,
        tables=table or (),
        sample=sample,
        queries=query or (),
        query_files=query_file or (),
        analyze=analyze,
        statement_timeout=statement_timeout,
        lock_timeout=lock_timeout,
        connect_timeout=connect_timeout,
        run_timeout=run_timeout,
    )
    settings = _or_fail(lambda: resolve(flags))
    _imported()
    why = unwritable(output) if str(output) != "-" else None
    if why:
        _fail(f"--output {output}: cannot write it: {why}")  # before the server is tried
    with _SampleBar() as bar:
        snap = _or_fail(lambda: engine.collect(settings, bar))
    text = engine.snapshot_json(snap)
    if str(output) == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomic(output, text)
    except OutputError as exc:
        _fail(str(exc))
    typer.echo(f"snapshot of {len(snap.queues)} queue table(s) written to {output}", err=True)


@app.command()
def demo(
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the server running and print its DSN.")
    ] = False,
    fmt: FormatOpt = Format.text,
    rows: Annotated[
        int,
        typer.Option("--rows", min=10_000, max=50_000_000, help="Finished jobs in the archive."),
    ] = 2_000_000,
    prove: Annotated[
        bool,
        typer.Option(
            "--prove",
            help="Also prove each fix on a scratch copy of the demo queue built from its "
            "snapshot (see qadvisor check --prove).",
        ),
    ] = False,
) -> None:
    """Build a queue in a throwaway PostgreSQL 18 and check it.

    The queue is in the state the findings describe: a large archive of finished jobs, a
    small live set, a composite (status, created_at) index and default autovacuum settings.
    """
    from qadvisor import demo as demo_mod
    from qadvisor import render
    from qadvisor.settings.resolve import defaults

    _imported()
    settings = _or_fail(lambda: defaults(fmt.value, command=("qadvisor", *sys.argv[1:])))
    report, kept = _or_fail(
        lambda: demo_mod.run(settings, rows=rows, keep=keep, progress=_stderr_status)
    )
    if prove:
        report = _proven(report, settings, max(rows * 2, 2_000_000))
    render.write(report, settings.format, sys.stdout, annotations=settings.github_annotations)
    if kept:
        typer.echo(
            f"\nThe demo server is still running: qadvisor check '{kept.dsn}'\n"
            f"Stop it with: {kept.stop_command}",
            err=True,
        )


class ListFormat(enum.StrEnum):
    text = "text"
    json = "json"


@app.command("checks")
def checks_cmd(
    fmt: Annotated[
        ListFormat, typer.Option("--format", "-f", help="List format.", case_sensitive=False)
    ] = ListFormat.text,
) -> None:
    """List every installed check: code, name, default severity, category, the facts it reads
    and the privileges they need (`qadvisor explain CODE` prints one check's page)."""
    from qadvisor.docgen.pages import checks_json, checks_table
    from qadvisor.registry import load_checks

    checks = _or_fail(load_checks)
    _imported()
    typer.echo(checks_json(checks) if fmt is ListFormat.json else checks_table(checks))


@app.command()
def explain(
    code: Annotated[
        str | None, typer.Argument(help="Check code, e.g. QA101. Omitted: list all checks.")
    ] = None,
) -> None:
    """Show what a check finds, why it matters, how to fix it and when it stays quiet."""
    from qadvisor.docgen.pages import check_list, check_page, find_check
    from qadvisor.registry import load_checks

    checks = _or_fail(load_checks)
    _imported()
    if code is None:
        typer.echo(check_list(checks))
        return
    chk = find_check(checks, code)
    if chk is None:
        _fail(f"no check {code!r}; `qadvisor explain` lists them")
    typer.echo(check_page(chk))


class _SampleBar:
    """A progress bar on stderr while --sample waits (hidden when stderr is not a terminal),
    shown from the first report of progress until the block ends."""

    def __enter__(self) -> _SampleBar:
        self._progress: Progress | None = None
        return self

    def __call__(self, elapsed: float, total: float) -> None:
        if self._progress is None:
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
            self._task = self._progress.add_task("sample", total=total)
        self._progress.update(self._task, completed=elapsed, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _stderr_status(message: str) -> None:
    typer.echo(f"demo: {message}", err=True)


_gc_held = False


def _imported() -> None:
    """The command has imported what it runs on: hand it back a cyclic collector that leaves
    all of that out (of every collection, and of the full one at exit)."""
    global _gc_held
    if _gc_held:
        _gc_held = False
        gc.freeze()
        gc.enable()


def main() -> None:
    # Everything a run imports (psycopg, sqlglot, about 140 dataclasses) lives until exit, so
    # a collection can free none of it, yet each full one walks it all, and so does the one at
    # exit: about a fifth of a `qadvisor check` measured (docs/benchmarks.md). No collection
    # runs until the command's imports are done; then they are frozen out of the collector.
    global _gc_held
    gc.disable()
    _gc_held = True
    try:
        app()
    finally:
        _imported()
