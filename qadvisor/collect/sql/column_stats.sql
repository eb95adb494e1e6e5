-- Planner statistics of the queue tables' columns (rows only for columns the role may read).
-- Most-common values of wide columns (payloads) are left out: large and never needed.
SELECT c.oid AS relid, s.attname AS column, s.null_frac::float8, s.n_distinct::float8,
       s.avg_width,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_vals::text::text[] END AS most_common_vals,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_freqs::float8[] END AS most_common_freqs
  FROM pg_stats s
  JOIN pg_namespace n ON n.nspname = s.schemaname
  JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename
 WHERE c.oid = ANY(%(relids)s::oid[]) AND NOT s.inherited
 ORDER BY 1, 2
