"""Untrusted input never ends in a traceback: statement text (a --query, a --query-file, what
pg_stat_statements recorded, a function body), a snapshot file and a config file each give a
result or the one error their reader documents, in bounded time (hypothesis properties).

The examples are derandomized, so a run is the same on every machine and CI is not flaky;
``QADVISOR_FUZZ=N`` runs N random examples per property instead, to look for new ones. An
input that once broke a reader is kept as an ``@example`` of its property.
"""

from __future__ import annotations

import contextlib
import json
import os
import string
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from qadvisor import cli
from qadvisor.engine import SnapshotFileError, load_snapshot
from qadvisor.errors import InputError
from qadvisor.settings.resolve import Flags, resolve
from qadvisor.sql import dequeue, plpgsql, recorded_statements
from qadvisor.sql.function_claims import FunctionClaim

FIXTURE = Path(__file__).parent / "fixtures" / "snapshot-f24dd57.json"

_RANDOM = int(os.environ.get("QADVISOR_FUZZ", "0") or 0)
# A per-example bound generous enough for two shared cores (the slowest examples, 120 levels
# of nesting through every reader, take about a second); past it is as much a bug as a
# traceback: sqlglot once took hours over 20 levels of ARRAY[...].
FUZZ = settings(
    max_examples=_RANDOM or 200,
    deadline=5000,
    derandomize=not _RANDOM,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- SQL-shaped text ------------------------------------------------------------------

_TABLES = ["jobs", "app.jobs", '"Jobs"', 'public."job s"', "queue_jobs q", "jobs AS j", "t"]
_COLUMNS = ["id", "status", "run_at", "queue", "priority", '"State"', "j.id", "q.queue", "*"]
_VALUES = ["$1", "$2", "$10", "'ready'", "'it''s'", "1", "-2.5", "now()", "NULL", "true",
           "$1::text", "ARRAY[$1, $2]", "$$x; y$$", "$tag$ a ' b $tag$", "E'\\n'",
           "interval '5 minutes'", "current_setting('x')", "(SELECT 1)",
           "'{a,b}'::text[]"]  # fmt: skip
_OPS = ["=", "<>", "<", "<=", ">", ">=", "IS", "IS NOT", "IN", "= ANY", "LIKE", "!=", "@>"]
_LOCKS = ["FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE", ""]
_WAITS = ["SKIP LOCKED", "NOWAIT", "", "OF jobs SKIP LOCKED", "OF j, q"]
_NOISE = ["/* c */", "-- line\n", "/* /* nested */ */", ";", "'", '"', "$", "$$", "(", ")",
          "::", ",", "\n", "\\", "FOR UPDATE", "SKIP LOCKED", "WITH", "LATERAL",
          "RETURNING"]  # fmt: skip


def _pick(items: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(items)


def _condition() -> st.SearchStrategy[str]:
    leaf = st.builds(
        lambda c, o, v: f"{c} {o} ({v})" if o in ("IN", "= ANY") else f"{c} {o} {v}",
        _pick(_COLUMNS),
        _pick(_OPS),
        _pick(_VALUES),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"({a} AND {b})", inner, inner),
            st.builds(lambda a, b: f"{a} OR {b}", inner, inner),
            st.builds(lambda a: f"NOT ({a})", inner),
            st.builds(lambda a: f"EXISTS (SELECT 1 FROM jobs x WHERE {a})", inner),
        ),
        max_leaves=8,
    )


@st.composite
def _select(draw: st.DrawFn) -> str:
    columns = ", ".join(draw(st.lists(_pick(_COLUMNS), min_size=1, max_size=3)))
    where = f" WHERE {draw(_condition())}" if draw(st.booleans()) else ""
    order = f" ORDER BY {draw(_pick(_COLUMNS))}" if draw(st.booleans()) else ""
    limit = draw(_pick(["", " LIMIT 1", " LIMIT $1", " LIMIT 10 OFFSET 2", " LIMIT ALL"]))
    lock = draw(_pick(_LOCKS))
    wait = f" {draw(_pick(_WAITS))}" if lock else ""
    return f"SELECT {columns} FROM {draw(_pick(_TABLES))}{where}{order}{limit} {lock}{wait}"


