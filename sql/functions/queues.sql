-- queues.sql: queue administration. How the files of sql/functions are
-- applied: sql/sql.go.

-- delete_queue deletes the queue and, through ON DELETE CASCADE and the
-- partitions trigger, everything under it; it reports whether the queue
-- existed.
--
-- It never waits for a row lock, so it can never be part of a deadlock. A
-- plain DELETE would take the queue row, then the partition rows in scan
-- order, then the cursor, dead-letter and subscription rows, each waiting
-- for its holder; but writers lock partitions in id order, acks lock a
-- cursor and then (foreign-key check of the attempts or dead-letter insert)
-- its partition, and a transaction locks partitions and then cursors, so
-- every order a delete could pick closes a cycle with one of them. Instead
-- it takes every lock it needs up front with NOWAIT, the rows that new
-- references would need (queue, partitions: their foreign-key checks block
-- behind these) before the rows already referencing them, and when any is
-- held elsewhere it rolls back what it took and tries again a little later.
-- Once it holds them all, the cascade finds nothing locked: attempts are
-- written only under their cursor's lock, segments and transaction ids only
-- under their partition's. After 10 s of trying it gives up with
-- lock_not_available (55P03).
CREATE OR REPLACE FUNCTION queen.delete_queue(p_name text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_qid   uuid;
    v_until timestamptz := clock_timestamp() + interval '10 seconds';
    v_sleep float8 := 0.002;
BEGIN
    LOOP
        BEGIN
            SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_name FOR UPDATE NOWAIT;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            PERFORM 1 FROM queen.partitions p WHERE p.queue_id = v_qid ORDER BY p.id FOR UPDATE NOWAIT;
            PERFORM 1 FROM queen.subscriptions s WHERE s.queue_id = v_qid FOR UPDATE NOWAIT;
            PERFORM 1 FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
             WHERE p.queue_id = v_qid FOR UPDATE OF c NOWAIT;
            PERFORM 1 FROM queen.dead_letters d JOIN queen.partitions p ON p.id = d.partition_id
             WHERE p.queue_id = v_qid FOR UPDATE OF d NOWAIT;
            DELETE FROM queen.queues q WHERE q.id = v_qid;
            RETURN true;
        EXCEPTION WHEN lock_not_available THEN
            -- The block's subtransaction is rolled back: nothing stays locked.
            IF clock_timestamp() > v_until THEN
                RAISE;
            END IF;
        END;
        PERFORM pg_sleep(v_sleep * (0.5 + random()));
        v_sleep := least(v_sleep * 2, 0.05);
    END LOOP;
END;
$$;
