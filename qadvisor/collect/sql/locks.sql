-- Relation locks of other sessions in this database that could make qadvisor wait: every mode
-- that conflicts with one qadvisor takes (ACCESS SHARE to read sizes and index definitions,
-- ROW SHARE or ROW EXCLUSIVE to plan a claim), granted or still waiting, since a waiting
-- request makes every later conflicting request queue behind it. One read, before anything
-- opens a table. pg_locks is readable by every role; pg_stat_activity shows another role's
-- state and query only with pg_read_all_stats (pg_monitor). A prepared transaction has no pid.
-- A lock on a partition (or its index) makes planning on every partitioned table above it
-- wait too (the planner opens the partitions it cannot prune): those tables are read from
-- pg_inherits, which takes no lock.
SELECT l.relation AS relid, coalesce(x.indrelid, l.relation) AS table_relid,
       ARRAY(WITH RECURSIVE up(relid) AS (
                 SELECT i.inhparent FROM pg_inherits i
                  WHERE i.inhrelid = coalesce(x.indrelid, l.relation)
                 UNION
                 SELECT i.inhparent FROM up JOIN pg_inherits i ON i.inhrelid = up.relid)
             SELECT relid FROM up) AS partitioned_above,
       n.nspname AS schema, c.relname AS relation, c.relkind::text AS relkind,
       l.pid, l.mode, l.granted, l.virtualtransaction,
       a.state, left(a.query, 300) AS query,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s,
       CASE WHEN NOT l.granted THEN pg_blocking_pids(l.pid) END AS waiting_for
  FROM pg_locks l
  LEFT JOIN pg_class c ON c.oid = l.relation
  LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_index x ON x.indexrelid = l.relation
  LEFT JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'relation'
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND l.pid IS DISTINCT FROM pg_backend_pid()
   AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
 ORDER BY l.relation, l.granted DESC, l.pid
