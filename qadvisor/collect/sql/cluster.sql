-- The cluster's system identifier (set by initdb, kept by its copies and standbys): a later run
-- with --history measures rates only against snapshots of this cluster. Read apart from
-- server.sql: pg_control_system() reads a file, and a failure to read it costs this fact alone.
SELECT system_identifier::text AS system_identifier FROM pg_control_system()
