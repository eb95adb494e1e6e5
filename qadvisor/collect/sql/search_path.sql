-- The server's search_path (postgresql.conf, ALTER SYSTEM, the command line): what a role
-- without an ALTER ROLE / ALTER DATABASE setting starts with. pg_settings shows qadvisor's
-- own session value, which a setting for qadvisor's role or this database would have
-- changed; its source says whether it did (then search_path_file.sql has the configured one).
SELECT setting, source, boot_val FROM pg_settings WHERE name = 'search_path'
