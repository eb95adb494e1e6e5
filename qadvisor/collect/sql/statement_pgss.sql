-- Row-locking statements of this database from pg_stat_statements ({pgss} is the view,
-- schema-qualified by the caller), one row per queryid and text: the same statement run by
-- several roles, or at top level and nested, is one statement here. Two texts of one queryid
-- stay two rows: PostgreSQL 18 computes a queryid from relation names and column numbers, so
-- statements on same-named tables in two schemas that name other columns at the same
-- positions share it, and each must be planned as written, under its own roles. Bounded: the
-- 200 most called. qadvisor's own EXPLAIN / PREPARE statements are left out. toplevel is
-- false when every call was nested (inside a function, with pg_stat_statements.track = all,
-- or PostgreSQL's own foreign-key checks); it is true before PostgreSQL 14, which does not
-- record it.
SELECT queryid,
       query,
       array_agg(DISTINCT pg_get_userbyid(userid) ORDER BY pg_get_userbyid(userid)) AS roles,
       sum(calls)::bigint AS calls,
       sum(total_exec_time) / sum(calls) AS mean_exec_ms,
       sum(shared_blks_hit + shared_blks_read)::float8 / sum(calls) AS shared_blks_per_call,
       sum(plans)::bigint AS plans,
       {toplevel} AS toplevel,
       coalesce(current_setting('pg_stat_statements.track_planning', true), 'off') = 'on'
         AS track_planning
  FROM {pgss}
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND calls > 0
   AND queryid IS NOT NULL
   AND query ~* 'for\s+(no\s+key\s+)?update|for\s+(key\s+)?share'
   AND query !~* '^\s*explain'
   AND query !~* '^\s*prepare\s+"?qadvisor_stmt'
 GROUP BY queryid, query
 ORDER BY sum(calls) DESC, queryid, query
 LIMIT 200
