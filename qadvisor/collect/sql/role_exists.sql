-- Whether the monitoring role qadvisor role prints the setup of exists already (then it is
-- granted, not created).
SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(role)s) AS exists
