-- Partial index predicates of the tables discovery read (%(relids)s: those the candidate query
-- kept, and the claimed and named ones); a queue's live predicate shows here.
-- pg_get_expr opens the table (ACCESS SHARE): blocked tables, which another session's
-- lock would make it wait for, are left out.
SELECT n.nspname AS schema, c.relname AS table, c.oid AS relid, i.relname AS index,
       pg_get_expr(x.indpred, x.indrelid) AS predicate
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
