-- ack.sql: acknowledgements and dead letters (D2-D5). How the files of
-- sql/functions are applied: sql/sql.go.

-- frame_at returns frame k (0-based) of a segment.
CREATE OR REPLACE FUNCTION queen.frame_at(p_frames bytea, p_ends integer[], p_k integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(p_frames FROM coalesce(p_ends[p_k], 0) + 1 FOR p_ends[p_k + 1] - coalesce(p_ends[p_k], 0))
$$;

-- dead_letter copies the frame at p_offset into the dead letters of the group.
CREATE OR REPLACE FUNCTION queen.dead_letter(p_partition uuid, p_group text, p_offset bigint, p_error text, p_retries integer)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.dead_letters (partition_id, consumer_group, "offset", frame, error_message, retry_count,
                                    original_created_at)
    SELECT p_partition, p_group, p_offset, queen.frame_at(s.frames, s.ends, (p_offset - s.first_offset)::integer),
           p_error, p_retries, s.created_at
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_offset AND s.last_offset >= p_offset
    ON CONFLICT (partition_id, consumer_group, "offset") DO NOTHING
$$;

-- ack applies acknowledgements: item i acks transaction p_txids[i] of
-- partition p_parts[i] for group p_groups[i] with status p_statuses[i]. Items
-- are applied in (partition, group, message offset) order, whatever order
-- they came in, so cursor rows are locked in one order and a mixed batch
-- resolves the same way however it was sent. Each (partition, group) cursor
-- is locked and written once per call, however many items it gets.
--
-- D2: an ack must hit the live span (committed, lease_end], and the live
-- lease when it names one; committed advances over the contiguous prefix of
-- resolved offsets (acked or dead-lettered, now or under an earlier lease),
-- never backwards; the lease ends
-- when its whole span is resolved. D3: failed (budget left) or retry ends the
-- lease at once, keeps the resolved prefix, drops the acks beyond it, and for
-- failed delays the rest by retryDelay. D4: the (retryLimit+1)-th failure of
-- an offset dead-letters it. Per-item problems are results, not errors.
CREATE OR REPLACE FUNCTION queen.ack(
    p_parts    uuid[],
    p_txids    text[],
    p_statuses text[],
    p_groups   text[],
    p_leases   uuid[],
    p_errors   text[]
) RETURNS TABLE (
    idx            integer,
    success        boolean,
    error          text,
    lease_released boolean,
    dlq            boolean,
    queue_name     text,
    partition_name text
)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
DECLARE
    r           record;
    v_part      uuid;
    v_grp       text;
    v_found     boolean := false;
    v_committed bigint;
    v_lease     uuid;
    v_end       bigint;
    v_expires   timestamptz;
    v_acked     bigint[];
    v_dead      bigint[];
    v_not_bef   timestamptz;
    v_moved     bigint;
    v_dirty     boolean := false;
    v_fails     integer;
    v_status    text;
BEGIN
    FOR r IN
        SELECT t.ord::integer AS i, t.part, t.grp,
               (SELECT x."offset" FROM queen.txids x WHERE x.partition_id = t.part AND x.transaction_id = t.txid) AS off,
               q.name AS qname, p.name AS pname, q.retry_limit, q.retry_delay
          FROM unnest(p_parts, p_txids, p_groups) WITH ORDINALITY AS t(part, txid, grp, ord)
          LEFT JOIN queen.partitions p ON p.id = t.part
          LEFT JOIN queen.queues q ON q.id = p.queue_id
         ORDER BY t.part, t.grp, off, t.ord
    LOOP
        idx := r.i; success := false; error := NULL; lease_released := false; dlq := false;
        queue_name := NULL; partition_name := NULL; v_fails := NULL;
        v_status := p_statuses[r.i];
        IF r.qname IS NULL OR r.off IS NULL THEN
            error := 'Message not found';
            RETURN NEXT;
            CONTINUE;
        END IF;
        queue_name := r.qname; partition_name := r.pname;
        IF v_status NOT IN ('completed', 'success', 'failed', 'retry', 'dlq') THEN
            RETURN NEXT; -- unknown status: nothing happens (A-12)
            CONTINUE;
        END IF;

        IF v_part IS DISTINCT FROM r.part OR v_grp IS DISTINCT FROM r.grp THEN
            IF v_dirty THEN
                UPDATE queen.cursors SET committed = v_committed, acked = v_acked, lease_id = v_lease,
                       lease_end = v_end, lease_expires_at = v_expires, not_before = v_not_bef,
                       total_consumed = total_consumed + v_moved,
                       last_consumed_at = CASE WHEN v_moved > 0 THEN now() ELSE last_consumed_at END
                 WHERE partition_id = v_part AND consumer_group = v_grp;
            END IF;
            v_part := r.part; v_grp := r.grp; v_dirty := false; v_moved := 0;
            SELECT c.committed, c.lease_id, c.lease_end, c.lease_expires_at, c.acked, c.not_before
              INTO v_committed, v_lease, v_end, v_expires, v_acked, v_not_bef
              FROM queen.cursors c WHERE c.partition_id = r.part AND c.consumer_group = r.grp FOR UPDATE;
            v_found := FOUND;
            -- Offsets of the span dead-lettered under an earlier lease stay
            -- resolved (D5).
            v_dead := ARRAY(SELECT d."offset" FROM queen.dead_letters d
                             WHERE d.partition_id = r.part AND d.consumer_group = r.grp
                               AND d."offset" > v_committed AND d."offset" <= coalesce(v_end, v_committed));
        END IF;

        IF NOT v_found OR v_lease IS NULL OR v_expires <= now() OR r.off <= v_committed OR r.off > v_end
           OR (p_leases[r.i] IS NOT NULL AND p_leases[r.i] <> v_lease) THEN
            error := 'Invalid or expired lease';
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_dirty := true;

        IF v_status = 'failed' THEN
            INSERT INTO queen.attempts AS a (partition_id, consumer_group, "offset", failures)
            VALUES (r.part, r.grp, r.off, 1)
            ON CONFLICT (partition_id, consumer_group, "offset") DO UPDATE SET failures = a.failures + 1
            RETURNING a.failures INTO v_fails;
            IF v_fails > r.retry_limit THEN
                v_status := 'dlq';
            END IF;
        END IF;

        IF v_status = 'dlq' THEN
            -- retryCount: the retries the message had (failures before this one).
            PERFORM queen.dead_letter(r.part, r.grp, r.off, coalesce(nullif(p_errors[r.i], ''), 'Retries exhausted'),
                                      coalesce(v_fails - 1, (SELECT a.failures FROM queen.attempts a
                                                              WHERE a.partition_id = r.part AND a.consumer_group = r.grp
                                                                AND a."offset" = r.off), 0));
            dlq := true;
        END IF;
        IF v_status IN ('completed', 'success', 'dlq') THEN
            IF r.off = v_committed + 1 THEN
                -- The common case, items in offset order: the prefix grows
                -- by one without touching the array.
                v_committed := v_committed + 1;
                v_moved := v_moved + 1;
            ELSIF NOT r.off = ANY (v_acked) THEN
                v_acked := v_acked || r.off;
            END IF;
        END IF;
        -- Advance over the contiguous resolved prefix.
        WHILE (cardinality(v_acked) > 0 AND (v_committed + 1) = ANY (v_acked))
              OR (cardinality(v_dead) > 0 AND (v_committed + 1) = ANY (v_dead)) LOOP
            v_acked := array_remove(v_acked, v_committed + 1);
            v_committed := v_committed + 1;
            v_moved := v_moved + 1;
        END LOOP;
        IF v_status IN ('failed', 'retry') OR v_committed >= v_end THEN
            -- The lease ends: the whole span is resolved, or a failure or
            -- retry hands the unresolved rest back for redelivery.
            v_acked := '{}'; v_lease := NULL; v_end := NULL; v_expires := NULL;
            v_not_bef := CASE WHEN v_status = 'failed' AND r.retry_delay > 0
                              THEN now() + make_interval(secs => r.retry_delay / 1000.0) END;
            lease_released := true;
        END IF;
        success := true;
        RETURN NEXT;
    END LOOP;
    IF v_dirty THEN
        UPDATE queen.cursors SET committed = v_committed, acked = v_acked, lease_id = v_lease,
               lease_end = v_end, lease_expires_at = v_expires, not_before = v_not_bef,
               total_consumed = total_consumed + v_moved,
               last_consumed_at = CASE WHEN v_moved > 0 THEN now() ELSE last_consumed_at END
         WHERE partition_id = v_part AND consumer_group = v_grp;
    END IF;
END;
$$;
