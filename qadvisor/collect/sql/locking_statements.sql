-- Statements that lock rows, from pg_stat_statements (schema qualified by the caller).
-- Bounded: the busiest few hundred are enough to find the dequeue path.
SELECT query, calls, mean_exec_time, shared_blks_hit + shared_blks_read AS shared_blks
  FROM {pgss}
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query ~* 'for\s+(no\s+key\s+)?update|for\s+(key\s+)?share'
   AND query !~* '^\s*explain'
 ORDER BY calls DESC
 LIMIT 200
