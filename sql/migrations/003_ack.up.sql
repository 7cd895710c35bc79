-- 003: acknowledgements, lease extension and dead letters (D2-D5).

-- frame_at returns frame k (0-based) of a segment.
CREATE FUNCTION queen.frame_at(p_frames bytea, p_ends integer[], p_k integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(p_frames FROM coalesce(p_ends[p_k], 0) + 1 FOR p_ends[p_k + 1] - coalesce(p_ends[p_k], 0))
$$;

-- advance_cursor moves committed over the contiguous prefix of resolved
-- offsets (acked inside the span, dead-lettered, or tombstoned), never
-- backwards, and ends the lease when its whole span is resolved. It returns
-- whether the lease ended. The caller holds the cursor row's lock.
CREATE FUNCTION queen.advance_cursor(p_partition uuid, p_group text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    c       record;
    v_next  bigint;
    v_acked bigint[];
    v_moved bigint := 0;
BEGIN
    SELECT * INTO c FROM queen.cursors WHERE partition_id = p_partition AND consumer_group = p_group;
    v_next := c.committed;
    v_acked := c.acked;
    LOOP
        IF (v_next + 1) = ANY (v_acked) THEN
            v_acked := array_remove(v_acked, v_next + 1);
        ELSIF NOT EXISTS (SELECT 1 FROM queen.tombstones t
                           WHERE t.partition_id = p_partition AND t."offset" = v_next + 1)
              OR c.lease_end IS NULL OR v_next + 1 > c.lease_end THEN
            EXIT;
        END IF;
        v_next := v_next + 1;
        v_moved := v_moved + 1;
    END LOOP;
    IF c.lease_end IS NOT NULL AND v_next >= c.lease_end THEN
        UPDATE queen.cursors SET committed = v_next, acked = '{}', lease_id = NULL, lease_end = NULL,
               lease_expires_at = NULL, total_consumed = total_consumed + v_moved, last_consumed_at = now()
         WHERE partition_id = p_partition AND consumer_group = p_group;
        RETURN true;
    END IF;
    UPDATE queen.cursors SET committed = v_next, acked = v_acked, total_consumed = total_consumed + v_moved,
           last_consumed_at = CASE WHEN v_moved > 0 THEN now() ELSE last_consumed_at END
     WHERE partition_id = p_partition AND consumer_group = p_group;
    RETURN false;
END;
$$;

-- end_lease ends a lease early (a failed or retry ack): committed keeps the
-- resolved prefix, acks recorded beyond it are dropped so those offsets are
-- delivered again (D3), and the span is claimable again after p_delay_ms.
CREATE FUNCTION queen.end_lease(p_partition uuid, p_group text, p_delay_ms integer)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM queen.advance_cursor(p_partition, p_group);
    UPDATE queen.cursors SET acked = '{}', lease_id = NULL, lease_end = NULL, lease_expires_at = NULL,
           not_before = CASE WHEN p_delay_ms > 0 THEN now() + make_interval(secs => p_delay_ms / 1000.0) END
     WHERE partition_id = p_partition AND consumer_group = p_group;
END;
$$;

-- dead_letter copies the frame at p_offset into the dead letters of the group.
CREATE FUNCTION queen.dead_letter(p_partition uuid, p_group text, p_offset bigint, p_error text, p_retries integer)
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
-- they came in, so cursor row locks are always taken in one order and a
-- mixed batch resolves the same way however it was sent. A given lease id
-- must be the live one. Per-item problems are results, not errors.
CREATE FUNCTION queen.ack(
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
LANGUAGE plpgsql AS $$
DECLARE
    i         integer;
    r         record;
    v_off     bigint;
    c         record;
    v_qname   text;
    v_pname   text;
    v_limit   integer;
    v_delay   integer;
    v_fails   integer;
    v_status  text;
    v_ended   boolean;
BEGIN
    FOR r IN
        SELECT t.ord::integer AS i, x."offset" AS off, q.name AS qname, p.name AS pname,
               q.retry_limit, q.retry_delay
          FROM unnest(p_parts, p_txids, p_groups) WITH ORDINALITY AS t(part, txid, grp, ord)
          LEFT JOIN queen.txids x ON x.partition_id = t.part AND x.transaction_id = t.txid
          LEFT JOIN queen.partitions p ON p.id = t.part
          LEFT JOIN queen.queues q ON q.id = p.queue_id
         ORDER BY t.part, t.grp, x."offset", t.ord
    LOOP
        i := r.i; v_off := r.off; v_qname := r.qname; v_pname := r.pname;
        v_limit := r.retry_limit; v_delay := r.retry_delay;
        idx := i; success := false; error := NULL; lease_released := false; dlq := false;
        queue_name := NULL; partition_name := NULL; v_fails := NULL;
        v_status := p_statuses[i];
        IF v_qname IS NULL OR v_off IS NULL THEN
            error := 'Message not found';
            RETURN NEXT;
            CONTINUE;
        END IF;
        queue_name := v_qname; partition_name := v_pname;
        IF v_status NOT IN ('completed', 'success', 'failed', 'retry', 'dlq') THEN
            RETURN NEXT; -- unknown status: nothing happens (A-12)
            CONTINUE;
        END IF;

        SELECT * INTO c FROM queen.cursors
         WHERE partition_id = p_parts[i] AND consumer_group = p_groups[i] FOR UPDATE;
        IF NOT FOUND OR c.lease_id IS NULL OR c.lease_expires_at <= now()
           OR v_off <= c.committed OR v_off > c.lease_end
           OR (p_leases[i] IS NOT NULL AND p_leases[i] <> c.lease_id) THEN
            error := 'Invalid or expired lease';
            RETURN NEXT;
            CONTINUE;
        END IF;

        IF v_status = 'failed' THEN
            SELECT a.failures INTO v_fails FROM queen.attempts a
             WHERE a.partition_id = p_parts[i] AND a.consumer_group = p_groups[i] AND a."offset" = v_off;
            v_fails := coalesce(v_fails, 0);
            IF v_fails >= v_limit THEN
                v_status := 'dlq'; -- the (retryLimit+1)-th failure (D4)
            END IF;
            INSERT INTO queen.attempts (partition_id, consumer_group, "offset", failures)
            VALUES (p_parts[i], p_groups[i], v_off, 1)
            ON CONFLICT (partition_id, consumer_group, "offset") DO UPDATE SET failures = queen.attempts.failures + 1;
        END IF;

        IF v_status IN ('completed', 'success') THEN
            UPDATE queen.cursors SET acked = CASE WHEN v_off = ANY (acked) THEN acked ELSE acked || v_off END
             WHERE partition_id = p_parts[i] AND consumer_group = p_groups[i];
            lease_released := queen.advance_cursor(p_parts[i], p_groups[i]);
        ELSIF v_status = 'dlq' THEN
            PERFORM queen.dead_letter(p_parts[i], p_groups[i], v_off,
                                      coalesce(nullif(p_errors[i], ''), 'Retries exhausted'),
                                      coalesce(v_fails, 0));
            UPDATE queen.cursors SET acked = CASE WHEN v_off = ANY (acked) THEN acked ELSE acked || v_off END
             WHERE partition_id = p_parts[i] AND consumer_group = p_groups[i];
            lease_released := queen.advance_cursor(p_parts[i], p_groups[i]);
            dlq := true;
        ELSE
            -- failed with budget left, or retry: the lease ends now and the
            -- unresolved rest is delivered again (after retryDelay for failed).
            PERFORM queen.end_lease(p_parts[i], p_groups[i], CASE WHEN v_status = 'failed' THEN v_delay ELSE 0 END);
            lease_released := true;
        END IF;
        success := true;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- extend_lease pushes out every live span carrying the lease id (one per
-- partition a pop claimed) to at least now + p_seconds; it never shortens a
-- lease and never revives an expired one. Returns the earliest new expiry, or
-- NULL with the reason.
CREATE FUNCTION queen.extend_lease(p_lease uuid, p_seconds integer, OUT expires_at text, OUT reason text)
LANGUAGE plpgsql AS $$
DECLARE
    v_min timestamptz;
BEGIN
    WITH upd AS (
        UPDATE queen.cursors
           SET lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => p_seconds))
         WHERE lease_id = p_lease AND lease_expires_at > now()
        RETURNING lease_expires_at
    )
    SELECT min(upd.lease_expires_at) INTO v_min FROM upd;
    IF v_min IS NOT NULL THEN
        expires_at := to_char(v_min, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ELSIF EXISTS (SELECT 1 FROM queen.cursors WHERE lease_id = p_lease) THEN
        reason := 'Lease already expired';
    ELSE
        reason := 'Lease not found';
    END IF;
END;
$$;
