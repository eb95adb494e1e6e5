"""Settings resolved once, at the edge: defaults < config file < ``QADVISOR_*`` environment <
command-line flags.

:func:`resolve` reads every layer, checks every value (types, bounds, ignore patterns and check
options against the installed checks, the --query statements and --query-file files) and
returns one frozen :class:`Settings`; anything wrong is a SettingsError (or ConfigError)
naming where the value came from, and the command exits 2 before it connects. The engine and
the renderers receive the Settings, checks receive their options object, nobody reads the
file, the environment or the command line again.

Most settings override the layer below. Three add up instead: ``ignore`` (file, then
``QADVISOR_IGNORE``, then ``--ignore``), ``queries`` and ``query_files`` (file, then flags).

Where each setting comes from (file key / environment variable / flag); :data:`SETTINGS`
and :data:`IGNORE` are this list as a table, each row read the same way:

- the settings file: QADVISOR_CONFIG / --config
- gate severity: fail_on / QADVISOR_FAIL_ON / --fail-on
- blind-pass gate: fail_on_skip / QADVISOR_FAIL_ON_SKIP / --fail-on-skip (default: on where
  the CI variable is true, as CI services set it)
- queue tables: tables / QADVISOR_TABLES (comma-separated) / --table
- session timeouts: statement_timeout, lock_timeout, connect_timeout, run_timeout /
  QADVISOR_STATEMENT_TIMEOUT, QADVISOR_LOCK_TIMEOUT, QADVISOR_CONNECT_TIMEOUT,
  QADVISOR_RUN_TIMEOUT / --statement-timeout, --lock-timeout, --connect-timeout, --run-timeout
- the accepted findings: baseline / QADVISOR_BASELINE / --baseline (--write-baseline is a
  flag only)
- where SARIF shows findings without a line of their own: sarif_anchor /
  QADVISOR_SARIF_ANCHOR / --sarif-anchor
- the docs' published URL: docs_url / QADVISOR_DOCS_URL / --docs-url
- ignores: ignore / QADVISOR_IGNORE (comma-separated) / --ignore
- the checks to run: select / QADVISOR_SELECT (comma-separated) / --select
- a check's severity: [severity] CODE = "info" / (none) / (none)
- statements: queries, query_files / (none) / --query, --query-file
- report files: (none) / (none) / --output FORMAT:PATH

Paths in the report (SARIF locations) are relative to ``root``, the current directory: in CI,
the checkout of the repository.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

from qadvisor.errors import InputError, TooLarge, read_bounded
from qadvisor.history.store import unusable
from qadvisor.model import InlineIgnore, Location, Severity
from qadvisor.registry import Check, load_checks
from qadvisor.settings import baseline as baseline_file
from qadvisor.settings import inline_ignores
from qadvisor.settings.config import (
    FAIL_ON,
    Config,
    ConfigError,
    check_ignores,
    check_options,
    check_selects,
    check_severities,
    find_config,
)
from qadvisor.settings.defaults import (
    CONNECT_TIMEOUT_S,
    HISTORY_KEEP,
    JOBS,
    LOCK_TIMEOUT_MS,
    MAX_TIMEOUT,
    MIN_CONNECT_TIMEOUT_S,
    MIN_LOCK_TIMEOUT_MS,
    MIN_RUN_TIMEOUT_S,
    MIN_STATEMENT_TIMEOUT_MS,
    SAMPLE_S,
    STATEMENT_TIMEOUT_MS,
)
from qadvisor.settings.defaults import (
    FAIL_ON as DEFAULT_FAIL_ON,
)
from qadvisor.settings.outputs import overwritten_input, same_file, unwritable
from qadvisor.sql import dequeue

FailOn = Literal["critical", "warning", "info", "never"]
# The report formats (qadvisor.render.RENDERERS has one renderer for each).
FORMATS = ("text", "json", "markdown", "sarif", "junit", "html", "openmetrics", "sql")
ENV_PREFIX = "QADVISOR_"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
# Set to true by CI services (GitHub Actions, GitLab CI, CircleCI, Buildkite, ...): there a
# pass that judged nothing is a gate left open, so skips fail it unless a layer says not.
CI_VARIABLE = "CI"


# The most of a --query-file read: parsing is client-side work, bounded like the rest.
MAX_QUERY_FILE_BYTES = 256 * 1024


class SettingsError(InputError, ValueError):
    """A value of the environment or the command line is not one qadvisor accepts."""


@dataclass(frozen=True)
class SessionLimits:
    """The session part of the settings: every session qadvisor opens runs with them."""

    statement_timeout_ms: int = STATEMENT_TIMEOUT_MS
    lock_timeout_ms: int = LOCK_TIMEOUT_MS
    # A stricter connect_timeout of the DSN or PGCONNECT_TIMEOUT wins over it.
    connect_timeout_s: int = CONNECT_TIMEOUT_S
    # None: derived from the others (qadvisor.collect.connect.default_run_timeout_s).
    run_timeout_s: int | None = None


@dataclass(frozen=True)
class Flags:
    """What the command line said; None (or empty) where it said nothing."""

    dsn: str | None = None
    config: Path | None = None
    snapshot: Path | None = None
    tables: Sequence[str] = ()
    sample: float | None = None
    queries: Sequence[str] = ()
    query_files: Sequence[Path] = ()
    analyze: bool = False
    ignore: Sequence[str] = ()
    select: Sequence[str] = ()
    fail_on: str | None = None
    fail_on_skip: bool | None = None
    format: str = "text"
    verbose: bool = False
    command: Sequence[str] = ()  # the command line as run (qadvisor and its arguments)
    statement_timeout: int | None = None
    lock_timeout: int | None = None
    connect_timeout: int | None = None
    run_timeout: int | None = None
    baseline: Path | None = None
    write_baseline: Path | None = None
    outputs: Sequence[str] = ()  # "FORMAT:PATH"
    sarif_anchor: Path | None = None
    docs_url: str | None = None
    history: Path | None = None
    history_keep: int | None = None
    all_databases: bool = False
    dsn_file: Path | None = None
    jobs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything one run needs, resolved and checked."""

    checks: tuple[Check, ...]  # every installed pack's, sorted by code
    dsn: str | None = None  # None: the libpq environment
    snapshot_file: Path | None = None  # check this saved snapshot instead of a server
    tables: tuple[str, ...] = ()  # queue tables named by the user (no discovery)
    sample_seconds: float | None = None
    # (where it came from, its text): --query statements, then each statement of a file.
    queries: tuple[tuple[str, str], ...] = ()
    analyze: bool = False
    ignore: tuple[str, ...] = ()  # codes and finding keys
    # The checks to run: codes or the start of codes (none: every installed check).
    select: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # code -> options object
    # A check's severity set by the config file, in place of its own (code -> severity).
    severities: Mapping[str, Severity] = field(default_factory=dict)
    fail_on: FailOn = "warning"
    fail_on_skip: bool = False
    format: str = "text"
    verbose: bool = False  # the text report lists rejected candidates and left-out statements
    command: tuple[str, ...] = ()  # as run, for the report's header (passwords still in it)
    # With --format text under GitHub Actions: workflow-command annotations after the report.
    github_annotations: bool = False
    limits: SessionLimits = field(default_factory=SessionLimits)
    config_file: Path | None = None  # the file the settings were read from
    baseline: baseline_file.Baseline | None = None  # read and checked
    write_baseline: Path | None = None  # checked writable
    outputs: tuple[tuple[str, Path], ...] = ()  # (format, file), each checked writable
    # The directory paths in the report are relative to (the repository's checkout); where
    # the process runs, not a choice, so two settings that differ only there are equal.
    root: Path = field(default_factory=Path.cwd, compare=False)
    # Where findings without a --query-file line are shown (SARIF): the config file's
    # ``tables`` line, else the sarif_anchor file.
    anchor: Location | None = None
    docs_url: str | None = None
    # ``-- qadvisor: ignore`` comments of the --query-file statements.
    inline_ignores: tuple[InlineIgnore, ...] = ()
    # --history: the directory of earlier snapshots read beside this one, where this run's
    # is saved; and how many snapshots it keeps.
    history_dir: Path | None = None
    history_keep: int = HISTORY_KEEP
    # (the option or file that names it, its path): every file the run reads, which nothing
    # it writes may replace.
    inputs: tuple[tuple[str, Path], ...] = ()
    # A fleet: every database of the DSN's server, or those of a DSN file, each checked with
    # these settings (its own DSN), ``jobs`` of them at once.
    all_databases: bool = False
    dsn_file: Path | None = None
    jobs: int = JOBS

    @property
    def fleet(self) -> bool:
        return self.all_databases or self.dsn_file is not None


