"""The one read of pg_stat_statements a run makes, and the rows each step takes from it.

pg_stat_statements is a set-returning function under a view: every read materialises every
entry of the server, with its text, before any WHERE applies, and past ``work_mem`` it does so
in temporary files. A run therefore reads the view once (pgss_entries.sql: this database's
entries, grouped by queryid and text), inside a transaction that raises ``work_mem`` for that
one statement so the entries stay in memory, and chooses from the rows here: the row-locking
statements (:meth:`Recorded.row_locking`), the calls of functions that hold claims
(:meth:`Recorded.calls_of`), the UPDATEs and DELETEs without a locking clause, which may be
maintenance (:meth:`Recorded.writing`), and the other statements that name a queue table
(:meth:`Recorded.naming`). Each returns rows in the shape its step reads. Every text is
read with its string constants masked (qadvisor.sql.masking).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from qadvisor.collect.queries import Conn, Read, first_line, query_text, rows
from qadvisor.sql.masking import mask_literals

# The ceiling of work_mem for the read (a setting the server already has above it is kept):
# the view's rows for the default 5,000 entries and their texts fit many times over; a server
# whose texts need more spills past it, as it would without it.
PGSS_WORK_MEM = "64MB"
PGSS_WORK_MEM_SQL = (
    "SELECT set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')),"
    " pg_size_bytes(%s)) / 1024 || 'kB', true)"
)

# At most this many of the most called statements of each kind.
MAX_ROW_LOCKING = 200
MAX_CALLS = 200
MAX_WRITING = 200

_LOCKING = re.compile(r"for\s+(no\s+key\s+)?update|for\s+(key\s+)?share", re.I)
_OWN_PREPARE = re.compile(r'\s*prepare\s+"?qadvisor_stmt', re.I)
_DDL = re.compile(r"\s*(explain|create|alter|drop|comment)(?!\w)", re.I)
_QADVISOR = re.compile("qadvisor", re.I)
_CALL_OPENING = re.compile(r'"?\s*\(')
# Comments and spaces before a statement's first word (a driver's or sqlcommenter's tag).
LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*\n?|/\*.*?\*/)*", re.S)
_WRITE_START = re.compile(r"(?i)(update|delete|with)\b")
_WRITE_WORD = re.compile(r"(?i)\b(update|delete)\b")


@dataclass(frozen=True)
class Recorded:
    """This database's pg_stat_statements rows (one per queryid and text; see the SQL file
    for the columns)."""

    entries: tuple[dict[str, Any], ...] = ()
    # Why the entries may not be every statement the database ran (pg_stat_statements evicted
    # some to make room, or cannot say whether it did), or None when it evicted none.
    evicted: str | None = None
    # When pg_stat_statements' statistics were last reset (ISO; None: unknown, before 1.9):
    # the entries' calls are counted since then.
    since: str | None = None

    def row_locking(self) -> list[dict[str, Any]]:
        """The statements that lock rows, the most called first (at most MAX_ROW_LOCKING),
        qadvisor's own PREPAREd plans left out; each with its mean time and buffers per call."""
        chosen = [
            e
            for e in self.entries
            if _LOCKING.search(e["query"]) and not _OWN_PREPARE.match(e["query"])
        ]
        chosen.sort(key=lambda e: (-e["calls"], e["queryid"], e["query"]))
        return [_per_call(e) for e in chosen[:MAX_ROW_LOCKING]]

    def writing(self) -> list[dict[str, Any]]:
        """The UPDATE and DELETE statements that have no locking clause (a purge of old rows,
        a reset of stale ones: each may read the whole table it writes), the most called
        first (at most MAX_WRITING), qadvisor's own left out; each with its mean time and
        buffers per call."""

        def writes(text: str) -> bool:
            body = LEADING_COMMENTS.sub("", text)
            return bool(_WRITE_START.match(body)) and bool(_WRITE_WORD.search(body))

        chosen = [
            e
            for e in self.entries
            if writes(e["query"])
            and not _LOCKING.search(e["query"])
            and not _QADVISOR.search(e["query"])
        ]
        chosen.sort(key=lambda e: (-e["calls"], e["queryid"], e["query"]))
        return [_per_call(e) for e in chosen[:MAX_WRITING]]

    def calls_of(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """The statements that call one of the functions ``names`` (bare, quoted or spaced
        before the argument list; the caller's tokenizer confirms), one row per queryid, the
        most called first (at most MAX_CALLS); DDL that names them is no call."""
        opening = [n.lower() + "(" for n in names]
        if not opening:
            return []

        def calls(text: str) -> bool:
            folded = _CALL_OPENING.sub("(", text.lower())
            return any(o in folded for o in opening)

        chosen = [e for e in self.entries if not _DDL.match(e["query"]) and calls(e["query"])]
        return _by_queryid(chosen)[:MAX_CALLS]

    def naming(
        self, tables: Iterable[str], skip: Iterable[int], limit: int
    ) -> list[dict[str, Any]]:
        """The statements whose text names one of ``tables`` as a word, other than those of
        the queryids ``skip`` and qadvisor's own (their text names qadvisor), one row per
        queryid, the most called first, at most ``limit``."""
        words = [re.compile(rf"(?<!\w){re.escape(t)}(?!\w)", re.I) for t in tables]
        skipped = set(skip)
        chosen = [
            e
            for e in self.entries
            if e["queryid"] not in skipped
            and not _QADVISOR.search(e["query"])
            and any(w.search(e["query"]) for w in words)
        ]
        return _by_queryid(chosen)[:limit]


def _per_call(entry: dict[str, Any]) -> dict[str, Any]:
    calls = entry["calls"]
    return {
        **entry,
        "mean_exec_ms": entry["total_exec_ms"] / calls,
        "shared_blks_per_call": entry["shared_blks"] / calls,
    }


def _by_queryid(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per queryid: the text most called under it, every role, the counters summed;
    the most called first."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(e["queryid"], []).append(e)
    out = []
    for queryid, group in groups.items():
        text = min(group, key=lambda e: (-e["calls"], e["query"]))["query"]
        out.append(
            _per_call(
                {
                    "queryid": queryid,
                    "query": text,
                    "roles": sorted({r for e in group for r in e["roles"] or () if r}),
                    "calls": sum(e["calls"] for e in group),
                    "rows": sum(e["rows"] for e in group),
                    "total_exec_ms": sum(e["total_exec_ms"] for e in group),
                    "shared_blks": sum(e["shared_blks"] for e in group),
                    "plans": sum(e["plans"] or 0 for e in group),
                    "toplevel": any(e["toplevel"] for e in group),
                    "track_planning": group[0]["track_planning"],
                }
            )
        )
    out.sort(key=lambda e: (-e["calls"], e["queryid"]))
    return out


def read_recorded(conn: Conn) -> Read[Recorded]:
    """This database's pg_stat_statements entries, read once. A missing or unreadable
    extension gives none and says so under ``pg_stat_statements``."""
    found = rows(conn, "pgss_schema")
    if not found:
        why = "pg_stat_statements is not installed in this database"
        return Read(Recorded(), {"pg_stat_statements": why})
    schema = found[0]["schema"]
    # An upgrade of PostgreSQL leaves the extension at the version it had. 1.9 (PostgreSQL
    # 14) added toplevel, and with it pg_stat_statements_info; 1.8 (PostgreSQL 13) renamed
    # total_time to total_exec_time and added plans. Columns a version lacks are read as
    # what it meant (total_time was execution time) or as unknown, never as zero.
    timing = extension_version(found[0]["version"]) >= (1, 8)
    toplevel = "bool_or(toplevel)" if found[0]["has_info"] else "true"
    query = sql.SQL(query_text("pgss_entries")).format(
        pgss=sql.Identifier(schema, "pg_stat_statements"),
        toplevel=sql.SQL(toplevel),
        exec_time=sql.Identifier("total_exec_time" if timing else "total_time"),
        plans=sql.SQL("sum(plans)::bigint" if timing else "NULL::bigint"),
        track_planning=sql.SQL(
            "coalesce(current_setting('pg_stat_statements.track_planning', true), 'off') = 'on'"
            if timing
            else "false"
        ),
    )
    try:
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute(PGSS_WORK_MEM_SQL, [PGSS_WORK_MEM])
            cur.execute(query)
            # pg_stat_statements keeps the constants of a DO block (and, before PostgreSQL 16,
            # of DECLARE ... CURSOR and CREATE TABLE AS): masked here, as it masks the others,
            # every text a report or snapshot holds shows a constant as $n.
            entries = tuple({**e, "query": mask_literals(e["query"])} for e in cur.fetchall())
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        why = f"pg_stat_statements is not readable: {first_line(exc)}"
        return Read(Recorded(), {"pg_stat_statements": why})
    return Read(Recorded(entries, *_info(conn, schema, found[0])))


def extension_version(text: str) -> tuple[int, ...]:
    """``'1.10'`` as ``(1, 10)``, so that versions compare as numbers; a part that is not a
    number ends it."""
    out: list[int] = []
    for part in str(text).split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _info(conn: Conn, schema: str, extension: dict[str, Any]) -> tuple[str | None, str | None]:
    """What pg_stat_statements_info says: why pg_stat_statements may not hold every statement
    of the database (the entries it evicted since its statistics were reset, or that it
    cannot say; None when it evicted none), and when those statistics were reset (ISO; None
    when it cannot say)."""
    if not extension["has_info"]:
        return (
            f"pg_stat_statements {extension['version']} does not count the entries it evicts "
            "to make room (pg_stat_statements_info is new in 1.9), so statements it no longer "
            "holds may be missing"
        ), None
    query = sql.SQL(query_text("pgss_info")).format(
        info=sql.Identifier(schema, "pg_stat_statements_info")
    )
    try:
        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query)
            info = cur.fetchone()
    except psycopg.Error as exc:
        if conn.broken or conn.closed:
            raise
        return f"whether pg_stat_statements evicted entries is unknown: {first_line(exc)}", None
    since = info["stats_reset"] if info is not None else None
    reset = since.isoformat(timespec="seconds") if since is not None else None
    if info is None or not info["dealloc"]:
        return None, reset
    when = f"since {since:%Y-%m-%d %H:%M %Z}".rstrip() if since is not None else "so far"
    kept = f" (pg_stat_statements.max = {info['max_entries']})" if info["max_entries"] else ""
    return (
        f"pg_stat_statements has evicted its least used entries {info['dealloc']:,} times "
        f"{when} to make room{kept}, so statements run rarely may be missing"
    ), reset
