"""What a DBA signs: a file qadvisor writes never replaces what is at its path, a failed write
is an error, and bad input is one line (that no output holds a password: test_secrets.py)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from tests.conftest import TestDB
from tests.helpers import qadvisor


def _is_dev_full() -> bool:
    st = os.stat("/dev/full")
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 7


@pytest.fixture
def dev_full() -> object:
    """/dev/full, put back as the device if a run replaced it (the bug these tests catch)."""
    assert _is_dev_full()
    yield "/dev/full"
    if not _is_dev_full():
        os.unlink("/dev/full")
        os.mknod("/dev/full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--output", "json:/dev/full"),
        ("check", "--write-baseline", "/dev/full"),
        ("snapshot", "-o", "/dev/full"),
    ],
    ids=["output", "write-baseline", "snapshot"],
)
def test_a_device_is_written_into_and_a_failed_write_is_exit_2(
    db: TestDB, dev_full: str, args: tuple[str, ...]
) -> None:
    command, *rest = args
    run = qadvisor(command, db.dsn, *rest)
    assert run.rc == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        "qadvisor: error: cannot write /dev/full: No space left on device"
    ]
    assert _is_dev_full()  # still the device, not a regular file that replaced it


def test_a_symlink_is_written_through_and_stays_a_link(db: TestDB, tmp_path: Path) -> None:
    target = tmp_path / "reports" / "qadvisor.json"
    target.parent.mkdir()
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    run = qadvisor("check", db.dsn, "--output", f"json:{link}")
    assert run.rc in (0, 1), run.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("{")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the file it replaced keeps its mode
    assert [p.name for p in target.parent.iterdir()] == ["qadvisor.json"]  # no temporary left


def test_a_fifo_reader_gets_the_report(db: TestDB, tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    run = qadvisor("check", db.dsn, "--output", f"sarif:{fifo}")
    reader.join(timeout=30)
    assert run.rc in (0, 1), run.stderr
    assert got and '"version": "2.1.0"' in got[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dev_stdout_is_the_process_stdout(db: TestDB) -> None:
    run = qadvisor("check", db.dsn, "--output", "json:/dev/stdout", "--format", "markdown")
    assert run.rc in (0, 1), run.stderr
    assert '"schema_version": 1' in run.stdout and "# qadvisor" in run.stdout
    assert os.path.islink("/dev/stdout")


def test_a_file_that_cannot_be_replaced_is_one_line_not_a_traceback(db: TestDB) -> None:
    run = qadvisor("check", db.dsn, "--output", "json:/proc/version")
    assert run.rc == 2 and "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("qadvisor: error: ") and "/proc/version" in line


def test_two_outputs_to_one_file_are_refused(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    link = tmp_path / "same.json"
    link.symlink_to(report)
    for args in (
        ("--output", f"json:{report}", "--write-baseline", str(report)),
        ("--output", f"json:{link}", "--write-baseline", str(report)),
        ("--output", f"json:{report}", "--output", f"sarif:{link}"),
    ):
        run = qadvisor("check", "host=/nonexistent", *args)
        assert (run.rc == 2 and "same file" in run.stderr) or "given twice" in run.stderr, args
    report.write_text('{"qadvisor_baseline": 1}')
    run = qadvisor("check", "host=/nonexistent", "--output", f"json:{link}", "--baseline",
                   str(report))  # fmt: skip
    assert run.rc == 2 and "--baseline file" in run.stderr


FIXTURE = Path(__file__).parent / "fixtures" / "snapshot-f24dd57.json"


def _broken_snapshot(tmp_path: Path, change: object) -> Path:
    import json

    data = json.loads(FIXTURE.read_text())
    change(data)  # type: ignore[operator]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("config", [False, True], ids=["plain", "with-config"])
@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["tables"][0].update(reltuples="many"),
         "Table.reltuples: expected a number, not \"many\""),
        (lambda d: d["tables"][0].update(relpages=True), "Table.relpages: expected an integer"),
        (lambda d: [d["queues"][0].pop(k) for k in ("schema", "table")],
         "Queue lacks schema, table"),
    ],
    ids=["a-string-for-a-number", "a-boolean-for-an-integer", "missing-fields"],
)  # fmt: skip
def test_a_snapshot_with_wrong_values_is_one_line_naming_the_field(
    tmp_path: Path, change: object, said: str, config: bool
) -> None:
    path = _broken_snapshot(tmp_path, change)
    args = ["check", "--snapshot", str(path)]
    if config:
        cfg = tmp_path / "qadvisor.toml"
        cfg.write_text("[options.QA201]\nmin_ratio = 2\n")
        args += ["--config", str(cfg)]
    run = qadvisor(*args)
    assert run.rc == 2 and "Traceback" not in run.stderr, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert "is not a qadvisor snapshot" in line and said in line, line


def test_a_query_file_is_read_up_to_its_bound(tmp_path: Path) -> None:
    from qadvisor.settings.resolve import MAX_QUERY_FILE_BYTES

    big = tmp_path / "big.sql"
    big.write_text("SELECT 1;\n" * (MAX_QUERY_FILE_BYTES // 10 + 1))
    for path in (big, Path("/dev/zero")):
        run = qadvisor("check", "host=/nonexistent", "--query-file", str(path), timeout=20)
        assert run.rc == 2 and "larger than 256 KiB" in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1


def test_dev_stdout_redirected_to_a_file_gets_both_reports_in_order(
    db: TestDB, tmp_path: Path
) -> None:
    import subprocess
    import sys

    out = tmp_path / "out.txt"
    out.write_text("kept line\n")
    with out.open("a") as stdout:
        proc = subprocess.run(
            [sys.executable, "-m", "qadvisor", "check", db.dsn, "--format", "markdown",
             "--output", "json:/dev/stdout"],
            stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    text = out.read_text()
    # Nothing truncated, nothing written over: the line before, the JSON, then the report.
    assert text.startswith("kept line\n{") and text.index('"schema_version"') < text.index(
        "# qadvisor"
    )


@pytest.mark.parametrize("option", ["--config", "--snapshot"])
def test_a_file_that_never_ends_is_refused_at_its_bound(option: str) -> None:
    run = qadvisor("check", option, "/dev/zero", timeout=30)
    assert run.rc == 2 and "larger than" in run.stderr and "Traceback" not in run.stderr


def test_a_block_device_is_never_written(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    os.mknod(disk, 0o600 | stat.S_IFBLK, os.makedev(7, 250))
    run = qadvisor("check", "host=/nonexistent", "--output", f"json:{disk}")
    assert run.rc == 2 and "block device" in run.stderr
