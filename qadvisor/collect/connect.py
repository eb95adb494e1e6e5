"""Opening a polite session: read-only, with timeouts, named, and never leaking a secret."""

from __future__ import annotations

import os
import re
from typing import Any

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


def redact(text: str, dsn: str | None = None) -> str:
    """Remove passwords from a message: the DSN's own, and anything shaped like one."""
    secrets: list[str] = []
    if dsn:
        try:
            params = conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            params = {}
        secrets += [str(params[k]) for k in _SECRET_KEYS if params.get(k)]
        m = re.search(r"://[^:/@]*:([^@]*)@", dsn)
        if m and m.group(1):
            secrets.append(m.group(1))
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    text = re.sub(r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", text, flags=re.I)
    return text


def describe(dsn: str | None) -> str:
    """Host/port/database of a DSN for messages, without credentials."""
    try:
        params = conninfo.conninfo_to_dict(dsn or "")
    except psycopg.Error:
        return "the given DSN"
    parts = [f"{k}={params[k]}" for k in ("host", "port", "dbname") if params.get(k)]
    return " ".join(parts) or "the libpq defaults (PG* environment)"


def connect(dsn: str | None, limits: SessionLimits) -> psycopg.Connection[tuple[object, ...]]:
    """Connect with the libpq environment as psql does, then pin the session read-only."""
    try:
        params = conninfo.conninfo_to_dict(dsn or "")
    except psycopg.ProgrammingError as exc:
        # libpq quotes the fragment it choked on, which may be a piece of a password.
        if dsn and re.search(r"password|://[^/@]*:[^/@]*@", dsn, re.IGNORECASE):
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
