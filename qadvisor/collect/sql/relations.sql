-- The relations that the statements' table names can mean, in every schema (names are
-- resolved in Python under each role's search_path). Read by name from pg_class, which needs
-- no USAGE on the schema. Unique keys: the columns of valid, non-partial unique indexes on
-- plain columns.
SELECT c.oid AS relid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       pn.nspname AS parent_schema, pc.relname AS parent_name,
       ARRAY(SELECT array_to_string(ARRAY(SELECT a.attname::text
                                            FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(att, pos)
                                            JOIN pg_attribute a
                                              ON a.attrelid = x.indrelid AND a.attnum = k.att
                                           ORDER BY k.pos), ',')
               FROM pg_index x
              WHERE x.indrelid = c.oid AND x.indisunique AND x.indisvalid
                AND x.indpred IS NULL AND x.indexprs IS NULL
                AND NOT (0 = ANY (x.indkey::int2[]))) AS unique_keys
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND c.relispartition
  LEFT JOIN pg_class pc ON pc.oid = i.inhparent
  LEFT JOIN pg_namespace pn ON pn.oid = pc.relnamespace
 WHERE c.relname = ANY(%(names)s::name[])
   AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
   AND n.nspname !~ '^pg_(toast|temp_)'
 ORDER BY 2, 3
