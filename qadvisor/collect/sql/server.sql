-- Server, database and the role qadvisor runs as; whether it may read other roles' statement
-- texts and session details (pg_read_all_stats, part of pg_monitor); whether it is a standby
-- (in recovery: its activity counters and pg_stat_statements are its own, not the primary's);
-- the clock, and when this database's counters were last reset, for rates since then; which
-- database this is and when the server started, so a later run (--history) knows a snapshot
-- of another database or one from before a restart (the cluster's identifier is cluster.sql).
SELECT current_setting('server_version') AS version,
       current_setting('server_version_num')::int AS version_num,
       current_database() AS database,
       current_user AS "user",
       current_setting('search_path') AS search_path,
       coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) AS is_superuser,
       pg_has_role('pg_read_all_stats', 'USAGE') AS reads_all_stats,
       pg_is_in_recovery() AS in_recovery,
       now() AS collected_at,
       (SELECT d.stats_reset FROM pg_stat_database d
         WHERE d.datname = current_database()) AS stats_reset,
       (SELECT d.oid::bigint FROM pg_database d
         WHERE d.datname = current_database()) AS database_oid,
       pg_postmaster_start_time() AS started_at
