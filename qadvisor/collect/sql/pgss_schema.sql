-- The schema pg_stat_statements is installed in (no row: not installed in this database), its
-- version, and whether its pg_stat_statements_info view is there (version 1.9 and later:
-- PostgreSQL 14, unless the extension was left at an older version by an upgrade).
SELECT n.nspname AS schema,
       e.extversion AS version,
       to_regclass(format('%I.pg_stat_statements_info', n.nspname)) IS NOT NULL AS has_info
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pg_stat_statements'
