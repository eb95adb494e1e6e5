-- Server, database and the role qadvisor runs as.
SELECT current_setting('server_version') AS version,
       current_setting('server_version_num')::int AS version_num,
       current_database() AS database,
       current_user AS "user",
       current_setting('search_path') AS search_path,
       coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) AS is_superuser
