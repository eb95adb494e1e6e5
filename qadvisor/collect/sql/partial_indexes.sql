-- Partial index predicates of the tables discovery read (%(relids)s: those the candidate query
-- kept, and the claimed and named ones); a queue's live predicate shows here. With each, its
-- key columns in order (NULL for an expression) when it is valid: an index whose keys supply
-- a claim's ORDER BY was written for that claim, and its predicate says what the claim waits
-- for when the claim's own value is a parameter.
-- pg_get_expr opens the table (ACCESS SHARE): blocked tables, which another session's
-- lock would make it wait for, are left out.
SELECT n.nspname AS schema, c.relname AS table, c.oid AS relid, i.relname AS index,
       pg_get_expr(x.indpred, x.indrelid) AS predicate,
       CASE WHEN x.indisvalid THEN
         ARRAY(SELECT a.attname::text
                 FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                 LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
                WHERE k.n <= x.indnkeyatts
                ORDER BY k.n)
       END AS keys
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_class c ON c.oid = x.indrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE x.indpred IS NOT NULL
   AND x.indrelid = ANY(%(relids)s::oid[])
   AND NOT x.indrelid = ANY(%(blocked)s::oid[])
   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname !~ '^pg_(toast|temp_)'
 ORDER BY 1, 2, 4
