-- Live rows per tenant through a partial index led by the tenant column whose predicate is
-- the live predicate (formatted with psycopg.sql: {queue}, {tenant}, {live}). A skip scan
-- finds each tenant with one index descent, at most %(tenants)s of them, and at most
-- %(cap)s live rows are counted per tenant. The archive is never read.
WITH RECURSIVE t(qadvisor_tenant) AS (
    (SELECT {tenant} FROM {queue}
      WHERE {live} AND {tenant} IS NOT NULL
      ORDER BY {tenant} LIMIT 1)
  UNION ALL
    SELECT (SELECT q.{tenant} FROM {queue} q
             WHERE {live} AND q.{tenant} > t.qadvisor_tenant
             ORDER BY q.{tenant} LIMIT 1)
      FROM t
     WHERE t.qadvisor_tenant IS NOT NULL
)
SELECT s.qadvisor_tenant::text AS tenant, c.n
  FROM (SELECT qadvisor_tenant FROM t WHERE qadvisor_tenant IS NOT NULL LIMIT %(tenants)s) s
 CROSS JOIN LATERAL (
       SELECT count(*) AS n
         FROM (SELECT 1 FROM {queue} q
                WHERE q.{tenant} = s.qadvisor_tenant AND {live}
                LIMIT %(cap)s) x) c
 ORDER BY c.n DESC, 1