@st.composite
def _statement(draw: st.DrawFn) -> str:
    inner = draw(_select())
    shape = draw(st.integers(0, 6))
    if shape == 1:
        text = f"UPDATE jobs SET status = 'running' WHERE id IN ({inner}) RETURNING *"
    elif shape == 2:
        text = (f"WITH next AS ({inner}) UPDATE jobs SET status = $1 FROM next "
                "WHERE jobs.id = next.id RETURNING jobs.*")  # fmt: skip
    elif shape == 3:
        text = f"DELETE FROM jobs WHERE id = ({inner}) RETURNING id, payload"
    elif shape == 4:
        text = f"SELECT * FROM (SELECT DISTINCT queue FROM jobs) qs, LATERAL ({inner}) l"
    elif shape == 5:
        text = f"WITH RECURSIVE r AS ({inner} UNION ALL SELECT * FROM r) SELECT * FROM r"
    else:
        text = inner
    depth = draw(st.integers(0, 3)) ** 3  # mostly shallow, sometimes 27 levels deep
    text = "(" * depth + text + ")" * depth
    # Edits: a fragment inserted, a slice cut out, so half-valid text reaches the error paths.
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(_pick(_NOISE)) + text[at:]
        else:
            text = text[:at] + text[at + draw(st.integers(1, 12)) :]
    return text


SQL = st.one_of(st.text(max_size=200), st.text(string.printable, max_size=120), _statement())
# Nesting that sqlglot parses by recursion: parentheses, subqueries, NOT, CASE, ARRAY.
_NESTINGS = [
    lambda n: "SELECT " + "(" * n + "1" + ")" * n,
    lambda n: (
        "SELECT id FROM jobs WHERE id IN (SELECT id FROM jobs WHERE " * n
        + "true"
        + ")" * n
        + " FOR UPDATE SKIP LOCKED"
    ),
    lambda n: "SELECT id FROM jobs WHERE " + "NOT " * n + "done FOR UPDATE",
    lambda n: "SELECT " + "CASE WHEN a THEN " * n + "1" + " END" * n + " FROM jobs FOR UPDATE",
    lambda n: "SELECT " + "ARRAY[" * n + "1" + "]" * n + " FROM jobs FOR SHARE",
]

# Every reader of untrusted statement text, with the one error it may raise.
_READERS: list[tuple[str, Callable[[str], object]]] = [
    ("analyse", dequeue.analyse),
    ("fingerprint", dequeue.fingerprint),
    ("split_statements", dequeue.split_statements),
    ("statement_lines", dequeue.statement_lines),
    ("check_plannable", dequeue.check_plannable),
    ("normalise_for_planning", dequeue.normalise_for_planning),
    ("tables_named", dequeue.tables_named),
    ("window_partitions", dequeue.window_partitions),
    ("queue_columns_read", lambda s: dequeue.queue_columns_read(s, "jobs")),
    ("condition_predicates", dequeue.condition_predicates),
    ("condition_columns", dequeue.condition_columns),
    ("literal_value", dequeue.literal_value),
    ("array_values", dequeue.array_values),
]


def _each_reader(text: str) -> None:
    for name, read in _READERS:
        try:
            read(text)
        except dequeue.StatementError:
            pass
        except Exception as exc:  # the property's failure, named
            raise AssertionError(f"{name}({text!r}) raised {type(exc).__name__}: {exc}") from exc


@FUZZ
@given(SQL)
def test_statement_readers_give_a_result_or_a_statement_error(text: str) -> None:
    _each_reader(text)


