-- What this role may do with the given tables, checked by OID: has_*_privilege by OID needs
-- no USAGE on the schema (a schema-qualified name would). pg_stats shows a column only when
-- has_column_privilege(..., 'SELECT') holds, so readable_columns is also what pg_stats shows.
SELECT c.oid AS relid, n.nspname AS schema, c.relname AS table,
       has_schema_privilege(c.relnamespace, 'USAGE') AS schema_usage,
       has_any_column_privilege(c.oid, 'SELECT') AS any_select,
       has_any_column_privilege(c.oid, 'UPDATE') AS any_update,
       ARRAY(SELECT a.attname::text FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND has_column_privilege(c.oid, a.attnum, 'SELECT')
              ORDER BY a.attnum) AS readable_columns,
       ARRAY(SELECT a.attname::text FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
              ORDER BY a.attnum) AS columns
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = ANY(%(relids)s::oid[])
 ORDER BY 1
