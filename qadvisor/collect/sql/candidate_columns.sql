-- Columns that can mark a queue row as live: status/state columns and nullable *_at columns
-- of every table, and every column of the tables claims read (%(claimed)s: a claim may wait
-- on any column, a boolean or an enum, and may read a partition). One query for the whole
-- database, however many tables it has. By OID: no USAGE on the schemas is needed.
SELECT n.nspname AS schema, c.relname AS table, c.oid AS relid, c.relkind = 'p' AS partitioned,
       a.attname AS column,
       format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
       has_column_privilege(c.oid, a.attnum, 'SELECT') AS readable,
       CASE WHEN et.typtype = 'e' THEN
         ARRAY(SELECT e.enumlabel::text FROM pg_enum e
                WHERE e.enumtypid = et.oid ORDER BY e.enumsortorder)
       END AS enum_labels,
       EXISTS (SELECT 1 FROM pg_index x
                WHERE x.indrelid = c.oid AND a.attnum = ANY (x.indkey::int2[])) AS indexed,
       (SELECT s.most_common_vals::text::text[] FROM pg_stats s
         WHERE s.schemaname = n.nspname AND s.tablename = c.relname
           AND s.attname = a.attname AND NOT s.inherited AND s.avg_width <= 64
         LIMIT 1) AS common_values,
       ARRAY(SELECT b.attname::text FROM pg_attribute b
              WHERE b.attrelid = c.oid AND b.attnum > 0 AND NOT b.attisdropped) AS table_columns
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_type t ON t.oid = a.atttypid
  -- The enum a domain is over counts as the column's enum.
  JOIN pg_type et ON et.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
 WHERE c.relkind IN ('r', 'p')
   AND a.attnum > 0 AND NOT a.attisdropped
   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname !~ '^pg_(toast|temp_)'
   AND (c.oid = ANY (%(claimed)s::oid[])
        OR (NOT c.relispartition
            AND (a.attname ~* '(^|_)(status|state|statename)$'
                 OR (a.attname ~* '_at$' AND NOT a.attnotnull))))
 ORDER BY 1, 2, a.attnum
