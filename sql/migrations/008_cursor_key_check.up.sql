-- 008: cursors lose their foreign key to partitions. PostgreSQL checks the
-- key of a row its own transaction wrote at every update, whatever changed,
-- and a claim round updates a cursor twice in one transaction whenever it
-- hands a freed partition on (the ack, then the claim: the hand-off at batch
-- 1): each such claim ran the check's query and locked the partition row
-- FOR KEY SHARE, a WAL record and a dirtied page per message, and a
-- MultiXact when a push was updating the row at the same time. The key's two
-- jobs move: the statements that insert cursors (claim_contact, evict) lock
-- the partition row FOR KEY SHARE themselves, as the check did, so no cursor
-- is inserted for a partition being deleted; and the partitions trigger
-- deletes a deleted partition's cursors, as the cascade did.
ALTER TABLE queen.cursors DROP CONSTRAINT IF EXISTS cursors_partition_id_fkey;

CREATE OR REPLACE FUNCTION queen.drop_partition_data() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.segments s USING gone g WHERE s.partition_id = g.id;
    DELETE FROM queen.txids x USING gone g WHERE x.partition_id = g.id;
    DELETE FROM queen.cursors c USING gone g WHERE c.partition_id = g.id;
    RETURN NULL;
END;
$$;
