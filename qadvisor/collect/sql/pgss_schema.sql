-- The schema pg_stat_statements is installed in (no row: not installed in this database).
SELECT n.nspname AS schema
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pg_stat_statements'
