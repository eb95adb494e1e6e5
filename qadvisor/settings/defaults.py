"""Every setting's default and bounds, written once.

The settings table (``qadvisor.settings.resolve.SETTINGS`` and the Settings fields), the
session qadvisor opens (``qadvisor.collect.connect``), the fleet's run and the command line's
help text read them from here; tests/settings/test_defaults.py holds that none of them writes a
value of this module again. Constants and nothing else: the command line renders its help from
them at startup without loading the rest of qadvisor.
"""

# --fail-on: a warning or worse fails the run.
FAIL_ON = "warning"

# The session's limits, whichever layer sets them. Below 100 ms a statement_timeout cancels
# even the catalog reads of a small database.
STATEMENT_TIMEOUT_MS = 5_000
MIN_STATEMENT_TIMEOUT_MS = 100
LOCK_TIMEOUT_MS = 1_000
MIN_LOCK_TIMEOUT_MS = 1
# Per address tried; a stricter connect_timeout of the DSN or PGCONNECT_TIMEOUT wins.
CONNECT_TIMEOUT_S = 10
MIN_CONNECT_TIMEOUT_S = 1
MIN_RUN_TIMEOUT_S = 1
# The most of each: PostgreSQL takes a timeout up to INT_MAX ms, libpq a connect_timeout up
# to INT_MAX seconds; a run bound past that is no bound a person means.
MAX_TIMEOUT = 2_147_483_647

# How long past statement_timeout qadvisor waits for the server's answer (the server cancels
# the statement at statement_timeout; the margin covers the cancel and the result's transfer).
STATEMENT_MARGIN_S = 5
# The run bound without --run-timeout: BASE_RUN_TIMEOUT_S, plus the connect bound, the --sample
# seconds and PLANNED_STATEMENT_READS statement bounds for each --query/--query-file statement.
BASE_RUN_TIMEOUT_S = 120
PLANNED_STATEMENT_READS = 3

# --sample's range (seconds): a second read sooner measures noise, an hour is a long wait.
SAMPLE_S = (1, 3600)

# Snapshots --history keeps by default: two months of nightly runs.
HISTORY_KEEP = 60

# Databases a fleet checks at once by default: four sessions at a time is a light load on one
# server, and a run of 50 databases on two cores gained little past it (docs/benchmarks.md).
JOBS = 4
MAX_JOBS = 64
