-- The rotation table of a round-robin dequeue: its size and its first %(limit)s tenants, to
-- be compared with the live tenants already counted (when no per-tenant index would make a
-- probe per row cheap). Formatted with psycopg.sql: {rotation}, {rotation_tenant}.
-- An alias names qadvisor: pg_stat_statements records this text, and stakeholders.sql
-- leaves out what names qadvisor, so a later read does not take it for the application's.
SELECT n.nspname AS schema, c.relname AS table, c.reltuples::float8 AS reltuples,
       NULL::bigint AS probed, NULL::bigint AS idle,
       ARRAY(SELECT qadvisor_rotation.{rotation_tenant}::text FROM {rotation} qadvisor_rotation LIMIT %(limit)s) AS tenants
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = %(rotation_oid)s::oid
