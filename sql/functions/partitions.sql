-- partitions.sql: the function of the partitions trigger. How the files of
-- sql/functions are applied: sql/sql.go.

-- drop_partition_data removes what hangs off deleted partitions (gone: the
-- statement's deleted rows), for the statement trigger partitions_cascade
-- that migration 001 created with a first version of it. Cursors are
-- deleted here, not by a foreign key (migration 008: a claim round that
-- acks and claims one cursor would run the key's check twice).
CREATE OR REPLACE FUNCTION queen.drop_partition_data() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.segments s USING gone g WHERE s.partition_id = g.id;
    DELETE FROM queen.txids x USING gone g WHERE x.partition_id = g.id;
    DELETE FROM queen.cursors c USING gone g WHERE c.partition_id = g.id;
    RETURN NULL;
END;
$$;

-- partition_key is the id a new partition of queue p_queue named p_name
-- gets in the Citus mode (pg/queues.go's ensurePartition; on one PostgreSQL
-- ids are random): a function of the two, so the id alone names the pair.
-- A check holds every partition to it there (sql/citus/layout.sql), and the
-- primary key on id, which Citus can keep on a table sharded by id, is then
-- the uniqueness of (queue_id, name), which it cannot. Version-4 layout bits are not set: it is a digest, never
-- parsed as anything but 16 bytes.
CREATE OR REPLACE FUNCTION queen.partition_key(p_queue uuid, p_name text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_queue::text || '/' || p_name)::uuid
$$;
