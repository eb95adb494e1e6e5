-- PL/pgSQL and SQL functions (and procedures) of this database that may claim jobs: those
-- whose body locks rows and that a statement calls (%(schemas)s / %(names)s: (schema or
-- NULL, name) pairs read from statement texts), and those whose body locks rows with SKIP
-- LOCKED. The regular expressions are a coarse filter (a comment or a string matches too):
-- the body is read in Python; they keep the bound for bodies that can hold a claim. pg_proc
-- is readable by every role, pg_monitor-only ones included.
-- Bounded: at most %(limit)s functions, the called ones first. The caller formats in the
-- expression that reads the body of an SQL-standard function (BEGIN ATOMIC, PostgreSQL 14+,
-- whose prosrc is empty), or NULL before 14.
SELECT p.oid, n.nspname AS schema, p.proname AS name, l.lanname AS language,
       p.proargnames AS arg_names,
       p.proargmodes::text[] AS arg_modes,
       ARRAY(SELECT format_type(t.oid, NULL)
               FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]))
                    WITH ORDINALITY AS t(oid, ord)
              ORDER BY t.ord) AS arg_types,
       format_type(p.prorettype, NULL) AS return_type,
       coalesce(b.sql_body, p.prosrc) AS body,
       coalesce(p.proconfig, ARRAY[]::text[]) AS config,
       c.called
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_language l ON l.oid = p.prolang
 CROSS JOIN LATERAL (SELECT {sql_body} AS sql_body) b
 CROSS JOIN LATERAL (
       SELECT EXISTS (
                SELECT 1
                  FROM unnest(%(schemas)s::text[], %(names)s::text[]) AS f(schema, name)
                 WHERE f.name = p.proname
                   AND (f.schema = n.nspname
                        -- Unqualified: public's function if it has one, else any schema's.
                        OR (f.schema IS NULL
                            AND (n.nspname = 'public'
                                 OR NOT EXISTS (
                                        SELECT 1
                                          FROM pg_proc o
                                          JOIN pg_namespace os ON os.oid = o.pronamespace
                                         WHERE o.proname = p.proname
                                           AND os.nspname = 'public'))))
              ) AS called) c
 WHERE l.lanname IN ('plpgsql', 'sql')
   -- Said first so the bodies are matched only outside it: pg_catalog is most of pg_proc.
   AND p.pronamespace <> 'pg_catalog'::regnamespace
   AND p.prokind IN ('f', 'p')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname !~ '^pg_(toast|temp_)'
   AND coalesce(b.sql_body, p.prosrc) ~* 'for\s+(no\s+key\s+)?update|for\s+(key\s+)?share'
   AND (c.called OR coalesce(b.sql_body, p.prosrc) ~* 'skip\s+locked')
 ORDER BY c.called DESC, n.nspname, p.proname, p.oid
 LIMIT %(limit)s
