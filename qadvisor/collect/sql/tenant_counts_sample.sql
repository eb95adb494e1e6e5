-- Live rows per tenant from the first %(scan)s live rows, read through an index that reaches
-- the live set without the archive (a partial index on the live predicate, or one led by the
-- live column). Formatted with psycopg.sql: {queue}, {tenant}, {live}. Returns the largest
-- %(tenants)s tenants with the number of tenants and rows seen.
-- An alias names qadvisor: pg_stat_statements records this text, and the other statements
-- on the queue tables (recorded.py) leave out what names qadvisor, so a later run does not
-- take it for the application's.
SELECT g.tenant, g.n,
       count(*) OVER () AS tenants_seen,
       sum(g.n) OVER ()::bigint AS rows_seen
  FROM (SELECT qadvisor_live.tenant, count(*) AS n
          FROM (SELECT {tenant}::text AS tenant FROM {queue}
                 WHERE {live} AND {tenant} IS NOT NULL
                 LIMIT %(scan)s) qadvisor_live
         GROUP BY qadvisor_live.tenant) g
 ORDER BY g.n DESC, g.tenant
 LIMIT %(tenants)s