def resolve(
    flags: Flags,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    checks: Sequence[Check] | None = None,
) -> Settings:
    """The settings of one run (``env`` defaults to os.environ, ``checks`` to every installed
    pack's); SettingsError, ConfigError or PackError when a value is wrong."""
    environ = os.environ if env is None else env
    installed = tuple(load_checks() if checks is None else checks)
    on_server = flags.snapshot is None
    if not on_server:
        _no_server_flags(flags)
    _check_sample(flags.sample)
    cfg = find_config(flags.config or _path(_name("CONFIG"), _env(environ, "CONFIG")), cwd)
    layers = _Layers(flags, environ, cfg, str(cfg.source) if cfg.source else "the config file")
    ignores = list(layers.every(IGNORE))[::-1]  # they add up: the file's first
    for patterns, where in ignores:
        try:
            check_ignores(patterns, installed)
        except ConfigError as exc:
            raise SettingsError(f"{where} {exc}") from None
    try:
        options = check_options(installed, cfg)
        severities = check_severities(installed, cfg)
    except ConfigError as exc:
        raise ConfigError(f"{layers.file_label}: {exc}") from None
    given = {s: layers.top(s) for s in SETTINGS}
    chosen = given[SELECT]
    if chosen is not None:
        patterns, where = chosen
        try:
            check_selects(patterns, installed)
        except ConfigError as exc:
            raise SettingsError(f"{where} {exc}") from None
    value = {s.key: found[0] if found else s.default for s, found in given.items()}
    if not given[FAIL_ON_SKIP]:
        value["fail_on_skip"] = in_ci(environ)
    limits = SessionLimits(
        statement_timeout_ms=value["statement_timeout"],
        lock_timeout_ms=value["lock_timeout"],
        connect_timeout_s=value["connect_timeout"],
        run_timeout_s=value["run_timeout"],
    )
    root = cwd or Path.cwd()
    outputs = _outputs(flags.outputs)
    write_baseline = flags.write_baseline
    if write_baseline is not None:
        why = unwritable(write_baseline)
        if why:
            raise SettingsError(f"--write-baseline {write_baseline}: cannot write it: {why}")
        clash = next((p for _, p in outputs if same_file(p, write_baseline)), None)
        if clash is not None:
            raise SettingsError(
                f"--write-baseline {write_baseline}: --output {clash} is the same file, and "
                "one would overwrite the other"
            )
    read_from = value["baseline"]
    inputs = _inputs(cfg, flags, read_from, given[SARIF_ANCHOR], on_server)
    for _, path in outputs:
        refuse_overwriting("--output", path, inputs, "a report")
    if write_baseline is not None:
        # Written over the baseline it read, a baseline is brought up to date: that one may.
        others = [(what, path) for what, path in inputs if what != "--baseline"]
        refuse_overwriting("--write-baseline", write_baseline, others, "the baseline")
    if flags.history is not None:
        why = unusable(flags.history)
        if why:
            raise SettingsError(f"--history {flags.history}: cannot keep snapshots there: {why}")
    if flags.history_keep is not None and flags.history is None:
        raise SettingsError("--history-keep: it goes with --history DIR")
    _fleet_flags(flags, read_from, given[BASELINE])
    loaded = _baseline(read_from, write_baseline, root)
    anchor = _anchor(cfg, given[SARIF_ANCHOR], root)
    queries, directives = _queries(cfg, flags, installed, root) if on_server else ((), ())
    return Settings(
        inputs=tuple(inputs),
        checks=installed,
        dsn=flags.dsn,
        snapshot_file=flags.snapshot,
        tables=value["tables"] if on_server else (),
        sample_seconds=flags.sample,
        queries=queries,
        analyze=flags.analyze,
        ignore=tuple(p for patterns, _ in ignores for p in patterns),
        select=value["select"],
        options=options,
        severities=severities,
        fail_on=cast(FailOn, value["fail_on"]),
        fail_on_skip=value["fail_on_skip"],
        format=flags.format,
        verbose=flags.verbose,
        command=tuple(flags.command),
        github_annotations=environ.get("GITHUB_ACTIONS") == "true",
        limits=limits,
        config_file=cfg.source,
        baseline=loaded,
        write_baseline=write_baseline,
        outputs=outputs,
        root=root,
        anchor=anchor,
        docs_url=value["docs_url"],
        inline_ignores=directives,
        history_dir=flags.history,
        history_keep=flags.history_keep or HISTORY_KEEP,
        all_databases=flags.all_databases,
        dsn_file=flags.dsn_file,
        jobs=flags.jobs or JOBS,
    )


