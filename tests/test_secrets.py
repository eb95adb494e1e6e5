"""No password qadvisor is given ever leaves it: not in a report of any format, a snapshot, a
baseline, nor a message of a run that failed (real servers).

The role's password is required: a pg_hba.conf line asks members of one group for
scram-sha-256 on the server's socket, and a run without the password is refused. Each way of
giving it (a URI, a keyword DSN, PGPASSWORD, a .pgpass file, a service file) is tried with
passwords made of the characters that break naive parsing; each run's stdout, stderr and
every file it wrote must hold no piece of four characters or more (a letter among them) of
the password, in any of the spellings the test wrote it in (raw, percent-encoded, quoted,
.pgpass-escaped).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from qadvisor.demo.pgserver import LocalServer
from qadvisor.settings.resolve import ENV_VARIABLES
from tests.conftest import TestDB
from tests.helpers import Run, qadvisor

# The group whose members must give a password; its hba line is the file's first.
GROUP = "qadvisor_secret_users"
HBA_LINE = f"local all +{GROUP} scram-sha-256"

# Letters and digits between the breakers, so a leaked piece is recognisable and no piece of
# four characters occurs by chance in a report.
PASSWORDS = {
    "slash-space": "Kq7v/Wm3p Rt5k",
    "query-fragment": "Hy2j?Lc9v#Nb4f",
    "at-colon": "Ds6g@Qa1e:Uo7i",
    "percent-quotes": "Pe0w%41Zx8q'Jd4n\"Bs8m",
    "every-breaker": "Vt6c/Fm1h@Gw9y:Xe2r?Ab3d#Cf5h%Ej7k'Gl9n\"Io2p Kr4t\\Ms6v",
}
FORMATS = ("json", "markdown", "sarif", "junit", "sql")  # to files; text goes to stdout
MIN_PIECE = 4


def _keyword(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pgpass(value: str) -> str:
    return value.replace("\\", "\\\\").replace(":", "\\:")


def spellings(password: str) -> set[str]:
    return {password, quote(password, safe=""), _keyword(password), _pgpass(password)}


def pieces(password: str) -> set[str]:
    """Every run of MIN_PIECE characters, one a letter at least, of every spelling of
    ``password``.

    A run of digits and breakers alone ("2541" of "%41" percent-encoded) turns up by chance
    in a report (a socket's port was 42541). No spelling of PASSWORDS has more than five
    characters in a row without a letter, so a leak of six characters or more still shows.
    """
    runs = {
        s[i : i + MIN_PIECE] for s in spellings(password) for i in range(len(s) - MIN_PIECE + 1)
    }
    return {piece for piece in runs if any(c.isalpha() for c in piece)}


@dataclass
class Target:
    """Where to connect and as whom; ``socket_dir`` None: a server that is not there."""

    server: LocalServer
    role: str
    dbname: str
    password: str
    tmp: Path
    down: bool = False

    @property
    def host(self) -> str:
        return str(self.tmp / "no-server") if self.down else str(self.server.socket_dir)


# A way of giving the password: (DSN, extra environment) for a target, with the password
# written in it as ``password`` (the right one or not) and, when ``malformed``, written so
# that it breaks the DSN's syntax.
Way = Callable[[Target, bool], tuple[str | None, dict[str, str]]]


def _uri(t: Target, malformed: bool) -> tuple[str | None, dict[str, str]]:
    # An unencoded password: every breaker in it cuts or bends the URI.
    secret = t.password if malformed else quote(t.password, safe="")
    where = f"host={quote(t.host, safe='')}&port={t.server.port}"
    return f"postgresql://{t.role}:{secret}@/{t.dbname}?{where}", {}


def _keywords(t: Target, malformed: bool) -> tuple[str | None, dict[str, str]]:
    base = f"host={_keyword(t.host)} port={t.server.port} user={t.role} dbname={t.dbname}"
    # An opening quote that is never closed.
    secret = "'" + t.password.replace("'", "") if malformed else _keyword(t.password)
    return f"{base} password={secret}", {}


def _env_password(t: Target, malformed: bool) -> tuple[str | None, dict[str, str]]:
    base = f"host={_keyword(t.host)} port={t.server.port} user={t.role} dbname={t.dbname}"
    return base, {"PGPASSWORD": t.password}


def _pgpass_file(t: Target, malformed: bool) -> tuple[str | None, dict[str, str]]:
    path = t.tmp / "pgpass"
    path.write_text(f"*:*:*:{t.role}:{_pgpass(t.password)}\n")
    path.chmod(0o600)
    base = f"host={_keyword(t.host)} port={t.server.port} user={t.role} dbname={t.dbname}"
    return base, {"PGPASSFILE": str(path)}


def _service_file(t: Target, malformed: bool) -> tuple[str | None, dict[str, str]]:
    path = t.tmp / "pg_service.conf"
    path.write_text(
        f"[queues]\nhost={t.host}\nport={t.server.port}\nuser={t.role}\n"
        f"dbname={t.dbname}\npassword={t.password}\n"
    )
    # Given by name in the DSN, or by PGSERVICE with no DSN at all.
    return None, {"PGSERVICEFILE": str(path), "PGSERVICE": "queues"}


WAYS: dict[str, Way] = {
    "uri": _uri,
    "keywords": _keywords,
    "PGPASSWORD": _env_password,
    "pgpass": _pgpass_file,
    "service-file": _service_file,
}
MALFORMABLE = ("uri", "keywords")


def _env(extra: dict[str, str]) -> dict[str, str]:
    drop = (*ENV_VARIABLES, "PGPASSWORD", "PGPASSFILE", "PGSERVICE", "PGSERVICEFILE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PG")}
    # No ~/.pgpass or ~/.pg_service.conf of the machine's user gives the password instead.
    env["HOME"] = extra.pop("HOME")
    return env | extra


@pytest.fixture(scope="session")
def password_group(pg_server: LocalServer) -> Iterator[LocalServer]:
    """The server with GROUP's members required to give a password (scram-sha-256)."""
    admin = TestDB("postgres", pg_server)
    admin.execute(f"CREATE ROLE {GROUP} NOLOGIN")
    hba = Path(str(admin.execute("SHOW hba_file")[0][0]))
    before = hba.read_text()
    hba.write_text(f"{HBA_LINE}\n{before}")
    try:
        admin.execute("SELECT pg_reload_conf()")
        yield pg_server
    finally:
        hba.write_text(before)
        admin.execute("SELECT pg_reload_conf()")
        admin.execute(f"DROP ROLE {GROUP}")


def _refused_without_password(server: LocalServer, role: str, dbname: str) -> bool:
    try:
        psycopg.connect(server.dsn(dbname, role), connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        return "password" in str(exc)
    return False


@pytest.fixture(params=list(PASSWORDS), ids=list(PASSWORDS))
def secret_role(
    request: pytest.FixtureRequest, password_group: LocalServer, db: TestDB
) -> Iterator[tuple[str, str]]:
    """A role of GROUP in ``db`` with one of PASSWORDS, and a queue for it to look at."""
    password = PASSWORDS[request.param]
    role = f"sec_{db.name}"
    with db.connect() as conn:
        conn.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}, pg_monitor PASSWORD {}").format(
                psycopg.sql.Identifier(role),
                psycopg.sql.Identifier(GROUP),
                psycopg.sql.Literal(password),
            )
        )
    db.execute(
        "CREATE TABLE jobs (id bigserial PRIMARY KEY, queue text NOT NULL, payload jsonb,"
        " run_at timestamptz NOT NULL DEFAULT now(), state text NOT NULL DEFAULT 'ready');"
        "CREATE INDEX ON jobs (queue, run_at) WHERE state = 'ready';"
        "INSERT INTO jobs (queue) SELECT 'q' || (i % 3) FROM generate_series(1, 100) i;"
        f"GRANT SELECT ON jobs TO {role}"
    )
    # The reload is asynchronous: wait until the server asks this role for its password.
    deadline = time.monotonic() + 10
    while not _refused_without_password(db.server, role, db.name):
        assert time.monotonic() < deadline, "the server still lets the role in without password"
        time.sleep(0.1)
    try:
        yield role, password
    finally:
        db.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def assert_holds_no_piece(
    password: str, run: Run, files: list[Path], what: str, ours: tuple[str, ...]
) -> None:
    """``ours``: text the test itself gave in the DSN or arguments (paths, a port); blanked
    before the search, since a percent-encoded path can share a piece with a password by
    chance ("sec/" and "c/F" both encode to "c%2F")."""
    texts = {"stdout": run.stdout, "stderr": run.stderr}
    texts |= {f.name: f.read_text(errors="replace") for f in files if f.is_file()}
    bad = "Q" + password[::-1]  # the wrong password, itself a secret
    spelt = {form for text in ours for form in (text, quote(text, safe=""))}
    for name, text in texts.items():
        for given in sorted(spelt, key=len, reverse=True):
            text = text.replace(given, "\0")
        found = sorted(p for p in pieces(password) | pieces(bad) if p in text)
        assert not found, f"{what}: {name} holds {found}:\n{text[:2000]}"
    assert "Traceback" not in run.stderr, (what, run.stderr)


