-- Every column of the queue tables (a stored generated column with its expression).
SELECT a.attrelid AS relid, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null,
       CASE WHEN t.typtype = 'e' THEN
         ARRAY(SELECT e.enumlabel::text FROM pg_enum e
                WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder)
       END AS enum_labels,
       CASE WHEN a.attgenerated = 's' THEN pg_get_expr(d.adbin, d.adrelid) END AS generated
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = ANY(%(relids)s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attrelid, a.attnum