def _inputs(
    cfg: Config,
    flags: Flags,
    baseline: Path | None,
    anchor: tuple[Path, str] | None,
    on_server: bool,
) -> list[tuple[str, Path]]:
    """(what names it, path) of each file the run reads (the SARIF anchor too: its line is
    what the report points at)."""
    found: list[tuple[str, Path]] = []
    if cfg.source is not None:
        found.append(("config", cfg.source))
    if flags.snapshot is not None:
        found.append(("--snapshot", flags.snapshot))
    if on_server:
        found += [("--query-file", p) for p in [*cfg.query_files, *flags.query_files]]
    if baseline is not None:
        found.append(("--baseline", baseline))
    if anchor is not None:
        found.append(("--sarif-anchor", anchor[0]))
    return found


def refuse_overwriting(
    flag: str, path: Path, inputs: Sequence[tuple[str, Path]], written: str
) -> None:
    """SettingsError when writing ``path`` would replace a file the run reads: the same file
    by name, through a symlink or as a hard link of it."""
    what = overwritten_input(path, inputs)
    if what is not None:
        raise SettingsError(
            f"{flag} {path}: it is the {what} file, which {written} would overwrite"
        )


def _fleet_flags(flags: Flags, baseline: Path | None, given: tuple[Any, str] | None) -> None:
    """A fleet is named one way, and takes the flags that make sense for many databases."""
    if flags.all_databases and flags.dsn_file is not None:
        raise SettingsError("--all-databases and --dsn-file: give one of them")
    if flags.dsn_file is not None and flags.dsn:
        raise SettingsError(
            "--dsn-file names the databases: it takes no DSN argument (--all-databases DSN "
            "checks every database of the DSN's server)"
        )
    fleet = flags.all_databases or flags.dsn_file is not None
    if not fleet:
        if flags.jobs is not None:
            raise SettingsError("--jobs: it goes with --all-databases or --dsn-file")
        return
    if flags.write_baseline is not None or baseline is not None:
        where = "--write-baseline" if flags.write_baseline is not None else (
            given[1] if given else "--baseline")  # fmt: skip
        raise SettingsError(
            f"{where}: a baseline is of one database, and --all-databases or --dsn-file checks "
            "many; check each database on its own to compare it with its baseline"
        )
    if flags.dsn_file is not None and not flags.dsn_file.is_file():
        raise SettingsError(f"--dsn-file {flags.dsn_file}: no such file")


