-- Sessions of this database that hold the xmin horizon but whose details this role may not
-- see: pg_stat_activity shows every session's backend_xmin and backend_xid, but its
-- backend_type, state and xact_start only to the session's own role (or a role with its
-- privileges) and to pg_read_all_stats. horizon.sql cannot judge such a session.
SELECT count(*)::int AS sessions, current_user::text AS role
  FROM pg_stat_activity a
 WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
   AND a.backend_type IS NULL
   AND a.datname = current_database()
   AND a.pid <> pg_backend_pid()
