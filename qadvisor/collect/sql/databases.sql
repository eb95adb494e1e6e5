-- --all-databases: the server's databases other than templates, whether each accepts
-- connections at all (datallowconn) and whether this role may connect to it (CONNECT, which
-- PUBLIC holds unless it was revoked); and the role, for the GRANT that would let it in.
SELECT d.datname AS name,
       d.datallowconn AS allows_connections,
       has_database_privilege(d.oid, 'CONNECT') AS may_connect,
       current_user AS "user"
  FROM pg_database d
 WHERE NOT d.datistemplate
 ORDER BY d.datname COLLATE "C"
