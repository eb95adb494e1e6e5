-- Catalog facts and cumulative statistics of the queue tables (read again after --sample
-- for rates), and of every partition below a partitioned one: it holds no rows itself, its
-- leaves do (derive/partitions.py sums them into the queue table's facts). The partition
-- tree is read from pg_inherits, which takes no lock (pg_partition_tree would lock every
-- partition); a partition being detached concurrently is no longer part of the table.
-- The pg_stat_get_* functions read one table's counters each; the pg_stat_all_tables view
-- would compute every table's. pg_table_size opens the table (ACCESS SHARE): for the blocked
-- tables, which another session's lock would make it wait for, and when %(sizes)s is false,
-- the size is estimated from relpages instead.
WITH RECURSIVE tree AS (
    SELECT q.relid AS root, q.relid AS relid, NULL::oid AS parent
      FROM unnest(%(relids)s::oid[]) AS q(relid)
    UNION ALL
    SELECT t.root, i.inhrelid, i.inhparent
      FROM tree t
      JOIN pg_class p ON p.oid = t.relid AND p.relkind = 'p'
      JOIN pg_inherits i ON i.inhparent = t.relid
     WHERE NOT i.inhdetachpending
)
SELECT n.nspname AS schema, c.relname AS table, c.oid AS relid, t.root,
       pn.nspname || '.' || pc.relname AS partition_of,
       CASE WHEN c.relispartition THEN pg_get_expr(c.relpartbound, 0) END AS bound,
       CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END AS partition_key,
       c.reltuples::float8 AS reltuples, greatest(c.relpages, 0)::bigint AS relpages,
       CASE WHEN c.relkind = 'p' THEN 0
            WHEN c.oid = ANY(%(blocked)s::oid[]) OR NOT %(sizes)s
            THEN c.relpages::bigint * current_setting('block_size')::bigint
            ELSE pg_table_size(c.oid) END AS bytes,
       c.relkind <> 'p' AND c.oid = ANY(%(blocked)s::oid[]) AS bytes_estimated,
       coalesce(c.reloptions, '{}') AS reloptions,
       has_table_privilege(c.oid, 'SELECT') AS stats_visible,
       pg_stat_get_live_tuples(c.oid) AS n_live_tup,
       pg_stat_get_dead_tuples(c.oid) AS n_dead_tup,
       pg_stat_get_tuples_inserted(c.oid) AS n_tup_ins,
       pg_stat_get_tuples_updated(c.oid) AS n_tup_upd,
       pg_stat_get_tuples_deleted(c.oid) AS n_tup_del,
       pg_stat_get_tuples_hot_updated(c.oid) AS n_tup_hot_upd,
       pg_stat_get_mod_since_analyze(c.oid) AS n_mod_since_analyze,
       pg_stat_get_ins_since_vacuum(c.oid) AS n_ins_since_vacuum,
       pg_stat_get_last_vacuum_time(c.oid) AS last_vacuum,
       pg_stat_get_last_autovacuum_time(c.oid) AS last_autovacuum,
       pg_stat_get_last_analyze_time(c.oid) AS last_analyze,
       pg_stat_get_last_autoanalyze_time(c.oid) AS last_autoanalyze,
       pg_stat_get_vacuum_count(c.oid) AS vacuum_count,
       pg_stat_get_autovacuum_count(c.oid) AS autovacuum_count,
       pg_stat_get_analyze_count(c.oid) AS analyze_count,
       pg_stat_get_autoanalyze_count(c.oid) AS autoanalyze_count
  FROM tree t
  JOIN pg_class c ON c.oid = t.relid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_class pc ON pc.oid = t.parent
  LEFT JOIN pg_namespace pn ON pn.oid = pc.relnamespace
 ORDER BY 1, 2
