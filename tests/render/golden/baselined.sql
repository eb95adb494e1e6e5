-- qadvisor 0.0.0-test: the fixes for database app on PostgreSQL 18.6.
-- 3 findings with a fix: 4 statements to run as printed, 0 steps commented out.
-- 1 check could not judge any queue (the whole database): QA301.
-- 2 checks could not judge public.jobs: QA201, QA102.
-- 2 checks could not judge public.mail: QA201, QA101.
-- What those checks could not see has no fix here.
-- Read it before you run it. Run it with psql, stopping at the first error: psql -v ON_ERROR_STOP=1
-- -f FILE "$DSN". Never as one transaction (psql --single-transaction): CREATE INDEX CONCURRENTLY
-- cannot run in a transaction block. Statements that are commented out are for you to judge:
-- uncomment one once its reason is settled.
-- Each statement waits at most 5s for its lock (5s is a common choice, not a measure of this
-- database: set your own). A DDL that waited longer behind a long transaction would hold every
-- claim queued behind it. A statement that timed out can run again; a CREATE INDEX CONCURRENTLY
-- that did leaves an INVALID index: drop it (DROP INDEX CONCURRENTLY) first.
SET lock_timeout = '5s';

-- QA203 queue-autovacuum-disabled: public.jobs (critical)
-- Autovacuum is off for public.jobs: 1,753,949 dead tuples & counting <fast>.
-- migration: SHARE UPDATE EXCLUSIVE lock
ALTER TABLE public.jobs RESET (autovacuum_enabled);
-- Takes a SHARE UPDATE EXCLUSIVE lock: it does not block reads or writes but waits for a running
-- VACUUM or ANALYZE of the table; set a lock_timeout.

-- QA101 archive-bloated-index: public.jobs_status_created_at_idx (warning, in the baseline)
-- Index public.jobs_status_created_at_idx is 310.4 MB for 5,000 live rows (*not* a typo | really).
-- migration: SHARE UPDATE EXCLUSIVE lock, outside a transaction block
CREATE INDEX CONCURRENTLY jobs_pending_created_at_idx
    ON public.jobs (created_at) WHERE status = 'pending';
-- CREATE INDEX CONCURRENTLY cannot run inside a transaction block: run it on its own. A failed
-- build leaves an INVALID index: drop it (DROP INDEX CONCURRENTLY) and run the CREATE again. It
-- takes a SHARE UPDATE EXCLUSIVE lock: reads and writes go on, and it waits for transactions that
-- started before it.
-- migration: SHARE UPDATE EXCLUSIVE lock, outside a transaction block
DROP INDEX CONCURRENTLY public.jobs_status_created_at_idx;
-- DROP INDEX CONCURRENTLY cannot run inside a transaction block: run it on its own. It takes a
-- SHARE UPDATE EXCLUSIVE lock and waits for transactions using the index to end.
-- The dequeue query must say status = 'pending' with a literal.

-- QA201 archive-scaled-vacuum-threshold: Odd Schema.we|rd`jobs (warning, in the baseline)
-- - Autovacuum of "Odd Schema"."we|rd`jobs" waits for ~2 M dead tuples.
-- migration: lock not stated
ALTER TABLE "Odd Schema"."we|rd`jobs" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000);
-- Takes a SHARE UPDATE EXCLUSIVE lock.
