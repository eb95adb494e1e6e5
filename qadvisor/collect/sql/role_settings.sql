-- Settings pinned with ALTER DATABASE / ALTER ROLE that apply in this database.
SELECT d.datname AS database, r.rolname AS role, cfg
  FROM pg_db_role_setting s
  LEFT JOIN pg_database d ON d.oid = s.setdatabase
  LEFT JOIN pg_roles r ON r.oid = s.setrole
 CROSS JOIN LATERAL unnest(s.setconfig) AS cfg
 WHERE s.setdatabase = 0 OR d.datname = current_database()
 ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3
