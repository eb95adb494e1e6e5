-- Planner statistics of the queue tables' columns (rows only for columns the role may read).
-- Most-common values of wide columns (payloads) are left out: large and never needed.
-- Filtered by name arrays, which PostgreSQL pushes into the pg_stats view as index lookups;
-- a join to pg_class computes the view for every table of the database first (the type of
-- each row's column is looked up per row instead). The upper bound of an integer column is
-- what ANALYZE saw of its largest value: an id's progress where its sequence is not readable.
-- The lower bound of a date or timestamp column is the smallest value ANALYZE saw, in UTC (a
-- timestamp without time zone is read in this session's TimeZone, as DEFAULT now() writes
-- it), printed in ISO form whatever the session's DateStyle: how old a queue's oldest
-- finished row is, without a scan of the archive. Of an integer column it is the smallest
-- value, as a number: a moment when the column holds epoch seconds or milliseconds. The
-- histogram and the correlation with the rows' physical order are what --prove's copy fills
-- the column from (its other values, in their order).
-- A partitioned table's own rows are those ANALYZE of it gathered over all its partitions
-- (inherited); a partition's, and any other table's, are its own (an inheritance parent
-- that is no partitioned table has both).
SELECT s.schemaname AS schema, s.tablename AS table, s.attname AS column,
       s.null_frac::float8, s.n_distinct::float8, s.avg_width,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_vals::text::text[] END AS most_common_vals,
       CASE WHEN s.avg_width <= 64 THEN s.most_common_freqs::float8[] END AS most_common_freqs,
       CASE WHEN s.avg_width <= 64 THEN s.histogram_bounds::text::text[] END AS histogram_bounds,
       s.correlation::float8 AS correlation,
       CASE WHEN t.typcategory = 'N' AND t.typname IN ('int2', 'int4', 'int8') THEN
         coalesce((s.histogram_bounds::text::bigint[])[
                    cardinality(s.histogram_bounds::text::bigint[])],
                  (SELECT max(v) FROM unnest(s.most_common_vals::text::bigint[]) AS v))::text
       END AS upper_bound,
       CASE WHEN t.typname IN ('timestamptz', 'timestamp', 'date') THEN
         (SELECT CASE WHEN isfinite(m)
                      THEN to_char(m AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US')
                      ELSE m::text END
            FROM (SELECT min(v) AS m
                    FROM unnest(coalesce(s.histogram_bounds::text::timestamptz[], '{}')
                                || coalesce(s.most_common_vals::text::timestamptz[], '{}'))
                         AS v) AS lowest)
       WHEN t.typcategory = 'N' AND t.typname IN ('int2', 'int4', 'int8') THEN
         (SELECT min(v)
            FROM unnest(coalesce(s.histogram_bounds::text::bigint[], '{}')
                        || coalesce(s.most_common_vals::text::bigint[], '{}')) AS v)::text
       END AS lower_bound
  FROM pg_stats s
  LEFT JOIN pg_type t ON t.oid = (
         SELECT a.atttypid FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = s.schemaname AND c.relname = s.tablename AND a.attname = s.attname)
 WHERE s.schemaname = ANY(%(schemas)s::name[])
   AND s.tablename = ANY(%(tables)s::name[])
   AND s.inherited = EXISTS (SELECT 1 FROM pg_class c
                               JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE n.nspname = s.schemaname AND c.relname = s.tablename
                                AND c.relkind = 'p')
 ORDER BY 1, 2, 3