def _no_server_flags(flags: Flags) -> None:
    """--snapshot checks a saved snapshot: the flags that read a server do not go with it."""
    given = [
        name
        for name, value in (
            ("a DSN", flags.dsn),
            ("--table", flags.tables),
            ("--sample", flags.sample),
            ("--query", flags.queries),
            ("--query-file", flags.query_files),
            ("--analyze", flags.analyze),
            ("--history", flags.history),
            ("--all-databases", flags.all_databases),
            ("--dsn-file", flags.dsn_file),
        )
        if value
    ]
    if given:
        raise SettingsError(
            "--snapshot checks a saved snapshot: it takes no DSN, --table, --sample, "
            "--query, --query-file, --analyze, --history, --all-databases or --dsn-file "
            f"(given: {', '.join(given)})"
        )


def _check_sample(seconds: float | None) -> None:
    low, high = SAMPLE_S
    if seconds is not None and not (math.isfinite(seconds) and low <= seconds <= high):
        raise SettingsError(f"--sample {seconds:g}: must be from {low} to {high} seconds")


def _baseline(
    path: Path | None, write_baseline: Path | None, root: Path
) -> baseline_file.Baseline | None:
    """The baseline read and checked; none when this run writes it the first time (the
    config file names it and --write-baseline creates it)."""
    if path is None:
        return None
    if (
        write_baseline is not None
        and not path.exists()
        and path.resolve() == write_baseline.resolve()
    ):
        return None
    loaded = baseline_file.load(path)
    return replace(loaded, source=repo_path(path, root) or str(path))


