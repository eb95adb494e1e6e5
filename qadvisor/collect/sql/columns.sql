-- Every column of the queue tables.
SELECT a.attrelid AS relid, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null,
       CASE WHEN t.typtype = 'e' THEN
         ARRAY(SELECT e.enumlabel::text FROM pg_enum e
                WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder)
       END AS enum_labels
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
 WHERE a.attrelid = ANY(%(relids)s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attrelid, a.attnum
