-- Server, database and the role qadvisor runs as; whether it may read other roles' statement
-- texts and session details (pg_read_all_stats, part of pg_monitor); whether it is a standby
-- (in recovery: its activity counters and pg_stat_statements are its own, not the primary's).
SELECT current_setting('server_version') AS version,
       current_setting('server_version_num')::int AS version_num,
       current_database() AS database,
       current_user AS "user",
       current_setting('search_path') AS search_path,
       coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) AS is_superuser,
       pg_has_role('pg_read_all_stats', 'USAGE') AS reads_all_stats,
       pg_is_in_recovery() AS in_recovery