def _outputs(specs: Sequence[str]) -> tuple[tuple[str, Path], ...]:
    """--output FORMAT:PATH values, each format known and each file writable, no file twice."""
    out: list[tuple[str, Path]] = []
    for spec in specs:
        fmt, colon, name = spec.partition(":")
        fmt = fmt.strip().lower()
        if not colon or not name:
            raise SettingsError(
                f"--output {spec!r}: expected FORMAT:PATH, e.g. sarif:qadvisor.sarif"
            )
        if fmt not in FORMATS:
            raise SettingsError(f"--output {spec!r}: unknown format {fmt!r} (one of "
                                f"{', '.join(FORMATS)})")  # fmt: skip
        path = Path(name)
        why = unwritable(path)
        if why:
            raise SettingsError(f"--output {spec}: cannot write {path}: {why}")
        if any(same_file(p, path) for _, p in out):
            raise SettingsError(f"--output {spec}: {path} is given twice")
        out.append((fmt, path))
    return tuple(out)


def _anchor(cfg: Config, given: tuple[Path, str] | None, root: Path) -> Location | None:
    """The config file's ``tables`` line when it names the tables, else the sarif_anchor
    file (``given``: the path and the layer it came from)."""
    if cfg.source is not None and cfg.tables_line is not None:
        path = repo_path(cfg.source, root)
        if path is not None:
            return Location(path, cfg.tables_line)
    if given is None:
        return None
    anchor, where = given
    if not anchor.is_file():
        raise SettingsError(f"{where} {anchor}: no such file")
    path = repo_path(anchor, root)
    if path is None:
        raise SettingsError(
            f"{where} {anchor} is outside {root}: run qadvisor from the repository's root "
            "and name a file in it"
        )
    return Location(path, 1)


