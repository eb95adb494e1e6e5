"""Opening a polite session: read-only, with timeouts, named, and never leaking a secret.

Every wait is bounded, whatever the server or the network does:

- connecting: qadvisor's connect bound (--connect-timeout, else its default in
  qadvisor.settings.defaults) per address tried; a DSN's or PGCONNECT_TIMEOUT's
  connect_timeout applies when it is stricter, and one of 0 (libpq: wait forever), below 0 or
  not a number is replaced;
- each round trip of the session: the server's statement_timeout plus STATEMENT_MARGIN_S,
  counted by qadvisor itself, so a server that stopped answering (a stopped process, a lost
  network) still ends the run; TCP keepalives end a silently dropped connection too;
- the whole run: the run bound (--run-timeout, else :func:`default_run_timeout_s`).

When a bound passes qadvisor closes the socket (a cancel request would wait on the same
stopped server) and the run ends with one line and exit 2.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg import conninfo

from qadvisor.collect.session_limits import catalog_blockers, role_lock_timeout, startup_options
from qadvisor.errors import InputError, NotJudgedError
from qadvisor.settings.defaults import (
    BASE_RUN_TIMEOUT_S,
    MAX_TIMEOUT,
    PLANNED_STATEMENT_READS,
    STATEMENT_MARGIN_S,
)
from qadvisor.settings.resolve import SessionLimits

__all__ = [
    "ConnectError",
    "DsnError",
    "RunBoundPassed",
    "SessionLimits",
    "Unresponsive",
    "connect",
    "default_run_timeout_s",
    "describe",
    "redact",
]

APPLICATION_NAME = "qadvisor"


class ConnectError(NotJudgedError):
    """A connection could not be made or set up; the message is safe to print (no secrets)."""


class DsnError(InputError):
    """The DSN is malformed: nothing was tried; the message is safe to print (no secrets)."""


# TCP keepalives: a connection the network dropped without a word is noticed within
# idle + interval * count seconds.
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
               "keepalives_count": 3}  # fmt: skip
# The limits the role, the database or PGOPTIONS may already set on the session; 0: none.
_ROLE_LIMITS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


class Unresponsive(ConnectError):
    """The server did not answer within a bound qadvisor sets; the connection is closed."""


class RunBoundPassed(Unresponsive):
    """The run's bound (--run-timeout) passed while the server was being read."""


def connect_timeout_s(limits: SessionLimits, params: dict[str, Any]) -> int:
    """The connect bound: qadvisor's (--connect-timeout, else its default), or the DSN's
    (else PGCONNECT_TIMEOUT's) when that is stricter; a value that is 0 (libpq: no limit),
    negative or not a whole number does not loosen it."""
    ours = limits.connect_timeout_s
    given = params.get("connect_timeout")
    if given is None:
        given = os.environ.get("PGCONNECT_TIMEOUT")
    try:
        theirs = int(str(given).strip()) if given is not None else 0
    except ValueError:
        theirs = 0
    return min(ours, theirs) if theirs > 0 else ours


def statement_bound_s(statement_timeout_ms: int) -> float:
    """How long qadvisor waits for one answer of the server."""
    return statement_timeout_ms / 1000 + STATEMENT_MARGIN_S


def default_run_timeout_s(limits: SessionLimits, statements: int = 0, sample_s: float = 0) -> int:
    """The run bound when --run-timeout is not given (documented in docs/cli.md)."""
    planned = statements * PLANNED_STATEMENT_READS * statement_bound_s(limits.statement_timeout_ms)
    return int(BASE_RUN_TIMEOUT_S + limits.connect_timeout_s + sample_s + planned)


