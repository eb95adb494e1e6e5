-- Planner statistics of the queue tables' columns (rows only for columns the role may read).
-- Most-common values of wide columns (payloads) are left out: large and never needed.
-- Filtered by name arrays, which PostgreSQL pushes into the pg_stats view as index lookups;
-- a join to pg_class computes the view for every table of the database first.
SELECT s.schemaname AS schema, s.tablename AS table, s.attname AS column,
       s.null_frac::float8, s.n_distinct::float8, s.avg_width,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_vals::text::text[] END AS most_common_vals,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_freqs::float8[] END AS most_common_freqs
  FROM pg_stats s
 WHERE s.schemaname = ANY(%(schemas)s::name[])
   AND s.tablename = ANY(%(tables)s::name[])
   AND NOT s.inherited
 ORDER BY 1, 2, 3
