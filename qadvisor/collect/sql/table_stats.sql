-- The cumulative counters again, for rates over a sample interval.
SELECT n.nspname AS schema, c.relname AS table,
       s.n_live_tup, s.n_dead_tup, s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.n_tup_hot_upd,
       s.n_mod_since_analyze, s.n_ins_since_vacuum,
       s.last_vacuum, s.last_autovacuum, s.last_analyze, s.last_autoanalyze,
       s.vacuum_count, s.autovacuum_count, s.analyze_count, s.autoanalyze_count
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_stat_all_tables s ON s.relid = c.oid
 WHERE c.oid = ANY(%(relids)s::oid[])
