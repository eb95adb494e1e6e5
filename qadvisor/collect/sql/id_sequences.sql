-- The sequences that number columns of the queue tables: a serial's owned sequence (pg_depend
-- 'a') or an identity's (pg_depend 'i'), read by OID. last_value needs SELECT or USAGE on the
-- sequence (pg_sequence_last_value checks it): without either it is NULL, never an error.
SELECT d.refobjid AS relid, a.attname AS column,
       format_type(a.atttypid, a.atttypmod) AS column_type,
       sn.nspname AS schema, s.relname AS name, format_type(sq.seqtypid, NULL) AS data_type,
       sq.seqmax AS max_value, sq.seqincrement AS increment, d.deptype = 'i' AS identity,
       has_sequence_privilege(s.oid, 'SELECT') OR has_sequence_privilege(s.oid, 'USAGE')
         AS readable,
       CASE WHEN has_sequence_privilege(s.oid, 'SELECT')
              OR has_sequence_privilege(s.oid, 'USAGE')
            THEN pg_sequence_last_value(s.oid) END AS last_value
  FROM pg_depend d
  JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
  JOIN pg_namespace sn ON sn.oid = s.relnamespace
  JOIN pg_sequence sq ON sq.seqrelid = s.oid
  JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
 WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
   AND d.deptype IN ('a', 'i') AND d.refobjid = ANY(%(relids)s::oid[])
 ORDER BY d.refobjid, a.attnum
