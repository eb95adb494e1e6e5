"""`qadvisor check --dsn-file FILE`: one DSN or service name a line, comments allowed, secrets
never printed; each database with its own connection and failure; the run's bound over the
whole fleet; one --history series per database."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qadvisor.collect.databases import DsnFileError, dsn_file
from tests.fleet.conftest import MONITOR, Fleet, write_lines
from tests.helpers import qadvisor
from tests.json_schemas import assert_valid_fleet_report

PASSWORD = "s3cr3t-Pw0rd"


def test_lines_comments_services_and_labels(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "fleet.dsn", [
        "# the platform's databases",
        "",
        "orders-prod",
        "   service=billing dbname=ledger  ",
        f"postgresql://monitor:{PASSWORD}@db1.internal:5433/app",
        "host=db2.internal dbname=app user=monitor",
        "  # an indented comment",
    ])  # fmt: skip
    members = dsn_file(path)
    assert [m.label for m in members] == [
        "orders-prod", "billing/ledger", "db1.internal:5433/app", "db2.internal/app"
    ]  # fmt: skip
    assert members[0].dsn == "service=orders-prod"
    assert all(PASSWORD not in m.label for m in members)


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([f"host=a dbname=x password={PASSWORD}", "host=a dbname=x"], "lines 1 and 2 name the "
         "same database (a/x)"),
        ([f"host='a dbname=x password={PASSWORD}"], "line 1 is not a DSN (its text withheld)"),
        ([f"postgresql://u:{PASSWORD}/x@h/db"], "line 1: its user info is cut short"),
        ([f"user=monitor password={PASSWORD}"], "line 1 names neither a service, a host nor"),
        (["# nothing but a comment"], "names no database"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_line_naming_the_line_never_its_text(
    tmp_path: Path, lines: list[str], said: str
) -> None:
    path = write_lines(tmp_path / "bad.dsn", lines)
    with pytest.raises(DsnFileError) as caught:
        dsn_file(path)
    assert said in str(caught.value) and PASSWORD not in str(caught.value)
    run = qadvisor("check", "--dsn-file", str(path))
    assert run.rc == 2 and run.stdout == ""
    assert said in run.stderr and PASSWORD not in run.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--all-databases", "--dsn-file", "x"], "give one of them"),
        (["dbname=x", "--dsn-file", "FILE"], "it takes no DSN argument"),
        (["--jobs", "2"], "--jobs: it goes with --all-databases or --dsn-file"),
        (["--all-databases", "--write-baseline", "b.json"], "a baseline is of one database"),
        (["--all-databases", "--prove"], "--prove: it goes with one database"),
        (["--dsn-file", "no-such-file"], "no such file"),
    ],
)
def test_what_a_fleet_does_not_take_is_refused_before_any_connection(
    tmp_path: Path, args: list[str], said: str
) -> None:
    path = write_lines(tmp_path / "one.dsn", ["host=/nonexistent dbname=x"])
    run = qadvisor("check", *(str(path) if a == "FILE" else a for a in args), cwd=tmp_path)
    assert run.rc == 2 and said in run.stderr, run.stderr


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: a server stopped in its tracks."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def _run(*args: str) -> tuple[int, str, str, dict[str, Any]]:
    run = qadvisor("check", *args, "--format", "json", timeout=300)
    assert run.stdout.startswith("{"), run.stderr
    report = json.loads(run.stdout)
    assert_valid_fleet_report(report)
    return run.rc, run.stdout, run.stderr, report


@pytest.mark.server
def test_each_database_fails_alone_and_no_secret_is_printed(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, port = str(fleet.server.socket_dir), fleet.server.port
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[fleet-app03]\nhost={sock}\nport={port}\ndbname=app03\nuser={MONITOR}\n")
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: the connection is refused
    refused_port = closed.getsockname()[1]
    path = write_lines(tmp_path / "fleet.dsn", [
        "# three databases, one of them down",
        f"postgresql://{MONITOR}:{PASSWORD}@/app01?host={sock}&port={port}",
        "fleet-app03",
        f"host=127.0.0.1 port={refused_port} dbname=gone user={MONITOR} password={PASSWORD}",
    ])  # fmt: skip
    try:
        rc, out, err, report = _run("--dsn-file", str(path), "--output",
                                    f"markdown:{tmp_path / 'r.md'}")  # fmt: skip
    finally:
        closed.close()
    assert rc == 3  # a database not judged
    members = {m["database"]: m for m in report["databases"]}
    assert set(members) == {f"{sock}:{port}/app01", "fleet-app03", f"127.0.0.1:{refused_port}/gone"}
    assert members["fleet-app03"]["judged"] and members[f"{sock}:{port}/app01"]["judged"]
    gone = members[f"127.0.0.1:{refused_port}/gone"]
    assert gone["not_judged"] == "connect_failed" and "refused" in gone["reason"]
    assert report["fleet"]["source"] == f"--dsn-file {path}"
    for text in (out, err, (tmp_path / "r.md").read_text()):
        assert PASSWORD not in text


@pytest.mark.server
def test_the_run_timeout_bounds_the_whole_fleet(
    fleet: Fleet, tmp_path: Path, silent_server: int
) -> None:
    silent = f"host=127.0.0.1 port={silent_server} user={MONITOR}"
    path = write_lines(tmp_path / "fleet.dsn", [
        fleet.dsn("app01"), f"{silent} dbname=stuck1", f"{silent} dbname=stuck2",
        fleet.dsn("app02"),
    ])  # fmt: skip
    bound = 20
    started = time.monotonic()
    # Two at a time: app01, then a stuck one until the bound; the other stuck one from the
    # start; app02's turn never comes. A connect timeout longer than the bound does not
    # stretch it.
    rc, _, _, report = _run("--dsn-file", str(path), "--jobs", "2", "--run-timeout",
                            str(bound), "--connect-timeout", "600")  # fmt: skip
    took = time.monotonic() - started
    assert rc == 3  # databases not judged
    assert bound - 1 <= took < bound + 15, took
    members = {m["database"].rpartition("/")[2]: m for m in report["databases"]}
    assert members["app01"]["judged"]
    for stuck in ("stuck1", "stuck2"):
        assert members[stuck]["not_judged"] == "run_timeout", members[stuck]
        assert "passed while it was being checked" in members[stuck]["reason"]
    assert members["app02"]["not_judged"] == "run_timeout"
    assert "passed before its turn came" in members["app02"]["reason"]


@pytest.mark.server
def test_history_keeps_one_series_per_database(fleet: Fleet, tmp_path: Path) -> None:
    path = write_lines(tmp_path / "fleet.dsn", [fleet.dsn("app04"), fleet.dsn("seed_archive")])
    history = tmp_path / "history"
    for _ in range(2):
        rc, _, _, report = _run("--dsn-file", str(path), "--history", str(history))
        assert rc == 1
    series = {p.name: sorted(p.iterdir()) for p in history.iterdir()}
    sock = str(fleet.server.socket_dir).replace("/", "%2F")
    assert set(series) == {
        f"{sock}%3A{fleet.server.port}%2F{db}" for db in ("app04", "seed_archive")
    }
    assert all(len(files) == 2 for files in series.values())
    for member in report["databases"]:
        earlier = member["report"]["history"]["earlier"]
        assert len(earlier) == 1, member["database"]
