-- Relation names resolved as PostgreSQL resolves them, from the catalogs alone, so that no
-- USAGE on the schema is needed (to_regclass and ::regclass need it). parse_ident splits a
-- name and folds its unquoted parts to lower case; ::name truncates as the parser does. An
-- unqualified name is looked up along this session's effective search_path,
-- current_schemas(true), first match wins; "database.schema.table" must name this database.
-- Any relation kind matches (they share one namespace); the caller wants a table.
WITH arg AS (
    SELECT t.arg, t.ord, parse_ident(t.arg) AS parts
      FROM unnest(%(names)s::text[]) WITH ORDINALITY AS t(arg, ord)
), path AS (
    SELECT p.nspname, p.pos
      FROM unnest(current_schemas(true)) WITH ORDINALITY AS p(nspname, pos)
)
SELECT a.arg, cardinality(a.parts) AS parts,
       CASE WHEN cardinality(a.parts) = 3 THEN a.parts[1] END AS database,
       current_database() AS current_database,
       array_to_string(current_schemas(true), ', ') AS search_path,
       CASE WHEN cardinality(a.parts) > 1 THEN EXISTS (
           SELECT 1 FROM pg_namespace n
            WHERE n.nspname = a.parts[cardinality(a.parts) - 1]::name) END AS schema_exists,
       r.relid, r.schema, r.table, r.relkind,
       ARRAY(SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = a.parts[cardinality(a.parts)]::name
                AND c.relkind IN ('r', 'p')
              ORDER BY n.nspname, c.relname) AS tables_so_named
  FROM arg a
  LEFT JOIN LATERAL (
      SELECT c.oid AS relid, n.nspname::text AS schema, c.relname::text AS table,
             c.relkind::text AS relkind
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN path p ON p.nspname = n.nspname
       WHERE c.relname = a.parts[cardinality(a.parts)]::name
         AND CASE WHEN cardinality(a.parts) = 1 THEN p.pos IS NOT NULL
                  ELSE n.nspname = a.parts[cardinality(a.parts) - 1]::name END
       ORDER BY p.pos
       LIMIT 1
  ) r ON cardinality(a.parts) < 3
      OR cardinality(a.parts) = 3 AND a.parts[1]::name = current_database()
 ORDER BY a.ord
