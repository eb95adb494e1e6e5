-- Every index of the queue tables, with size and usage (per-index pg_stat_get_* functions,
-- not the pg_stat_all_indexes view, which computes every index of the database).
-- pg_get_indexdef and pg_get_expr open the table, pg_relation_size the index (ACCESS SHARE):
-- the indexes of a blocked table (another session's lock would make them wait) are not
-- read, and the size of a blocked index is estimated from relpages.
-- %(relids)s holds the partitions of a partitioned queue table too: an index of a partition
-- names the index it is a partition of (one level up; the tables' tree says how far up).
SELECT x.indrelid AS relid, x.indexrelid AS index_relid, i.relname AS name,
       pg_get_indexdef(x.indexrelid) AS definition,
       ARRAY(SELECT a.attname::text
               FROM generate_subscripts(x.indkey::int2[], 1) AS k(pos)
               LEFT JOIN pg_attribute a
                 ON a.attrelid = x.indrelid AND a.attnum = (x.indkey::int2[])[k.pos]
              WHERE k.pos < x.indnkeyatts
              ORDER BY k.pos) AS columns,
       ARRAY(SELECT ((x.indoption::int2[])[k.pos] & 1) = 1
               FROM generate_subscripts(x.indoption::int2[], 1) AS k(pos)
              WHERE k.pos < x.indnkeyatts
              ORDER BY k.pos) AS descending,
       ARRAY(SELECT a.attname::text
               FROM generate_subscripts(x.indkey::int2[], 1) AS k(pos)
               JOIN pg_attribute a
                 ON a.attrelid = x.indrelid AND a.attnum = (x.indkey::int2[])[k.pos]
              WHERE k.pos >= x.indnkeyatts
              ORDER BY k.pos) AS include_columns,
       pg_get_expr(x.indpred, x.indrelid) AS predicate,
       x.indisunique AS is_unique, x.indisprimary AS is_primary,
       -- A constraint of the table owns the index (primary key, unique, exclusion). Looked up
       -- by the table (pg_constraint has no index on conindid: a scan of every constraint
       -- of the database per index otherwise). Another table's foreign key that references
       -- the index does not own it; such an index is unique, which the checks read as well.
       EXISTS (SELECT 1 FROM pg_constraint k
                WHERE k.conrelid = x.indrelid AND k.conindid = x.indexrelid) AS is_constraint,
       x.indisvalid AS is_valid, x.indisready AS is_ready,
       CASE WHEN x.indexrelid = ANY(%(blocked)s::oid[])
            THEN i.relpages::bigint * current_setting('block_size')::bigint
            ELSE pg_relation_size(x.indexrelid) END AS bytes,
       x.indexrelid = ANY(%(blocked)s::oid[]) AS bytes_estimated,
       i.reltuples::float8 AS reltuples,
       pg_stat_get_numscans(x.indexrelid) AS idx_scan,
       pg_stat_get_tuples_returned(x.indexrelid) AS idx_tup_read,
       pg_stat_get_tuples_fetched(x.indexrelid) AS idx_tup_fetch,
       (SELECT h.inhparent FROM pg_inherits h WHERE h.inhrelid = x.indexrelid) AS parent_index
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
 WHERE x.indrelid = ANY(%(relids)s::oid[])
   AND NOT x.indrelid = ANY(%(blocked)s::oid[])
 ORDER BY x.indrelid, i.relname
