-- --table arguments resolved the way PostgreSQL resolves names (search_path, case folding).
SELECT arg, r.oid AS relid, n.nspname AS schema, r.relname AS table, r.relkind::text AS relkind
  FROM unnest(%(names)s::text[]) WITH ORDINALITY AS t(arg, ord)
  LEFT JOIN pg_class r ON r.oid = to_regclass(t.arg)
  LEFT JOIN pg_namespace n ON n.oid = r.relnamespace
 ORDER BY t.ord
