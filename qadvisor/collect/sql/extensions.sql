-- Installed extensions qadvisor can use, with the schema each lives in.
SELECT e.extname AS name, n.nspname AS schema, e.extversion AS version
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname IN ('pg_stat_statements', 'pgstattuple')
