-- Server-level settings the checks judge (pg_settings.setting is in the base unit).
SELECT name, setting
  FROM pg_settings
 WHERE name LIKE 'autovacuum%'
    OR name IN ('plan_cache_mode', 'track_counts', 'vacuum_cost_limit', 'vacuum_cost_delay',
                'default_statistics_target', 'random_page_cost', 'shared_buffers',
                'old_snapshot_threshold', 'max_connections')
 ORDER BY name
