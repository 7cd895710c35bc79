-- messages.sql: per-message management (D10): delete (tombstone), move to
-- the dead-letter queue, and the offset lookups of the message list. How the
-- files of sql/functions are applied: sql/sql.go.

-- resolve_in_leases resolves offset p_offset of partition p_partition in
-- every live lease that covers it, as an ack would (D2): committed advances
-- over the contiguous prefix of resolved offsets (acked, dead-lettered by the
-- group, tombstoned) and the lease ends when its whole span is resolved. It
-- locks every cursor of the partition FOR UPDATE in group order (the
-- (partition, group) order of acks), so a claim skips them meanwhile and
-- sees the caller's tombstone once it commits. It returns the groups whose
-- lease ended.
CREATE OR REPLACE FUNCTION queen.resolve_in_leases(p_partition uuid, p_offset bigint)
RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    c           record;
    v_acked     bigint[];
    v_done      bigint[];
    v_committed bigint;
BEGIN
    FOR c IN SELECT c0.consumer_group, c0.committed, c0.lease_id, c0.lease_end, c0.lease_expires_at, c0.acked
               FROM queen.cursors c0 WHERE c0.partition_id = p_partition
              ORDER BY c0.consumer_group FOR UPDATE
    LOOP
        IF c.lease_id IS NULL OR c.lease_expires_at <= now() OR p_offset <= c.committed OR p_offset > c.lease_end THEN
            CONTINUE;
        END IF;
        v_acked := CASE WHEN p_offset = ANY (c.acked) THEN c.acked ELSE c.acked || p_offset END;
        v_done := v_acked
            || ARRAY(SELECT d."offset" FROM queen.dead_letters d
                      WHERE d.partition_id = p_partition AND d.consumer_group = c.consumer_group
                        AND d."offset" > c.committed AND d."offset" <= c.lease_end AND d.resolves)
            || ARRAY(SELECT t."offset" FROM queen.tombstones t
                      WHERE t.partition_id = p_partition AND t."offset" > c.committed AND t."offset" <= c.lease_end);
        v_committed := c.committed;
        WHILE (v_committed + 1) = ANY (v_done) LOOP
            v_committed := v_committed + 1;
        END LOOP;
        IF v_committed >= c.lease_end THEN
            UPDATE queen.cursors SET committed = v_committed, lease_id = NULL, lease_end = NULL,
                                     lease_expires_at = NULL, acked = '{}'
             WHERE partition_id = p_partition AND consumer_group = c.consumer_group;
            RETURN NEXT c.consumer_group;
        ELSE
            UPDATE queen.cursors SET committed = v_committed,
                                     acked = ARRAY(SELECT o FROM unnest(v_acked) AS o WHERE o > v_committed)
             WHERE partition_id = p_partition AND consumer_group = c.consumer_group;
        END IF;
    END LOOP;
END;
$$;

-- delete_message tombstones message p_txid of partition p_partition (D10):
-- it stays in its segment, is never delivered again, and is resolved for
-- every group: in the live leases that cover it now (resolve_in_leases),
-- and for everything else at the claim that reaches it (claim_take).
-- present is false for an unknown or already deleted message (nothing changes);
-- released lists the groups whose lease the delete ended. Lock order: the
-- partition's cursors, then the tombstone insert (key share on the
-- partition), as an ack.
CREATE OR REPLACE FUNCTION queen.delete_message(p_partition uuid, p_txid text)
RETURNS TABLE (present boolean, queue_name text, released text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_off bigint;
    v_n   integer;
BEGIN
    SELECT x."offset", q.name INTO v_off, queue_name
      FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
     WHERE x.partition_id = p_partition AND x.transaction_id = p_txid;
    IF v_off IS NULL OR EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = p_partition AND t."offset" = v_off) THEN
        present := false;
        RETURN NEXT;
        RETURN;
    END IF;
    released := ARRAY(SELECT queen.resolve_in_leases(p_partition, v_off));
    INSERT INTO queen.tombstones (partition_id, "offset") VALUES (p_partition, v_off) ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    present := v_n = 1;
    RETURN NEXT;