# Fewer examples: each one nests up to 120 levels and runs every reader into the bound.
@settings(FUZZ, max_examples=_RANDOM or 60)
@given(st.sampled_from(range(len(_NESTINGS))), st.integers(1, 120))
@example(0, 100)  # was a RecursionError from sqlglot
@example(2, 100)  # NOT NOT ... NOT: the same, without a parenthesis
@example(4, 20)  # ARRAY[ARRAY[...]]: sqlglot's parse took hours
def test_deep_nesting_is_a_statement_error_not_a_recursion_error(shape: int, depth: int) -> None:
    _each_reader(_NESTINGS[shape](depth))


@FUZZ
@given(_statement())
def test_an_analysed_claim_can_be_rewritten_or_refused(text: str) -> None:
    # What the fixes do with a claim the analysis took: each rewrite gives text, None (the
    # shape has no such rewrite) or one of the errors it documents.
    try:
        claim = dequeue.analyse(text)
    except dequeue.StatementError:
        return
    if claim is None:
        return
    rewrites: list[Callable[[], object]] = [
        lambda: dequeue.with_skip_locked(text, claim.schema, claim.table),
        lambda: dequeue.with_order_by(text, ["run_at", "id"]),
        lambda: dequeue.with_lock_outside(text, claim.table, ["id"]),
        lambda: dequeue.read_only_scan(text, {}),
        lambda: dequeue.index_probe(text, ["id"], {}),
        lambda: dequeue.with_placeholders(text, claim.parameters),
    ]
    for rewrite in rewrites:
        with contextlib.suppress(dequeue.StatementError, dequeue.KeyNotReturned):
            rewrite()


@FUZZ
@given(SQL, st.sampled_from(["plpgsql", "sql"]), st.booleans())
def test_a_function_body_is_read_or_refused(body: str, language: str, trigger: bool) -> None:
    params = [plpgsql.Variable("queue_name", "parameter", "text", position=1)]
    with contextlib.suppress(plpgsql.BodyError):
        plpgsql.read_body(body, language, params, "claim", trigger=trigger)


@FUZZ
@given(SQL, SQL, st.sampled_from(["SQL statement", "assignment", "RETURN QUERY"]))
def test_a_recorded_statement_is_matched_or_not(recorded: str, written: str, context: str) -> None:
    claim = FunctionClaim(
        function="app.claim", signature="app.claim(text)", line=1, text=written, context=context
    )
    recorded_statements.match_nested(recorded, [claim])
    recorded_statements.called_functions([recorded, written])


# --- snapshot files -------------------------------------------------------------------

_FIXTURE_DATA = json.loads(FIXTURE.read_text())
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=4),
    max_leaves=12,
)  # fmt: skip


@st.composite
def _mutated_snapshot(draw: st.DrawFn) -> object:
    """The fixture snapshot with a few values somewhere inside it replaced, removed or
    added: type-checks and the checks after them see a nearly valid file."""
    data = json.loads(json.dumps(_FIXTURE_DATA))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = data
        while isinstance(node, dict | list) and node and draw(st.integers(0, 3)):
            keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
            key = draw(st.sampled_from(keys))
            if not isinstance(node[key], dict | list) or not node[key]:
                break
            node = node[key]
        if not isinstance(node, dict | list) or not node:
            continue
        keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
        key = draw(st.sampled_from(keys))
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "remove":
            del node[key]
        elif action == "add" and isinstance(node, dict):
            node[draw(st.text(max_size=8))] = draw(JSON)
        else:
            node[key] = draw(JSON)
    return data


SNAPSHOTS = st.one_of(JSON, _mutated_snapshot())