class _Watchdog:
    """One thread per connection that calls ``expire(why)`` when an armed deadline passes.

    Arming and disarming a round trip take a lock and an assignment; a timer thread started
    per round trip cost about 0.15 ms each, some 13 ms of a check's 80 round trips."""

    def __init__(self, expire: Callable[[str], None]) -> None:
        self._expire = expire
        self._cond = threading.Condition()
        self._armed: tuple[float, str] | None = None  # (time.monotonic() deadline, why)
        self._sleeping_until: float | None = None  # None: until notified
        self._thread: threading.Thread | None = None
        self._stopped = False

    def arm(self, seconds: float, why: str) -> None:
        deadline = time.monotonic() + seconds
        with self._cond:
            self._armed = (deadline, why)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="qadvisor-watchdog", daemon=True
                )
                self._thread.start()
            elif self._sleeping_until is None or deadline < self._sleeping_until:
                self._cond.notify()

    def disarm(self) -> None:
        # No wake-up: the thread finds nothing armed when it next wakes, and sleeps on.
        with self._cond:
            self._armed = None

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._armed = None
            self._cond.notify()

    def _watch(self) -> None:
        with self._cond:
            while not self._stopped:
                armed = self._armed
                if armed is None:
                    self._sleeping_until = None
                    self._cond.wait()
                    continue
                deadline, why = armed
                left = deadline - time.monotonic()
                if left <= 0:
                    self._armed = None
                    self._expire(why)
                    continue
                self._sleeping_until = deadline
                # A wait longer than the platform takes is cut; the loop waits again.
                self._cond.wait(min(left, threading.TIMEOUT_MAX))


class BoundedConnection(psycopg.Connection[Any]):
    """A connection none of whose waits outlasts its bounds: every round trip with the
    server goes through :meth:`wait`, which closes the socket when the statement bound or
    the run deadline passes first."""

    statement_bound: float | None = None
    run_deadline: float | None = None  # time.monotonic()
    run_timeout: float | None = None
    _expired: str | None = None
    _expired_run = False  # the run's bound, not one statement's, closed it
    _watchdog: _Watchdog | None = None

    def bound(self, statement_s: float, run_deadline: float, run_timeout: float) -> None:
        self.statement_bound, self.run_deadline, self.run_timeout = (
            statement_s,
            run_deadline,
            run_timeout,
        )
        if self._watchdog is None:
            # The thread holds the connection weakly: a connection dropped unclosed is still
            # collected, and its watchdog stops with it.
            method = weakref.WeakMethod(self._expire)

            def expire(why: str) -> None:
                if (m := method()) is not None:
                    m(why)

            dog = _Watchdog(expire)
            weakref.finalize(self, dog.stop)
            self._watchdog = dog

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        dog = self._watchdog
        if self.statement_bound is None or self.run_deadline is None or dog is None:
            return super().wait(gen, *args, **kwargs)
        left = self.run_deadline - time.monotonic()
        if left <= 0:
            self._expire("run")
            raise RunBoundPassed(self._expired or "")
        statement = self.statement_bound <= left
        why = "statement" if statement else "run"
        dog.arm(min(self.statement_bound, left), why)
        try:
            return super().wait(gen, *args, **kwargs)
        except Exception:
            if self._expired is None:
                raise
        finally:
            dog.disarm()
        # The socket was shut: whatever psycopg made of that, the reason is the bound.
        raise (RunBoundPassed if self._expired_run else Unresponsive)(self._expired)

    def close(self) -> None:
        super().close()
        if self._watchdog is not None:
            self._watchdog.stop()

    def _expire(self, why: str) -> None:
        """Shut the socket down: the blocked read returns at once, and so does every later
        use of the connection (a cancel request would wait on the same silent server)."""
        self._expired_run = why == "run"
        if why == "run":
            self._expired = (
                f"the run did not end within its bound of {self.run_timeout:g} s "
                "(--run-timeout); qadvisor stopped and closed the connection"
            )
        else:
            self._expired = (
                f"the server did not answer within {self.statement_bound:g} s "
                f"(statement_timeout + {STATEMENT_MARGIN_S} s); it may be stopped, overloaded "
                "or cut off by the network; qadvisor closed the connection"
            )
        try:
            fd = self.pgconn.socket
        except psycopg.Error:
            return
        with suppress(OSError), socket.socket(fileno=os.dup(fd)) as dup:
            dup.shutdown(socket.SHUT_RDWR)


_SECRET_KEYS = ("password", "sslpassword")
# Characters that end a URI's user info early when left unencoded in a password: libpq then
# reads the rest of the password as host, port, database or parameters.
_URI_BREAKS = re.compile(r"[/?#@:]")
_WITHHELD = "the given DSN (its details withheld: they may hold part of a password)"
_URI_SCHEME = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.-]*://")


