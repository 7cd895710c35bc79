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
