-- Catalog facts and cumulative statistics of the queue tables (read again after --sample
-- for rates). The pg_stat_get_* functions read one table's counters each; the
-- pg_stat_all_tables view would compute every table's. pg_table_size opens the table (ACCESS
-- SHARE): for the blocked tables, which another session's lock would make it wait for,
-- the size is estimated from relpages instead.
SELECT n.nspname AS schema, c.relname AS table, c.oid AS relid,
       c.reltuples::float8 AS reltuples, c.relpages::bigint AS relpages,
       CASE WHEN c.oid = ANY(%(blocked)s::oid[])
            THEN c.relpages::bigint * current_setting('block_size')::bigint
            ELSE pg_table_size(c.oid) END AS bytes,
       c.oid = ANY(%(blocked)s::oid[]) AS bytes_estimated,
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
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = ANY(%(relids)s::oid[])
 ORDER BY 1, 2