def _after_scheme(dsn: str | None) -> str | None:
    """A URI's text after its scheme (``postgresql://``); None for a keyword/value DSN."""
    m = _URI_SCHEME.match(dsn or "")
    return dsn[m.end() :] if m and dsn else None


def _keyword_quoted(value: str) -> str:
    """``value`` as a keyword/value DSN writes it between quotes: the spelling that appears
    in the DSN's text, where the parsed password does not when it holds a quote or '\\'."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _secrets(dsn: str | None) -> list[str]:
    """What in ``dsn`` may be a password, and the pieces libpq may have cut it into."""
    if not dsn:
        return []
    found: list[str] = []
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        params = {}
    found += [str(params[k]) for k in _SECRET_KEYS if params.get(k)]
    rest = _after_scheme(dsn)
    if rest is not None:
        # As the user meant it: the user info runs to the last '@'; as libpq read it, to the
        # first '@' before any '/', '?' or '#'. Both passwords, and their pieces, are secret.
        read = re.split(r"[/?#]", rest, maxsplit=1)[0]
        for info in (rest.rpartition("@")[0], read.partition("@")[0] if "@" in read else ""):
            _user, colon, password = info.partition(":")
            if colon and password:
                found += [password, unquote(password)]
    found += [_keyword_quoted(s) for s in found]
    pieces = [p for s in found for p in _URI_BREAKS.split(s) if len(p) >= 3]
    return sorted({s for s in found + pieces if s}, key=len, reverse=True)


def redact(text: str, dsn: str | None = None) -> str:
    """Remove passwords from a message: the DSN's own (and the pieces a malformed URI cut it
    into), and anything shaped like one."""
    for secret in _secrets(dsn):
        text = text.replace(secret, "***")
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    text = re.sub(r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", text, flags=re.I)
    return text


def cut_user_info(dsn: str | None) -> bool:
    """A URI whose user info an unencoded character of its password cut short, so that
    libpq would read part of the password as host, port or database: an '@' after the first
    '/', '?' or '#' (none before it), or a second '@' before it (libpq's user info ends at
    the first '@', and no host or port holds one)."""
    rest = _after_scheme(dsn)
    if rest is None:
        return False
    cut = re.search(r"[/?#]", rest)
    authority = rest[: cut.start()] if cut else rest
    if authority.count("@") > 1:
        return True
    return cut is not None and "@" in rest[cut.end() :] and "@" not in authority


def describe(dsn: str | None) -> str:
    """Host/port/database of a DSN for messages, without credentials: only values known not to
    be secret; when the DSN did not parse as it was meant (a password cut by an unencoded '/',
    '@', '?' or '#'), none of them."""
    try:
        params = conninfo.conninfo_to_dict(dsn or "")
    except psycopg.Error:
        return "the given DSN"
    secrets = _secrets(dsn)
    values = {k: str(params[k]) for k in ("host", "port", "dbname") if params.get(k)}
    port = values.get("port", "")
    if any(s in v for v in values.values() for s in secrets) or not re.fullmatch(r"[\d,]*", port):
        return _WITHHELD
    if cut_user_info(dsn):
        return _WITHHELD
    parts = [f"{k}={v}" for k, v in values.items()]
    return " ".join(parts) or "the libpq defaults (PG* environment)"


def _unresolvable_host(dsn: str | None, params: dict[str, Any]) -> str | None:
    """Why a host name the DSN (or PGHOST) gives is none a resolver can look up, or None:
    a label (the part between dots) empty or longer than 63 octets (RFC 1035)."""
    if params.get("hostaddr"):
        return None  # the address is given; the name is not looked up
    secrets = _secrets(dsn)
    for host in str(params.get("host") or os.environ.get("PGHOST") or "").split(","):
        host = host.strip()
        if not host or host.startswith(("/", "@")) or _is_address(host):
            continue  # a socket directory, an abstract socket, an address
        try:
            host.encode("idna")
        except UnicodeError:
            shown = "in the DSN" if any(s in host for s in secrets) else repr(host)
            return (
                f"host name {shown} cannot be looked up: a label (the part between dots) is "
                "empty or longer than 63 characters"
            )
    return None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def connect(
    dsn: str | None, limits: SessionLimits, run_timeout_s: float | None = None
) -> psycopg.Connection[tuple[object, ...]]:
    """Connect with the libpq environment as psql does, then pin the session read-only, with
    the stricter of the role's (database's, PGOPTIONS') limits and qadvisor's; every wait of
    the session is bounded, and the whole of it by ``run_timeout_s`` from now (None: the
    default run bound)."""
    started = time.monotonic()
    run_s = default_run_timeout_s(limits) if run_timeout_s is None else run_timeout_s
    if cut_user_info(dsn):
        # Connecting would try a host made of the user name and a port made of the password.
        raise DsnError(
            "malformed DSN: the URI's user info ends before its last '@' (an unencoded '@', "
            "'/', '?' or '#' in the password), so libpq would read part of the password as "
            "host, port or database (details withheld); percent-encode those characters in a "
            "password ('@' as %40, '/' as %2F, '?' as %3F, '#' as %23)"
        )
    try:
        params = conninfo.conninfo_to_dict(dsn or "")
    except psycopg.ProgrammingError as exc:
        # libpq quotes the fragment it choked on, which may be a piece of a password.
        rest = _after_scheme(dsn)
        user_info = rest.rpartition("@")[0] if rest is not None else ""
        if dsn and (_secrets(dsn) or "password" in dsn.lower() or ":" in user_info):
            raise DsnError("malformed DSN (details withheld: it holds a password)") from None
        raise DsnError(f"malformed DSN: {_first_line(exc)}") from None
    _check_ports(params)
    bad_host = _unresolvable_host(dsn, params)
    if bad_host is not None:
        raise DsnError(bad_host)
    extra: dict[str, Any] = {
        "connect_timeout": connect_timeout_s(limits, params),
        # Before the first statement: one waiting on a system catalog's lock ends in time.
        "options": startup_options(
            str(params.get("options") or os.environ.get("PGOPTIONS") or ""), limits.lock_timeout_ms
        ),
    }
    # The DSN's (or PGKEEPALIVES*'s) own keepalive settings are the DBA's choice.
    env_keys = {"keepalives": "PGKEEPALIVES"}
    for key, value in _KEEPALIVES.items():
        if key not in params and not os.environ.get(env_keys.get(key, "")):
            extra[key] = value
    try:
        conn = _within(started + run_s, lambda: _open(dsn, extra))
    except TimeoutError:
        raise Unresponsive(
            f"the run did not end within its bound of {run_s:g} s (--run-timeout): no server "
            f"of {describe(dsn)} answered (each address is tried for up to "
            f"{extra['connect_timeout']} s, the connect timeout); qadvisor stopped"
        ) from None
    except psycopg.Error as exc:
        why = redact(_first_line(exc), dsn)
        # libpq judges its options before it tries a host: such a DSN is bad input, not a
        # server that could not be reached.
        error = DsnError if _OPTION_REFUSED.search(why) else ConnectError
        raise error(f"cannot connect to {describe(dsn)}: {why}") from None
    except (ValueError, OSError) as exc:
        raise ConnectError(
            f"cannot connect to {describe(dsn)}: {redact(_first_line(exc), dsn)}"
        ) from None
    statement_ms = limits.statement_timeout_ms
    conn.bound(statement_bound_s(statement_ms), started + run_s, run_s)
    try:
        # The limits the session starts with (ALTER ROLE/DATABASE ... SET, PGOPTIONS, the
        # server's), in ms.
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(_ROLE_LIMITS),)
        ).fetchall()
        given = {str(name): int(str(setting)) for name, setting in rows}
        # The startup lock_timeout hides the role's and the database's own: read, it counts.
        role_lock = role_lock_timeout(conn)
        if role_lock is not None and role_lock > 0:
            given["lock_timeout"] = min(role_lock, given.get("lock_timeout") or role_lock)
        ours = {
            "statement_timeout": statement_ms,
            "lock_timeout": limits.lock_timeout_ms,
            "idle_in_transaction_session_timeout": min(max(statement_ms * 4, 10_000), MAX_TIMEOUT),
        }
        # The stricter wins; 0 is no limit.
        applied = {k: min(v, given[k]) if given.get(k, 0) > 0 else v for k, v in ours.items()}
        conn.bound(statement_bound_s(applied["statement_timeout"]), started + run_s, run_s)
        # Every transaction of this session is read-only; EXPLAIN of a locking statement still
        # works, EXPLAIN ANALYZE of one is refused by the server itself. Dates are printed in
        # ISO form, which psycopg reads (a database's DateStyle = 'SQL, DMY' would stop the
        # first timestamp); the day/month order the application's literals are read in stays.
        conn.execute(
            "SELECT set_config('default_transaction_read_only', 'on', false),"
            " set_config('statement_timeout', %s, false),"
            " set_config('lock_timeout', %s, false),"
            " set_config('idle_in_transaction_session_timeout', %s, false),"
            " set_config('DateStyle', 'ISO', false)",
            tuple(str(applied[k]) for k in _ROLE_LIMITS),
        )
    except Unresponsive:
        conn.close()
        raise
    except psycopg.Error as exc:
        locked = isinstance(exc, psycopg.errors.LockNotAvailable)
        # Naming the holder reads pg_locks through a function: not when pg_proc is the one.
        holders = (catalog_blockers(conn) or "another session") if locked else ""
        conn.close()
        why = redact(_first_line(exc), dsn)
        if locked:
            why += (
                f": {holders} holds a system catalog PostgreSQL reads for every statement "
                "(a VACUUM FULL or LOCK TABLE of one), so nothing can be read until it is "
                "released"
            )
        elif isinstance(exc, psycopg.errors.QueryCanceled):
            # A timeout of a millisecond or so can fire as the statement ends, and the server
            # then reports it as a cancel "due to user request": say which setting to look at.
            why += (
                " (a statement_timeout or lock_timeout that the role, the database or "
                "PGOPTIONS sets may be shorter than any statement takes)"
            )
        raise ConnectError(f"cannot set up the session: {why}") from None
    return conn


def _open(dsn: str | None, extra: dict[str, Any]) -> BoundedConnection:
    return BoundedConnection.connect(
        dsn or "", autocommit=True, application_name=APPLICATION_NAME, **extra
    )


def _within(deadline: float, make: Callable[[], BoundedConnection]) -> BoundedConnection:
    """The connection ``make`` opens, or TimeoutError when ``deadline`` (time.monotonic())
    passes first. libpq bounds each address it tries by connect_timeout, one after another,
    and the host names' lookup by nothing: ten silent hosts of a multi-host DSN took ten
    connect timeouts. The attempt runs in a thread of its own, left behind when the run's
    bound passes; a connection it opens after that is closed."""
    lock = threading.Lock()
    done = threading.Event()
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            conn = make()
        except BaseException as exc:
            box["error"] = exc
        else:
            with lock:
                if box.get("abandoned"):
                    conn.close()
                else:
                    box["conn"] = conn
        finally:
            done.set()

    threading.Thread(target=attempt, name="qadvisor-connect", daemon=True).start()
    done.wait(max(deadline - time.monotonic(), 0))
    with lock:
        box["abandoned"] = "conn" not in box and "error" not in box
    if "error" in box:
        raise box["error"]
    if "conn" in box:
        conn: BoundedConnection = box["conn"]
        return conn
    raise TimeoutError


# libpq's words for an option value it refuses before trying any host (fe-connect.c).
_OPTION_REFUSED = re.compile(
    r"invalid (\w+ value|port number|integer value)|could not match \d+ host names"
)


def _check_ports(params: dict[str, Any]) -> None:
    """A DSN's ports are numbers libpq accepts (psycopg would otherwise hand a word to the
    resolver as a service name, and the error would read as a host that cannot be reached)."""
    given = str(params.get("port") or os.environ.get("PGPORT") or "")
    for port in given.split(","):
        port = port.strip()
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            withheld = port if port.isdigit() else "details withheld"
            raise DsnError(f"malformed DSN: invalid port number ({withheld})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # libpq puts the useful part ("FATAL: ...") on the last line of a multi-host error.
    if not lines:
        return type(exc).__name__
    fatal = [ln for ln in lines if "FATAL" in ln or "error" in ln.lower()]
    return (fatal[-1] if fatal else lines[0])[:300]
