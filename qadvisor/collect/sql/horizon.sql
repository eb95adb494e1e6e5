-- What holds back the xmin horizon of this database: only these keep VACUUM from removing
-- dead queue rows (transactions in other databases do not, since PostgreSQL 14).
SELECT * FROM (
    -- A snapshot (backend_xmin) or a transaction that wrote (backend_xid) both hold it.
    SELECT 'transaction' AS kind, a.pid::text AS name,
           greatest(age(a.backend_xmin), age(a.backend_xid))::bigint AS xmin_age,
           extract(epoch FROM now() - a.xact_start)::float8 AS age_s, a.state,
           a.application_name, a.usename::text AS "user"
      FROM pg_stat_activity a
     WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
       AND a.backend_type = 'client backend'
       AND a.datname = current_database()
       AND a.pid <> pg_backend_pid()
    UNION ALL
    SELECT 'prepared transaction', p.gid, age(p.transaction)::bigint,
           extract(epoch FROM now() - p.prepared)::float8, 'prepared', NULL, p.owner::text
      FROM pg_prepared_xacts p
     WHERE p.database = current_database()
    UNION ALL
    SELECT 'replication slot', s.slot_name::text, age(s.xmin)::bigint, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, NULL, NULL
      FROM pg_replication_slots s
     WHERE s.xmin IS NOT NULL
    UNION ALL
    SELECT 'standby', coalesce(r.application_name, r.pid::text), age(r.backend_xmin)::bigint,
           NULL, r.state, r.application_name, r.usename::text
      FROM pg_stat_replication r
     WHERE r.backend_xmin IS NOT NULL
) h
ORDER BY xmin_age DESC NULLS LAST, name
LIMIT 50
