-- The rotation table of a round-robin dequeue: its size and how many of its first %(limit)s
-- rows name a tenant with nothing live. Each probe is one descent into the per-tenant partial
-- index: it asks for the smallest live tenant at or after the rotation row's tenant, ordered
-- by the tenant column, which only an index led by that column supplies without a sort. (A
-- plain NOT EXISTS falls into the trap this module reports: with a skewed backlog the
-- planner walks the FIFO index with a filter for each probe.)
-- Formatted with psycopg.sql: {queue}, {tenant}, {live}, {rotation}, {rotation_tenant}.
SELECT n.nspname AS schema, c.relname AS table, c.reltuples::float8 AS reltuples,
       p.probed, p.idle, NULL::text[] AS tenants
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 CROSS JOIN (
       SELECT count(*) AS probed,
              count(*) FILTER (WHERE (
                  SELECT q.{tenant} FROM {queue} q
                   WHERE {live} AND q.{tenant} >= r.qadvisor_tenant
                   ORDER BY q.{tenant}
                   LIMIT 1) IS DISTINCT FROM r.qadvisor_tenant) AS idle
         FROM (SELECT {rotation_tenant} AS qadvisor_tenant FROM {rotation}
                LIMIT %(limit)s) r) p
 WHERE c.oid = %(rotation_oid)s::oid
