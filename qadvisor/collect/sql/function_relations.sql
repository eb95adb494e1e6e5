-- Tables, views and composite types (kind 'relation', with their columns) and other
-- user-defined types (kind 'type': enums, domains, ranges) whose names the function bodies
-- read by functions.sql use: every non-system schema's match, since each function resolves
-- names by its own search_path (the caller picks). Bounded by the %(names)s given and by
-- %(limit)s rows. format_type() spells a type as PREPARE needs it in this session. relid and
-- relkind are a relation's (NULL for a type).
SELECT * FROM (
    SELECT 'relation' AS kind, n.nspname AS schema, c.relname AS name,
           format_type(c.reltype, NULL) AS type_sql,
           ARRAY(SELECT a.attname::text FROM pg_attribute a
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                  ORDER BY a.attnum) AS column_names,
           ARRAY(SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                  ORDER BY a.attnum) AS column_types,
           c.oid AS relid, c.relkind::text AS relkind
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relname = ANY(%(names)s::name[])
       AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname !~ '^pg_(toast|temp_)'
    UNION ALL
    SELECT 'type', n.nspname, t.typname, format_type(t.oid, NULL), NULL, NULL, NULL, NULL
      FROM pg_type t
      JOIN pg_namespace n ON n.oid = t.typnamespace
     WHERE t.typname = ANY(%(names)s::name[])
       AND t.typtype IN ('b', 'd', 'e', 'r', 'm')
       AND n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname !~ '^pg_(toast|temp_)'
) found
ORDER BY kind, schema, name
LIMIT %(limit)s
