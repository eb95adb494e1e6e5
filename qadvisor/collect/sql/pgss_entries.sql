-- Every statement pg_stat_statements recorded in this database ({pgss} is the view,
-- schema-qualified by the caller), one row per queryid and text: the same statement run by
-- several roles, or at top level and nested, is one row. Two texts of one queryid stay two
-- rows: PostgreSQL 18 computes a queryid from relation names and column numbers, so
-- statements on same-named tables in two schemas that name other columns at the same
-- positions share it, and each must be planned as written, under its own roles. This is the
-- run's only read of the view: the claims, the calls of claiming functions and the other
-- statements on the queue tables are chosen from these rows by qadvisor. EXPLAIN statements
-- are left out (qadvisor's own among them). toplevel is false when every call was nested
-- (inside a function, with pg_stat_statements.track = all, or PostgreSQL's own foreign-key
-- checks); it is true before pg_stat_statements 1.9 (PostgreSQL 14), which does not record it.
-- Before 1.8 (PostgreSQL 13) the caller reads total_time, and no plans and no track_planning.
SELECT queryid,
       query,
       array_agg(DISTINCT pg_get_userbyid(userid) ORDER BY pg_get_userbyid(userid)) AS roles,
       sum(calls)::bigint AS calls,
       sum(rows)::bigint AS rows,
       sum({exec_time})::float8 AS total_exec_ms,
       sum(shared_blks_hit + shared_blks_read)::float8 AS shared_blks,
       {plans} AS plans,
       {toplevel} AS toplevel,
       {track_planning} AS track_planning
  FROM {pgss}
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND calls > 0
   AND queryid IS NOT NULL
   AND query IS NOT NULL
   AND query !~* '^\s*explain'
 GROUP BY queryid, query
