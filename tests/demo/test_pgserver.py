"""The throwaway-server launcher works on every server version available here."""

from __future__ import annotations

import os
import pwd
import tempfile
from pathlib import Path

import psycopg
import pytest

from qadvisor.demo.pgserver import LocalServer, ServerError, start_server
from tests.conftest import TestDB, flush_stats

# The npm-installed majors are started here too: the launcher and the test helpers' own
# assumptions (pg_stat_statements preloaded, statistics awaited) hold on each.
pytestmark = pytest.mark.every_major


def query(server: LocalServer, sql: str) -> object:
    """The single value `sql` returns, over a connection of its own."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute(sql)
        row = cur.fetchone() if cur.description else None
    return row[0] if row else None


def show(server: LocalServer, setting: str) -> str:
    return str(query(server, f"SHOW {setting}"))


def test_reports_the_version_it_runs(pg_server: LocalServer) -> None:
    assert int(show(pg_server, "server_version_num")) == pg_server.version_num


def test_listens_on_its_unix_socket_only(pg_server: LocalServer) -> None:
    assert show(pg_server, "listen_addresses") == ""
    assert (pg_server.socket_dir / f".s.PGSQL.{pg_server.port}").is_socket()


def test_runs_fast_and_never_as_root(pg_server: LocalServer) -> None:
    assert [show(pg_server, s) for s in ("fsync", "synchronous_commit")] == ["off", "off"]
    if os.geteuid() == 0:
        assert pg_server.os_user is not None
        assert pg_server.data_dir.stat().st_uid == pwd.getpwnam(pg_server.os_user).pw_uid


def test_pg_stat_statements_is_preloaded(db: TestDB) -> None:
    db.execute("CREATE EXTENSION pg_stat_statements")
    db.execute("SELECT 42 AS pgserver_probe")
    rows = db.execute("SELECT calls FROM pg_stat_statements WHERE query LIKE '%pgserver_probe%'")
    assert rows and rows[0][0] >= 1


def test_db_is_fresh_and_its_stats_can_be_awaited(db: TestDB) -> None:
    assert db.execute("SELECT count(*) FROM pg_class WHERE relname = 'jobs'") == [(0,)]
    assert db.execute("CREATE TABLE jobs (id int)") == []
    db.execute("INSERT INTO jobs SELECT generate_series(1, 3)")
    row = db.wait_for_stats("jobs", lambda r: r["n_tup_ins"] >= 3)
    assert row["relname"] == "jobs"


def test_flush_stats_shows_what_an_open_session_held_back(db: TestDB) -> None:
    db.execute("CREATE TABLE jobs (id int)")
    with db.connect() as conn:
        # Two transactions in a row: a 14 backend holds back the second one's counters (sent
        # less than 500 ms after the first's), a 15+ one both, for up to 10 s while idle.
        conn.execute("INSERT INTO jobs SELECT generate_series(1, 3)")
        conn.execute("INSERT INTO jobs SELECT generate_series(1, 4)")
        flush_stats(conn)
        row = db.wait_for_stats("jobs", lambda r: r["n_tup_ins"] >= 7, timeout=4)
        assert row["n_tup_ins"] == 7


def test_stop_removes_the_socket_and_can_repeat(pg_server: LocalServer, tmp_path: Path) -> None:
    # Deep enough that the socket cannot live under it: the launcher falls back to /tmp.
    base = tmp_path / ("d" * 60) / ("e" * 60)
    server = start_server(pg_server.bin_dir, base, settings={"application_name": "it's a\\test"})
    with server:
        socket = server.socket_dir / f".s.PGSQL.{server.port}"
        assert not server.socket_dir.is_relative_to(base)
        assert socket.is_socket()
        assert show(server, "application_name") == "it's a\\test"
    assert not socket.exists()
    assert not server.socket_dir.exists()
    server.stop()


def test_a_deep_temporary_directory_still_gets_a_socket(
    pg_server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TMPDIR as deep as the cluster's own directory (a test's or a CI job's tree): the socket
    # goes under /tmp instead of failing to start.
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    with start_server(pg_server.bin_dir, deep / "base") as server:
        assert server.socket_dir.parent == Path("/tmp")
        assert show(server, "port") == str(server.port)
    assert not server.socket_dir.exists()


def test_restarts_an_existing_cluster(pg_server: LocalServer, tmp_path: Path) -> None:
    with start_server(pg_server.bin_dir, tmp_path) as server:
        query(server, "CREATE TABLE kept ()")
    with start_server(pg_server.bin_dir, tmp_path, initdb=False) as server:
        assert query(server, "SELECT to_regclass('kept') IS NOT NULL") is True


def test_bad_setting_fails_with_the_servers_own_words(
    pg_server: LocalServer, tmp_path: Path
) -> None:
    with pytest.raises(ServerError) as failure:
        start_server(pg_server.bin_dir, tmp_path, settings={"no_such_setting": "1"})
    message = str(failure.value)
    assert 'unrecognized configuration parameter "no_such_setting"' in message
    assert "Traceback" not in message
    assert not (tmp_path / "data" / "postmaster.pid").exists()
