-- functions.sql: the Citus mode's functions (docs/scaling.md "The hot path").
-- Applied after layout.sql, only in the Citus mode; idempotent.
--
-- A statement that names one partition's rows of every sharded table by
-- an equality on the partition id is routed by Citus to the one node that
-- owns the partition's shard group, and runs there as plain PostgreSQL
-- (locks, SKIP LOCKED, writable CTEs). A function registered with
-- create_distributed_function and called alone as SELECT f(partition, ...)
-- runs whole on that node: one round trip from the coordinator, the
-- statements inside local to the node's shards.

-- append_one is append_segments (sql/functions/append.sql) for one
-- partition: the same checks, dedupe, queue cap, offsets and answer, every
-- statement routed to p_part's shard group. A push whose commit names one
-- partition (pg/append.go, in the Citus mode) calls it alone, so it runs on
-- the partition's node.
--
-- maxSize: the unconsumed messages of the whole queue are a read of every
-- node (a capped queue's push pays it, as on one node it pays the sum over
-- its partitions). Writers of one capped queue count one after the other
-- under a lock of the queue's row, which, a reference table's, every node
-- holds: the advisory lock of the single-node version is per node.
CREATE OR REPLACE FUNCTION queen.append_one(
    p_part   uuid,
    p_txids  text[],
    p_msgids uuid[],
    p_frames bytea[]
) RETURNS uuid[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_qid     uuid;
    v_max     integer;
    v_sealed  boolean;
    v_head    bigint;
    v_last    timestamptz;
    v_dup     uuid[];
    v_n       integer;
    v_room    bigint;
    v_k       integer;
    v_ts      timestamptz;
BEGIN
    SELECT p.queue_id, p.head, p.last_write_at INTO v_qid, v_head, v_last
      FROM queen.partitions p WHERE p.id = p_part FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found' USING ERRCODE = 'QG404';
    END IF;
    SELECT q.max_queue_size, q.encryption_enabled INTO v_max, v_sealed FROM queen.queues q WHERE q.id = v_qid;
    IF v_sealed AND EXISTS (SELECT 1 FROM unnest(p_frames) AS f WHERE get_byte(f, 0) & 4 = 0) THEN
        RAISE EXCEPTION 'queue has encryptionEnabled: payloads must come sealed' USING ERRCODE = 'QG412';
    END IF;

    SELECT array_agg(x.message_id ORDER BY u.ord), count(*) FILTER (WHERE x.message_id IS NULL)
      INTO v_dup, v_n
      FROM unnest(p_txids) WITH ORDINALITY AS u(txid, ord)
      LEFT JOIN queen.txids x ON x.partition_id = p_part AND x.transaction_id = u.txid;
    IF v_n > 0 AND v_max > 0 THEN
        PERFORM 1 FROM queen.queues q WHERE q.id = v_qid FOR NO KEY UPDATE;
        SELECT v_max - coalesce(sum(p.head - greatest(coalesce(c.mc, 0), coalesce(s.fo, p.head + 1) - 1)), 0)
          INTO v_room
          FROM queen.partitions p
          LEFT JOIN (SELECT c0.partition_id, min(c0.committed) AS mc FROM queen.cursors c0 GROUP BY 1) c
                 ON c.partition_id = p.id
          LEFT JOIN (SELECT s0.partition_id, min(s0.first_offset) AS fo FROM queen.segments s0 GROUP BY 1) s
                 ON s.partition_id = p.id
         WHERE p.queue_id = v_qid;
        FOR v_k IN 1 .. cardinality(v_dup) LOOP
            IF v_dup[v_k] IS NULL THEN
                IF v_room > 0 THEN
                    v_room := v_room - 1;
                ELSE
                    v_dup[v_k] := 'ffffffff-ffff-ffff-ffff-ffffffffffff';
                    v_n := v_n - 1;
                END IF;
            END IF;
        END LOOP;
    END IF;
    IF v_n = 0 THEN
        RETURN v_dup;
    END IF;

    v_ts := greatest(clock_timestamp(), v_last);
    WITH fresh AS (
        SELECT t.ord, t.txid, t.msgid, t.frame,
               row_number() OVER w AS rn, sum(length(t.frame)) OVER w AS cum
          FROM unnest(p_txids, p_msgids, p_frames) WITH ORDINALITY AS t(txid, msgid, frame, ord)
         WHERE v_dup[t.ord] IS NULL
        WINDOW w AS (ORDER BY t.ord)
    )
    INSERT INTO queen.txids (partition_id, transaction_id, "offset", message_id)
    SELECT p_part, f.txid, v_head + f.rn, f.msgid FROM fresh f;
    INSERT INTO queen.segments (partition_id, first_offset, last_offset, created_at, ends, frames)
    SELECT p_part, v_head + 1, v_head + count(*), v_ts,
           array_agg(f.cum::integer ORDER BY f.ord), string_agg(f.frame, ''::bytea ORDER BY f.ord)
      FROM (SELECT t.ord, t.frame, sum(length(t.frame)) OVER (ORDER BY t.ord) AS cum
              FROM unnest(p_frames) WITH ORDINALITY AS t(frame, ord)
             WHERE v_dup[t.ord] IS NULL) f;
    UPDATE queen.partitions SET head = v_head + v_n, last_write_at = v_ts WHERE id = p_part;
    RETURN v_dup;
END;
$$;

-- append_segments in the Citus mode: the same contract as the single-node
-- function (sql/functions/append.sql), one append_one per partition, in id
-- order (the lock order of the single-node function), in the caller's
-- transaction: a commit spread over partitions on several nodes commits on
-- all of them or none (Citus's two-phase commit). Runs on the coordinator.
CREATE OR REPLACE FUNCTION queen.append_segments(
    p_parts  uuid[],
    p_seg    integer[],
    p_txids  text[],
    p_msgids uuid[],
    p_frames bytea[]
) RETURNS uuid[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_k    integer;
    v_ords integer[];
    v_one  uuid[];
    v_out  uuid[] := array_fill(NULL::uuid, ARRAY[cardinality(p_seg)]);
    v_i    integer;
BEGIN
    FOR v_k IN SELECT u.k FROM unnest(p_parts) WITH ORDINALITY AS u(id, k) ORDER BY u.id LOOP
        v_ords := ARRAY(SELECT i FROM generate_subscripts(p_seg, 1) AS i WHERE p_seg[i] = v_k ORDER BY i);
        v_one := queen.append_one(p_parts[v_k],
                                  ARRAY(SELECT p_txids[i] FROM unnest(v_ords) AS i),
                                  ARRAY(SELECT p_msgids[i] FROM unnest(v_ords) AS i),
                                  ARRAY(SELECT p_frames[i] FROM unnest(v_ords) AS i));
        FOR v_i IN 1 .. cardinality(v_ords) LOOP
            v_out[v_ords[v_i]] := v_one[v_i];
        END LOOP;
    END LOOP;
    RETURN v_out;
END;
$$;