def repo_path(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root``, "/"-separated; None when it is outside it."""
    try:
        rel = (root / path).resolve().relative_to(root.resolve())
    except ValueError:
        return None
    return rel.as_posix()


def defaults(
    fmt: str = "text",
    env: Mapping[str, str] | None = None,
    checks: Sequence[Check] | None = None,
    command: Sequence[str] = (),
) -> Settings:
    """Every setting at its default, with the installed checks: the demo's settings (it reads
    no config file; its server is its own)."""
    environ = os.environ if env is None else env
    installed = tuple(load_checks() if checks is None else checks)
    annotations = environ.get("GITHUB_ACTIONS") == "true"
    return Settings(
        checks=installed, format=fmt, github_annotations=annotations, command=tuple(command)
    )


def in_ci(environ: Mapping[str, str]) -> bool:
    """Whether the run is under a CI service (the CI variable is true): the default of
    fail_on_skip."""
    return environ.get(CI_VARIABLE, "").strip().lower() in _TRUE


def _name(key: str) -> str:
    return ENV_PREFIX + key


def _env(environ: Mapping[str, str], key: str) -> str | None:
    """The variable's value, stripped; an empty one counts as unset (a CI template that
    leaves it blank means "not set", not "set to nothing")."""
    value = environ.get(_name(key), "").strip()
    return value or None


# How a variable's text becomes a value: (variable, its text) -> the value, or SettingsError
# naming the variable and the text.
def _text(name: str, text: str) -> str:
    return text


def _path(name: str, text: str | None) -> Path | None:
    return Path(text) if text else None


def _list(name: str, text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _bool(name: str, text: str) -> bool:
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise SettingsError(f"{name}={text!r}: must be true or false (or 1, 0, yes, no)")


def _choice(*allowed: str) -> Callable[[str, str], str]:
    def read(name: str, text: str) -> str:
        if text.lower() not in allowed:
            raise SettingsError(f"{name}={text!r}: must be one of {', '.join(allowed)}")
        return text.lower()

    return read


def _whole(unit: str) -> Callable[[str, str], int]:
    def read(name: str, text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise SettingsError(f"{name}={text!r}: must be a whole number of {unit}") from None

    return read


# How any layer's value is checked: (value, where it came from), SettingsError naming it.
def _any(value: Any, where: str) -> None:
    pass


def _between(minimum: int, unit: str) -> Callable[[int, str], None]:
    def check(value: int, where: str) -> None:
        if value < minimum:
            raise SettingsError(f"{where} is {value} {unit}: it must be at least {minimum}")
        if value > MAX_TIMEOUT:
            raise SettingsError(f"{where} is {value} {unit}: it must be at most {MAX_TIMEOUT}")

    return check


def _http_url(value: str, where: str) -> None:
    if not re.match(r"https?://[^/\s]+", value):
        raise SettingsError(f"{where} {value!r}: must be an absolute http(s) URL")


@dataclass(frozen=True)
class Setting:
    """One setting's layers: ``default``, the config file's ``key`` (also the Flags field),
    the variable QADVISOR_ + KEY, ``flag``. ``read`` turns the variable's text into a value;
    ``check`` judges the value of whichever layer it came from."""

    key: str
    flag: str
    read: Callable[[str, str], Any]
    check: Callable[[Any, str], None] = _any
    default: Any = None

    @property
    def variable(self) -> str:
        return _name(self.key.upper())


# Every setting but ignore overrides the layers below it: default < config file <
# environment < flags, the top one that sets it wins (None, "" and () set nothing).
SARIF_ANCHOR = Setting("sarif_anchor", "--sarif-anchor", _path)
BASELINE = Setting("baseline", "--baseline", _path)
# Its default is in_ci()'s, read with the other layers.
FAIL_ON_SKIP = Setting("fail_on_skip", "--fail-on-skip", _bool, default=False)
SELECT = Setting("select", "--select", _list, default=())
SETTINGS = (
    Setting("fail_on", "--fail-on", _choice(*FAIL_ON), default=DEFAULT_FAIL_ON),
    FAIL_ON_SKIP,
    SELECT,
    Setting("tables", "--table", _list, default=()),
    Setting("statement_timeout", "--statement-timeout", _whole("ms"),
            _between(MIN_STATEMENT_TIMEOUT_MS, "ms"), STATEMENT_TIMEOUT_MS),
    Setting("lock_timeout", "--lock-timeout", _whole("ms"), _between(MIN_LOCK_TIMEOUT_MS, "ms"),
            LOCK_TIMEOUT_MS),
    Setting("connect_timeout", "--connect-timeout", _whole("seconds"),
            _between(MIN_CONNECT_TIMEOUT_S, "seconds"), CONNECT_TIMEOUT_S),
    Setting("run_timeout", "--run-timeout", _whole("seconds"),
            _between(MIN_RUN_TIMEOUT_S, "seconds"), None),
    BASELINE,
    SARIF_ANCHOR,
    Setting("docs_url", "--docs-url", _text, _http_url),
)  # fmt: skip
# Ignores add up instead: the file's, then the environment's, then the flags'.
IGNORE = Setting("ignore", "--ignore", _list)
# Every variable resolve() reads (with GITHUB_ACTIONS, which only turns on annotations).
ENV_VARIABLES = (_name("CONFIG"), *(s.variable for s in (*SETTINGS, IGNORE)), CI_VARIABLE)


def _given(setting: Setting, value: Any, where: str) -> Iterator[tuple[Any, str]]:
    """The layer's value, checked, when it sets one."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        value = tuple(value)
    if value is not None and value not in ("", ()):
        setting.check(value, where)
        yield value, where


