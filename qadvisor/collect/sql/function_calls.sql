-- Statements of this database that call the functions whose bodies hold claims ({pgss} is
-- the view, schema-qualified by the caller): with pg_stat_statements.track = top (the
-- default) the call is all that is recorded of a claim inside a function, and its counters
-- say how often workers claim. One row per queryid, the 200 most called; names are matched
-- as text here and confirmed by the caller's tokenizer: a name followed by its argument list,
-- quoted ("app"."claim"(...)) or spaced (claim (...)) as well as bare.
SELECT queryid,
       (array_agg(query ORDER BY calls DESC))[1] AS query,
       array_agg(DISTINCT pg_get_userbyid(userid) ORDER BY pg_get_userbyid(userid)) AS roles,
       sum(calls)::bigint AS calls,
       sum(total_exec_time) / sum(calls) AS mean_exec_ms
  FROM {pgss}
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND calls > 0
   AND queryid IS NOT NULL
   AND query !~* '^\s*(explain|create|alter|drop|comment)\M'
   AND EXISTS (SELECT 1 FROM unnest(%(names)s::text[]) AS n(name)
                WHERE strpos(regexp_replace(lower(query), '"?\s*\(', '(', 'g'),
                             lower(n.name) || '(') > 0)
 GROUP BY queryid
 ORDER BY sum(calls) DESC, queryid
 LIMIT 200
