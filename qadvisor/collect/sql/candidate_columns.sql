-- Columns that can mark a queue row as live: status/state columns and nullable *_at columns,
-- of the tables that can be queues, and every column of the tables claims read (%(claimed)s:
-- a claim may wait on any column, a boolean or an enum, and may read a partition). One query
-- for the whole database, however many tables it has. By OID: no USAGE on the schemas is
-- needed. A partitioned table is a candidate as a whole (its statistics are those ANALYZE
-- of it gathered over its partitions); its partitions are not, unless a claim reads one.
--
-- A table no claim reads can be a queue only through a partial index on a status-like
-- column, a known library's shape (%(shapes)s: each library's column names, comma-separated,
-- its live column first), or an indexed status column whose values read as waiting
-- (%(live_words)s, compared in lower case, among the values ANALYZE saw, common or in the
-- histogram, and the column's default; or values this role may not read, which discovery
-- reports). Every other table is left out here, on the server, before the per-column work
-- (statistics, enum labels, the table's columns): 10,000 tables with an unindexed updated_at,
-- an indexed active/inactive status or a soft delete's partial index cost one scan of
-- pg_attribute and one pg_stats probe per indexed status column.
--
-- Every value the catalog holds for a kept column is read with it, for discovery to weigh
-- when a claim compares the column with a parameter: the enum labels, the values ANALYZE saw
-- (common ones with their shares, and the histogram bounds of a text or enum column: a value
-- seen too rarely to count as common is there), the default (a new row's state, read with
-- no relation given: a default names no column) and the CHECK constraints on the column
-- alone. pg_get_expr of a CHECK opens the table (ACCESS SHARE): the tables another
-- session's lock would make it wait for (%(blocked)s) are left without them.
WITH candidate AS MATERIALIZED (
    SELECT * FROM (
        SELECT c.oid AS relid, n.nspname AS schema, c.relname AS table,
               c.relkind = 'p' AS partitioned, c.oid = ANY (%(claimed)s::oid[]) AS claimed,
               a.attnum, a.attname, a.atttypid, a.atttypmod, a.attnotnull, a.attgenerated,
               -- The name's last characters are a cheap pre-filter for the patterns: a
               -- regular expression on each of the catalog's columns costs more than the
               -- rest of the scan.
               (NOT c.relispartition
                AND lower(right(a.attname::text, 9))
                      LIKE ANY (ARRAY['%%status', '%%state', '%%statename'])
                AND a.attname ~* '(^|_)(status|state|statename)$') AS status_like,
               (NOT c.relispartition AND NOT a.attnotnull
                AND lower(right(a.attname::text, 3)) = '_at') AS at_like
          FROM pg_attribute a
          JOIN pg_class c ON c.oid = a.attrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p')
           AND a.attnum > 0 AND NOT a.attisdropped
           AND n.nspname NOT IN ('pg_catalog', 'information_schema')
           AND n.nspname !~ '^pg_(toast|temp_)'
    ) AS columns
     WHERE claimed OR status_like OR at_like
), shape AS (
    SELECT string_to_array(s, ',')::name[] AS columns FROM unnest(%(shapes)s::text[]) AS s
), partial AS (
    -- The columns of each partial index (its key and its predicate, as pg_depend records
    -- them). Of a table no claim reads, only a partial index that involves a status-like
    -- column can mark a queue (a soft delete's WHERE deleted_at IS NULL cannot: discover.py).
    SELECT d.refobjid AS relid, d.refobjsubid AS attnum
      FROM pg_index x
      JOIN pg_depend d
        ON d.classid = 'pg_class'::regclass AND d.objid = x.indexrelid
       AND d.refclassid = 'pg_class'::regclass AND d.refobjid = x.indrelid
       AND d.refobjsubid > 0
     WHERE x.indpred IS NOT NULL
), kept AS (
    SELECT DISTINCT k.relid
      FROM candidate k
     WHERE k.claimed
        OR k.relid = ANY (%(named)s::oid[])  -- named with --table: judged whatever it is
        OR (k.status_like AND (k.relid, k.attnum) IN (SELECT relid, attnum FROM partial))
        -- A library's shape: each of its columns probed by name (an index lookup), the
        -- first missing one ends the test.
        OR (k.attname IN (SELECT columns[1] FROM shape)
            AND EXISTS (SELECT 1 FROM shape
                         WHERE shape.columns[1] = k.attname
                           AND NOT EXISTS (SELECT 1 FROM unnest(shape.columns[2:]) AS need(name)
                                            WHERE NOT EXISTS (
                                                SELECT 1 FROM pg_attribute b
                                                 WHERE b.attrelid = k.relid
                                                   AND b.attname = need.name
                                                   AND NOT b.attisdropped))))
        OR (k.status_like
            AND EXISTS (SELECT 1 FROM pg_index x
                         WHERE x.indrelid = k.relid AND k.attnum = ANY (x.indkey::int2[]))
            AND (NOT has_column_privilege(k.relid, k.attnum, 'SELECT')
                 OR EXISTS (SELECT 1
                              FROM pg_type t
                              JOIN pg_enum e
                                ON e.enumtypid = CASE WHEN t.typtype = 'd' THEN t.typbasetype
                                                      ELSE t.oid END
                             WHERE t.oid = k.atttypid
                               AND lower(e.enumlabel::text) = ANY (%(live_words)s::text[]))
                 OR EXISTS (SELECT 1 FROM pg_stats s,
                                   unnest(coalesce(s.most_common_vals::text::text[], '{}')
                                          || coalesce(s.histogram_bounds::text::text[], '{}'))
                                     AS v
                             WHERE s.schemaname = k.schema AND s.tablename = k.table
                               AND s.attname = k.attname AND s.inherited = k.partitioned
                               AND s.avg_width <= 64
                               AND lower(v) = ANY (%(live_words)s::text[]))
                 OR EXISTS (SELECT 1 FROM pg_attrdef d
                             WHERE d.adrelid = k.relid AND d.adnum = k.attnum
                               -- A generated column's expression names columns.
                               AND lower(substring(CASE WHEN k.attgenerated = ''
                                                        THEN pg_get_expr(d.adbin, 0) END
                                                   FROM '^''([^'']*)'''))
                                   = ANY (%(live_words)s::text[]))))
)
SELECT k.schema, k.table, k.relid, k.partitioned,
       k.attname AS column,
       format_type(k.atttypid, k.atttypmod) AS type, k.attnotnull AS not_null,
       has_column_privilege(k.relid, k.attnum, 'SELECT') AS readable,
       CASE WHEN et.typtype = 'e' THEN
         ARRAY(SELECT e.enumlabel::text FROM pg_enum e
                WHERE e.enumtypid = et.oid ORDER BY e.enumsortorder)
       END AS enum_labels,
       EXISTS (SELECT 1 FROM pg_index x
                WHERE x.indrelid = k.relid AND k.attnum = ANY (x.indkey::int2[])) AS indexed,
       st.most_common_vals AS common_values, st.most_common_freqs AS common_freqs,
       st.histogram_bounds AS rare_values, st.null_frac, st.n_distinct,
       (SELECT CASE WHEN k.attgenerated = '' THEN pg_get_expr(d.adbin, 0) END
          FROM pg_attrdef d WHERE d.adrelid = k.relid AND d.adnum = k.attnum) AS default,
       ARRAY(SELECT pg_get_expr(c.conbin, c.conrelid) FROM pg_constraint c
              WHERE c.conrelid = k.relid AND c.contype = 'c' AND c.conkey = ARRAY[k.attnum]
                AND NOT k.relid = ANY (%(blocked)s::oid[])
              ORDER BY c.conname) AS checks,
       ARRAY(SELECT b.attname::text FROM pg_attribute b
              WHERE b.attrelid = k.relid AND b.attnum > 0 AND NOT b.attisdropped) AS table_columns
  FROM candidate k
  JOIN kept USING (relid)
  JOIN pg_type t ON t.oid = k.atttypid
  -- The enum a domain is over counts as the column's enum.
  JOIN pg_type et ON et.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
  LEFT JOIN LATERAL (
       SELECT s.most_common_vals::text::text[] AS most_common_vals,
              s.most_common_freqs::float8[] AS most_common_freqs,
              -- The histogram of a text or enum column lists values; a number's or a
              -- time's, ranges (and it is long).
              CASE WHEN et.typcategory IN ('S', 'E') THEN s.histogram_bounds::text::text[]
              END AS histogram_bounds,
              s.null_frac::float8 AS null_frac, s.n_distinct::float8 AS n_distinct
         FROM pg_stats s
        WHERE s.schemaname = k.schema AND s.tablename = k.table
          AND s.attname = k.attname AND s.inherited = k.partitioned AND s.avg_width <= 64
        LIMIT 1) AS st ON true
 ORDER BY 1, 2, k.attnum
