-- Mean run time of the %(jobs)s most recently finished jobs, read backwards through an index
-- led by the finish column (the caller checks that one exists and disables seq scans and
-- sorts). Formatted with psycopg.sql: {queue}, {started}, {finished}.
-- An alias names qadvisor: pg_stat_statements records this text, and the other statements
-- on the queue tables (recorded.py) leave out what names qadvisor, so a later run does not
-- take it for the application's.
SELECT count(*) AS jobs, avg(extract(epoch FROM qadvisor_run.f - qadvisor_run.s))::float8 AS mean_s
  FROM (SELECT {started} AS s, {finished} AS f FROM {queue}
         WHERE {finished} IS NOT NULL AND {started} IS NOT NULL
         ORDER BY {finished} DESC
         LIMIT %(jobs)s) qadvisor_run