def _written(text: str, suffix: str) -> Path:
    handle, name = tempfile.mkstemp(suffix=suffix, prefix="qadvisor-fuzz-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return Path(name)


@FUZZ
@given(SNAPSHOTS)
def test_a_snapshot_file_is_loaded_or_is_one_snapshot_error(data: object) -> None:
    path = _written(json.dumps(data), ".json")
    try:
        load_snapshot(path)
    except SnapshotFileError as exc:
        assert "\n" not in str(exc)
    finally:
        path.unlink()


def _run_cli(*args: str) -> None:
    """The command line as main() runs it, errors mapped to exit codes: never 4 (a bug)."""
    with CliRunner().isolation(env={"QADVISOR_CONFIG": "", "CI": None}) as (out, err, _):
        code = cli._run(list(args))
        stderr, stdout = err.getvalue().decode(), out.getvalue().decode()
    assert code in (0, 1, 2, 3), (code, stderr, stdout[:300])
    if code in (2, 3):
        assert stderr.startswith("qadvisor: error: "), stderr
        assert len(stderr.strip().splitlines()) == 1, stderr


@settings(FUZZ, max_examples=_RANDOM or 60)
@given(_mutated_snapshot(), st.sampled_from(["text", "json", "markdown", "sarif", "junit", "sql"]))
def test_check_of_a_mutated_snapshot_reports_or_exits_2(data: object, fmt: str) -> None:
    path = _written(json.dumps(data), ".json")
    try:
        _run_cli("check", "--snapshot", str(path), "--format", fmt)
    finally:
        path.unlink()


# --- config files ---------------------------------------------------------------------

_SETTINGS = ["fail_on", "fail_on_skip", "tables", "ignore", "queries", "query_files", "options",
             "statement_timeout", "lock_timeout", "connect_timeout", "run_timeout", "baseline",
             "sarif_anchor", "docs_url", "tool", "qadvisor"]  # fmt: skip
_SCALARS = (
    st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20) | st.sampled_from(["critical", "never", "QA201", "public.jobs",
                                              "https://x.org/", "QA201:public.jobs", "qa999"])
)  # fmt: skip
_TOML_KEYS = st.sampled_from([*_SETTINGS, "QA201", "min_ratio", "x"]) | st.text(max_size=6)
TOML_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(_TOML_KEYS, inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


def _toml_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in '"\\' or ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or 0xD800 <= ord(ch) < 0xE000:
            out.append(f"\\U{ord(ch):08X}" if ord(ch) >= 0xD800 else f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value).replace("inf", "inf")
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


def toml(data: Mapping[str, object]) -> str:
    return "".join(f"{_toml_string(k)} = {_toml_value(v)}\n" for k, v in data.items())


CONFIGS = st.one_of(
    st.dictionaries(st.sampled_from(_SETTINGS), TOML_VALUES, max_size=5).map(toml),
    st.text(max_size=200),
    st.text(string.printable, max_size=200),
)


@FUZZ
@given(CONFIGS, st.sampled_from(["qadvisor.toml", "pyproject.toml"]))
@example('"tool" = []\n', "pyproject.toml")  # was an AttributeError
@example('tool.qadvisor = "x"\n', "pyproject.toml")
def test_a_config_file_resolves_or_is_one_input_error(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="qadvisor-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            resolve(Flags(config=path, snapshot=FIXTURE), env={}, cwd=Path(tmp))
        except InputError as exc:
            assert "\n" not in str(exc).strip(), str(exc)


@settings(FUZZ, max_examples=_RANDOM or 60)
@given(CONFIGS)
def test_check_with_any_config_reports_or_exits_2(text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="qadvisor-fuzz-") as tmp:
        path = Path(tmp) / "qadvisor.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        _run_cli("check", "--snapshot", str(FIXTURE), "--config", str(path))


def test_the_properties_reach_claims() -> None:
    # A strategy that never builds a claim the analysis takes would test the error paths only.
    from hypothesis import find

    once = settings(database=None, derandomize=True)
    claim = find(_statement(), _analysed, settings=once)
    assert "FOR" in claim.upper()


def _analysed(text: str) -> bool:
    try:
        return dequeue.analyse(text) is not None
    except dequeue.StatementError:
        return False
