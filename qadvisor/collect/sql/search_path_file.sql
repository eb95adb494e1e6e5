-- The configured search_path, when qadvisor's own session value came from a role or database
-- setting (pg_file_settings needs pg_read_all_settings, which pg_monitor includes).
SELECT setting FROM pg_file_settings
 WHERE name = 'search_path' AND applied
 ORDER BY seqno DESC
 LIMIT 1