END;
$$;

-- dlq_message moves message p_txid of partition p_partition to the
-- dead-letter queue: a dead letter (a copy of the frame, error p_error, the
-- group's failure count) for every group with a cursor on the partition that
-- has not resolved it (past committed, not acked in a live lease, not
-- dead-lettered), or for queue mode when no group has a cursor there; then
-- the message is tombstoned, so it leaves the queue for every group, future
-- ones included. present is false for an unknown or deleted message; groups
-- empty (nothing changed) when every group had resolved it already. Lock
-- order as delete_message.
CREATE OR REPLACE FUNCTION queen.dlq_message(p_partition uuid, p_txid text, p_error text)
RETURNS TABLE (present boolean, queue_name text, groups text[], released text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_off bigint;
BEGIN
    SELECT x."offset", q.name INTO v_off, queue_name
      FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
     WHERE x.partition_id = p_partition AND x.transaction_id = p_txid;
    IF v_off IS NULL OR EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = p_partition AND t."offset" = v_off) THEN
        present := false;
        RETURN NEXT;
        RETURN;
    END IF;
    present := true;
    PERFORM 1 FROM queen.cursors c WHERE c.partition_id = p_partition ORDER BY c.consumer_group FOR UPDATE;
    groups := ARRAY(
        SELECT c.consumer_group FROM queen.cursors c
         WHERE c.partition_id = p_partition AND v_off > c.committed
           AND NOT (c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND v_off <= c.lease_end AND v_off = ANY (c.acked))
           AND NOT EXISTS (SELECT 1 FROM queen.dead_letters d WHERE d.partition_id = p_partition
                              AND d.consumer_group = c.consumer_group AND d."offset" = v_off AND d.resolves)
         ORDER BY c.consumer_group);
    IF cardinality(groups) = 0 THEN
        IF EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = p_partition) THEN
            RETURN NEXT;
            RETURN;
        END IF;
        groups := ARRAY['__QUEUE_MODE__'];
    END IF;
    PERFORM queen.dead_letter(p_partition, g.name, v_off, p_error,
                              coalesce((SELECT a.failures FROM queen.attempts a WHERE a.partition_id = p_partition
                                           AND a.consumer_group = g.name AND a."offset" = v_off), 0))
       FROM unnest(groups) AS g(name);
    released := ARRAY(SELECT queen.resolve_in_leases(p_partition, v_off));
    INSERT INTO queen.tombstones (partition_id, "offset") VALUES (p_partition, v_off) ON CONFLICT DO NOTHING;
    RETURN NEXT;
END;
$$;

-- offset_at returns the last offset of partition p_partition whose segment
-- was created at or before p_ts, p_base (the offset before the oldest
-- retained one) when there is none. created_at never decreases along a log
-- (append_segments), so it is a binary search over offsets: about log2(head
-- - base) probes of the segments' primary key, whatever the partition holds,
-- and no index on created_at.
CREATE OR REPLACE FUNCTION queen.offset_at(p_partition uuid, p_base bigint, p_head bigint, p_ts timestamptz)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_lo  bigint := p_base;
    v_hi  bigint := p_head;
    v_mid bigint;
    v_at  timestamptz;
BEGIN
    WHILE v_lo < v_hi LOOP
        v_mid := v_lo + (v_hi - v_lo + 1) / 2;
        SELECT s.created_at INTO v_at FROM queen.segments s
         WHERE s.partition_id = p_partition AND s.first_offset <= v_mid
         ORDER BY s.first_offset DESC LIMIT 1;
        IF v_at IS NOT NULL AND v_at <= p_ts THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid - 1;
        END IF;
    END LOOP;
    RETURN v_lo;
END;
$$;
