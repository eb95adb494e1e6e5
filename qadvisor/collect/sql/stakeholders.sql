-- Statements of this database from pg_stat_statements ({pgss}, schema-qualified by the caller)
-- whose text names one of the queue tables (%(patterns)s: one word-bounded regular expression
-- per table name), other than the claims (%(claims)s: their queryids), one row per queryid,
-- the most called first, at most %(limit)s. qadvisor's own reads (their text names qadvisor:
-- its EXPLAIN and PREPARE statements, its probes) are left out.
SELECT queryid,
       (array_agg(query ORDER BY calls DESC))[1] AS query,
       array_agg(DISTINCT pg_get_userbyid(userid) ORDER BY pg_get_userbyid(userid)) AS roles,
       sum(calls)::bigint AS calls,
       sum(rows)::bigint AS rows,
       sum(total_exec_time) / sum(calls) AS mean_exec_ms,
       sum(shared_blks_hit + shared_blks_read)::float8 / sum(calls) AS shared_blks_per_call
  FROM {pgss}
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND calls > 0
   AND queryid IS NOT NULL
   AND NOT (queryid = ANY (%(claims)s::bigint[]))
   AND query ~* ANY (%(patterns)s::text[])
   AND query !~* 'qadvisor'
 GROUP BY queryid
 ORDER BY sum(calls) DESC, queryid
 LIMIT %(limit)s