@pytest.mark.parametrize("way", list(WAYS))
def test_no_output_holds_a_piece_of_the_password(
    way: str, secret_role: tuple[str, str], db: TestDB, tmp_path: Path
) -> None:
    role, password = secret_role
    give = WAYS[way]
    home = tmp_path / "home"
    home.mkdir()

    def run(command: str, *args: str, **change: object) -> Run:
        malformed = bool(change.pop("malformed", False))
        fields = {"server": db.server, "role": role, "dbname": db.name, "password": password}
        target = Target(**(fields | change), tmp=tmp_path)  # type: ignore[arg-type]
        dsn, extra = give(target, malformed)
        env = _env({"HOME": str(home), **extra})
        return qadvisor(command, *([dsn] if dsn else []), *args, env=env, timeout=180)

    out = tmp_path / "out"
    out.mkdir()
    reports = [out / f"report.{fmt}" for fmt in FORMATS]
    baseline, snapshot = out / "baseline.json", out / "snapshot.json"
    written = [*reports, baseline, snapshot]

    outputs = [f"{fmt}:{path}" for fmt, path in zip(FORMATS, reports, strict=True)]
    ok = run(
        "check",
        *(a for output in outputs for a in ("--output", output)),
        "--write-baseline",
        str(baseline),
        "--fail-on",
        "never",
    )
    assert ok.rc == 0 and "public.jobs" in ok.stdout, (ok.stdout, ok.stderr)
    snap = run("snapshot", "-o", str(snapshot))
    assert snap.rc == 0, snap.stderr
    assert all(f.stat().st_size > 0 for f in written)
    ours = (str(tmp_path), str(db.server.socket_dir), str(db.server.port))
    for result in (ok, snap):
        assert_holds_no_piece(password, result, written, f"{way}: successful run", ours)

    failing: dict[str, dict[str, object]] = {
        "wrong password": {"password": "Q" + password[::-1]},
        "wrong database": {"dbname": "no_such_db"},
        "server down": {"down": True},
    }
    if way in MALFORMABLE:
        failing["malformed"] = {"malformed": True}
    # check and snapshot share the connection and its messages: each failure is run once,
    # with check (its report, had one been written, would be in report.json).
    for what, change in failing.items():
        reports[0].unlink(missing_ok=True)
        failed = run("check", "--format", "json", "--output", f"json:{reports[0]}",
                     "--connect-timeout", "3", **change)  # fmt: skip
        assert_holds_no_piece(password, failed, reports[:1], f"{way}, {what}", ours)
        if what != "malformed":
            # Could not connect: exit 3, no report.
            assert failed.rc == 3 and not reports[0].exists(), (what, failed.stdout, failed.stderr)
            assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
