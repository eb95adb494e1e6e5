"""Opening a polite session: read-only, with timeouts, named, and never leaking a secret."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import unquote

import psycopg
from psycopg import conninfo

from qadvisor.errors import InputError
from qadvisor.settings.resolve import SessionLimits

__all__ = ["ConnectError", "SessionLimits", "connect", "describe", "redact"]

APPLICATION_NAME = "qadvisor"


class ConnectError(InputError):
    """A connection could not be made; the message is safe to print (no secrets)."""


DEFAULT_CONNECT_TIMEOUT_S = 10


_SECRET_KEYS = ("password", "sslpassword")
# Characters that end a URI's user info early when left unencoded in a password: libpq then
# reads the rest of the password as host, port, database or parameters.
_URI_BREAKS = re.compile(r"[/?#@:]")
_WITHHELD = "the given DSN (its details withheld: they may hold part of a password)"


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
    scheme = re.match(r"\s*[A-Za-z][A-Za-z0-9+.-]*://", dsn)
    if scheme:
        rest = dsn[scheme.end() :]
        # As the user meant it: the user info runs to the last '@'; as libpq read it, to the
        # first '@' before any '/', '?' or '#'. Both passwords, and their pieces, are secret.
        read = re.split(r"[/?#]", rest, maxsplit=1)[0]
        for info in (rest.rpartition("@")[0], read.partition("@")[0] if "@" in read else ""):
            _user, colon, password = info.partition(":")
            if colon and password:
                found += [password, unquote(password)]
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
    """A URI whose user info an unencoded '/', '?' or '#' cut short: an '@' comes after the
    first of them, so libpq would read part of the password as host, port or database."""
    m = re.match(r"\s*[A-Za-z][A-Za-z0-9+.-]*://", dsn or "")
    if not m or dsn is None:
        return False
    rest = dsn[m.end() :]
    cut = re.search(r"[/?#]", rest)
    return cut is not None and "@" in rest[cut.end() :] and "@" not in rest[: cut.start()]


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


def connect(dsn: str | None, limits: SessionLimits) -> psycopg.Connection[tuple[object, ...]]:
    """Connect with the libpq environment as psql does, then pin the session read-only."""
    if cut_user_info(dsn):
        # Connecting would try a host made of the user name and a port made of the password.
        raise ConnectError(
            "malformed DSN: an '@' follows a '/', '?' or '#' in the URI, so its user info was "
            "cut short (details withheld: they may hold part of a password); percent-encode "
            "those characters in a password ('/' as %2F, '?' as %3F, '#' as %23, '@' as %40)"
        )
    try:
        params = conninfo.conninfo_to_dict(dsn or "")
    except psycopg.ProgrammingError as exc:
        # libpq quotes the fragment it choked on, which may be a piece of a password.
        if dsn and (_secrets(dsn) or re.search(r"password|://[^@]*:[^@]*@", dsn, re.I)):
            raise ConnectError("malformed DSN (details withheld: it holds a password)") from None
        raise ConnectError(f"malformed DSN: {_first_line(exc)}") from None
    extra: dict[str, Any] = {}
    if limits.connect_timeout_s is not None:
        extra["connect_timeout"] = limits.connect_timeout_s
    elif "connect_timeout" not in params and not os.environ.get("PGCONNECT_TIMEOUT"):
        extra["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT_S
    try:
        conn = psycopg.connect(
            dsn or "", autocommit=True, application_name=APPLICATION_NAME, **extra
        )
    except psycopg.Error as exc:
        raise ConnectError(
            f"cannot connect to {describe(dsn)}: {redact(_first_line(exc), dsn)}"
        ) from None
    try:
        # Every transaction of this session is read-only; EXPLAIN of a locking statement still
        # works, EXPLAIN ANALYZE of one is refused by the server itself.
        conn.execute(
            "SELECT set_config('default_transaction_read_only', 'on', false),"
            " set_config('statement_timeout', %s, false),"
            " set_config('lock_timeout', %s, false),"
            " set_config('idle_in_transaction_session_timeout', %s, false)",
            (
                str(limits.statement_timeout_ms),
                str(limits.lock_timeout_ms),
                str(max(limits.statement_timeout_ms * 4, 10_000)),
            ),
        )
    except psycopg.Error as exc:
        conn.close()
        raise ConnectError(f"cannot set up the session: {redact(_first_line(exc), dsn)}") from None
    return conn


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # libpq puts the useful part ("FATAL: ...") on the last line of a multi-host error.
    if not lines:
        return type(exc).__name__
    fatal = [ln for ln in lines if "FATAL" in ln or "error" in ln.lower()]
    return (fatal[-1] if fatal else lines[0])[:300]
