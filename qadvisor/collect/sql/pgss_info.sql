-- How many entries pg_stat_statements has evicted to make room for new ones since its
-- statistics were reset ({info} is the view, schema-qualified by the caller), and how many it
-- keeps: an evicted statement is one a fix cannot know it would break.
SELECT dealloc,
       stats_reset,
       current_setting('pg_stat_statements.max', true) AS max_entries
  FROM {info}
