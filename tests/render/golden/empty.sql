-- qadvisor 0.0.0-test: the fixes for database app on PostgreSQL 18.6.
-- 0 findings with a fix: 0 statements to run as printed, 0 steps commented out.
-- Read it before you run it. Run it with psql, stopping at the first error: psql -v ON_ERROR_STOP=1
-- -f FILE "$DSN". Never as one transaction (psql --single-transaction): CREATE INDEX CONCURRENTLY
-- cannot run in a transaction block. Statements that are commented out are for you to judge:
-- uncomment one once its reason is settled.
-- Each statement waits at most 5s for its lock (5s is a common choice, not a measure of this
-- database: set your own). A DDL that waited longer behind a long transaction would hold every
-- claim queued behind it. A statement that timed out can run again; a CREATE INDEX CONCURRENTLY
-- that did leaves an INVALID index: drop it (DROP INDEX CONCURRENTLY) first.
SET lock_timeout = '5s';

-- No finding has a fix.