@dataclass(frozen=True)
class _Layers:
    """The layers above the defaults, read from the top: flags, environment, config file."""

    flags: Flags
    environ: Mapping[str, str]
    cfg: Config
    file_label: str  # how errors name the config file

    def every(self, setting: Setting) -> Iterator[tuple[Any, str]]:
        """(value, where it came from) of each layer that sets it, from the top; a layer is
        read and checked only when the ones above it have been passed over."""
        yield from _given(setting, getattr(self.flags, setting.key), setting.flag)
        text = _env(self.environ, setting.key.upper())
        value = setting.read(setting.variable, text) if text is not None else None
        yield from _given(setting, value, setting.variable)
        where = f"{self.file_label}: {setting.key}"
        yield from _given(setting, getattr(self.cfg, setting.key), where)

    def top(self, setting: Setting) -> tuple[Any, str] | None:
        """The value of the top layer that sets it, and where it came from; None: the
        default."""
        return next(self.every(setting), None)


def _queries(
    cfg: Config, flags: Flags, checks: Sequence[Check], root: Path
) -> tuple[tuple[tuple[str, str], ...], tuple[InlineIgnore, ...]]:
    """(source, text) pairs: each --query (file's first), refused unless it is one plannable
    statement, then every statement of each query file (the file's first), named by its path
    relative to ``root`` when it is inside it (``sql/claim.sql:12``); and the files'
    ``-- qadvisor: ignore`` comments, their codes checked against the installed checks."""
    out: list[tuple[str, str]] = []
    ignores: list[InlineIgnore] = []
    for i, text in enumerate([*cfg.queries, *flags.queries], 1):
        try:
            dequeue.check_plannable(text)
        except dequeue.StatementError as exc:
            raise SettingsError(f"--query {i} refused: {exc}") from None
        out.append((f"--query {i}", text))
    codes = {c.code for c in checks}
    # A file named by the config file and by a flag is read once.
    files = {p.resolve(): p for p in [*cfg.query_files, *flags.query_files]}
    for path in files.values():
        try:
            text = read_bounded(path, MAX_QUERY_FILE_BYTES).decode("utf-8")
        except TooLarge as exc:
            raise SettingsError(
                f"--query-file {path}: {exc}, the most qadvisor reads (a file of the "
                "application's dequeue statements is a few kB)"
            ) from None
        except UnicodeDecodeError:
            raise SettingsError(f"cannot read --query-file {path}: not UTF-8 text") from None
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise SettingsError(f"cannot read --query-file {path}: {reason}") from None
        try:
            statements = dequeue.statement_lines(text)
            found = inline_ignores.directives(text)
        except (dequeue.StatementError, inline_ignores.DirectiveError) as exc:
            raise SettingsError(f"--query-file {path}: {exc}") from None
        label = repo_path(path, root) or str(path)
        out += [(f"{label}:{line}", stmt) for line, stmt in statements]
        for d in found:
            where = f"--query-file {path}:{d.line}"
            if d.statement_line == 0:
                raise SettingsError(
                    f"{where}: 'qadvisor: ignore' applies to no statement (write it on the "
                    "statement's line or directly above it, without a blank line between)"
                )
            unknown = [c for c in d.codes if c not in codes]
            if unknown:
                raise SettingsError(
                    f"{where}: 'qadvisor: ignore' names {unknown[0]!r}, which no check has "
                    "(qadvisor checks lists them)"
                )
            ignores.append(InlineIgnore(f"{label}:{d.statement_line}", d.codes, d.line))
    return tuple(out), tuple(ignores)
