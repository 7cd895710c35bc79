-- claim.sql: the read path of a pop: frame and offset helpers and claim. How
-- the files of sql/functions are applied: sql/sql.go.

-- frame_slice returns frames k0..k1 (0-based, inclusive) of a segment.
CREATE OR REPLACE FUNCTION queen.frame_slice(p_frames bytea, p_ends integer[], p_k0 integer, p_k1 integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_k0 = 0 AND p_k1 = cardinality(p_ends) - 1 THEN p_frames
                ELSE substring(p_frames FROM coalesce(p_ends[p_k0], 0) + 1
                               FOR p_ends[p_k1 + 1] - coalesce(p_ends[p_k0], 0)) END
$$;

-- deliverable_head is the last offset of a partition a pop may deliver now:
-- its head, or with delayedProcessing the end of the last segment old enough.
CREATE OR REPLACE FUNCTION queen.deliverable_head(p_partition uuid, p_head bigint, p_delay integer, p_now timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_delay <= 0 THEN p_head ELSE
        coalesce((SELECT s.last_offset FROM queen.segments s
                   WHERE s.partition_id = p_partition AND s.created_at <= p_now - make_interval(secs => p_delay)
                   ORDER BY s.first_offset DESC LIMIT 1), 0) END
$$;

-- seed_offset is the committed offset a (partition, group) starts from at first
-- contact (D6): the oldest retained offset minus one, or, from a timestamp, the
-- last offset of the last segment created before it.
CREATE OR REPLACE FUNCTION queen.seed_offset(p_partition uuid, p_head bigint, p_from timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT greatest(
        coalesce((SELECT min(s.first_offset) - 1 FROM queen.segments s WHERE s.partition_id = p_partition), p_head),
        CASE WHEN p_from IS NULL THEN 0 ELSE
            coalesce((SELECT s.last_offset FROM queen.segments s
                       WHERE s.partition_id = p_partition AND s.created_at < p_from
                       ORDER BY s.first_offset DESC LIMIT 1), 0)
        END)
$$;

-- claim serves one pop: it leases (or, with autoAck, commits) spans just past
-- the group's cursor in up to p_max_parts partitions (0: no cap) within one
-- message budget, and returns the segments that hold them, one row each, in
-- delivery order. A final row with kind 'end' reports how many messages were
-- taken and which claimable partitions (up to 1000) it left untaken because
-- the budget or the cap ran out (ready); the ones a concurrent pop had locked
-- are not reported, that pop reports them.
--
-- p_queue_ids lists the queues in scope, highest priority first; p_partition
-- restricts the pop to one partition; p_candidates, when not NULL, restricts
-- the search to the partitions the broker believes ready, so an idle or leased
-- partition costs nothing. p_sub_mode is '' (not given), 'all' or 'new';
-- p_sub_from is a parsed subscriptionFrom ('now' resolves to now()) or NULL.
-- With p_min > 0 nothing is leased unless at least p_min messages are
-- available: the 'end' row then reports the count (minPopWaitTime holds).
CREATE OR REPLACE FUNCTION queen.claim(
    p_queue_ids     uuid[],
    p_partition     uuid,
    p_group         text,
    p_batch         integer,
    p_max_parts     integer,
    p_lease_seconds integer,
    p_auto_ack      boolean,
    p_lease_id      uuid,
    p_sub_mode      text,
    p_sub_from      timestamptz,
    p_candidates    uuid[],
    p_min           integer
) RETURNS TABLE (
    kind           text,
    partition_id   uuid,
    partition_name text,
    queue_name     text,
    span_from      bigint,
    span_to        bigint,
    lease_ms       bigint,
    first_offset   bigint,
    created_at     text,
    frames         bytea,
    taken          bigint,
    ready          uuid[],
    dead           bigint[]
)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
DECLARE
    v_now       timestamptz := now();
    v_budget    integer := greatest(p_batch, 1);
    v_qid       uuid;
    v_sub       record;
    v_from      timestamptz;
    v_intent    boolean := p_sub_mode <> '' OR p_sub_from IS NOT NULL;
    r           record;
    v_head      bigint;
    v_take      bigint;
    v_total     bigint := 0;
    v_ready     uuid[];
    v_skipped   uuid[] := '{}';
    v_dead      bigint[];
    v_pid       uuid;
    v_pids      uuid[] := '{}';
    v_froms     bigint[] := '{}';
    v_ends      bigint[] := '{}';
    v_leases    integer[] := '{}';
    v_pnames    text[] := '{}';
    v_qnames    text[] := '{}';
    v_start     bigint;
    i           integer;
BEGIN
    -- First contact: create the cursors this group lacks, seeded (D6). Queue
    -- mode is never seeded: it always starts at the oldest retained message.
    -- Queues in id order, and in each its subscription record before its
    -- cursors: a concurrent first contact of the same group waits on every
    -- row this one inserted first, so every claim inserts in one order
    -- (lock order: docs/architecture.md).
    FOREACH v_qid IN ARRAY ARRAY(SELECT u FROM unnest(p_queue_ids) AS u ORDER BY u) LOOP
        v_from := NULL;
        IF p_group <> '__QUEUE_MODE__' THEN
            SELECT s.mode, s.from_ts INTO v_sub
              FROM queen.subscriptions s WHERE s.queue_id = v_qid AND s.consumer_group = p_group;
            IF FOUND THEN
                v_from := v_sub.from_ts;
            ELSIF v_intent THEN
                v_from := CASE WHEN p_sub_from IS NOT NULL THEN p_sub_from
                               WHEN p_sub_mode = 'new' THEN v_now END;
                IF NOT EXISTS (SELECT 1 FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
                                WHERE p.queue_id = v_qid AND c.consumer_group = p_group) THEN
                    INSERT INTO queen.subscriptions (queue_id, consumer_group, mode, from_ts)
                    VALUES (v_qid, p_group,
                            CASE WHEN p_sub_from IS NOT NULL THEN 'timestamp'
                                 WHEN p_sub_mode = 'new' THEN 'new' ELSE 'all' END,
                            v_from)
                    ON CONFLICT DO NOTHING;
                END IF;
            END IF;
        END IF;

        -- In partition id order (see above). The foreign-key check takes
        -- FOR KEY SHARE on each partition row, which the writers' FOR NO
        -- KEY UPDATE does not block: a first contact never waits for a
        -- segment write (issue 8).
        INSERT INTO queen.cursors (partition_id, consumer_group, committed)
        SELECT p.id, p_group, queen.seed_offset(p.id, p.head, v_from)
          FROM queen.partitions p
         WHERE p.queue_id = v_qid
           AND (p_partition IS NULL OR p.id = p_partition)
           AND (p_candidates IS NULL OR p.id = ANY (p_candidates))
           AND NOT EXISTS (SELECT 1 FROM queen.cursors c
                            WHERE c.partition_id = p.id AND c.consumer_group = p_group)
         ORDER BY p.id
        ON CONFLICT DO NOTHING;
    END LOOP;

    -- Which partitions are claimable now, in claim order, read without
    -- locks. Partitions whose backlog is all younger than delayedProcessing
    -- are not, so they neither count toward the cap nor starve the others.
    SELECT coalesce(array_agg(x.pid ORDER BY x.qpos, x.lca NULLS FIRST), '{}') INTO v_ready
      FROM (SELECT c.partition_id AS pid, array_position(p_queue_ids, p.queue_id) AS qpos,
                   c.last_consumed_at AS lca
              FROM queen.cursors c
              JOIN queen.partitions p ON p.id = c.partition_id
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE c.consumer_group = p_group
               AND p.queue_id = ANY (p_queue_ids)
               AND (p_partition IS NULL OR p.id = p_partition)
               AND (p_candidates IS NULL OR p.id = ANY (p_candidates))
               AND p.head > c.committed
               AND (c.lease_id IS NULL OR c.lease_expires_at <= v_now)
               AND (c.not_before IS NULL OR c.not_before <= v_now)
               AND (q.window_buffer <= 0 OR p.last_write_at <= v_now - make_interval(secs => q.window_buffer))
               AND (q.delayed_processing <= 0
                    OR queen.deliverable_head(p.id, p.head, q.delayed_processing, v_now) > c.committed)
             ORDER BY 2, 3 NULLS FIRST
             LIMIT 1000) x;

    -- Lock them one at a time (SKIP LOCKED: a concurrent pop keeps what it
    -- locked) and cut spans within the budget, partition by partition. A
    -- row is locked only when it is about to be used, so a pop never holds
    -- partitions it will not take.
    FOREACH v_pid IN ARRAY v_ready LOOP
        EXIT WHEN v_budget <= 0 OR (p_max_parts > 0 AND cardinality(v_pids) >= p_max_parts);
        SELECT c.committed, p.name AS pname, p.head, q.name AS qname, q.lease_time, q.delayed_processing
          INTO r
          FROM queen.cursors c
          JOIN queen.partitions p ON p.id = c.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE c.partition_id = v_pid AND c.consumer_group = p_group
           AND p.head > c.committed
           AND (c.lease_id IS NULL OR c.lease_expires_at <= v_now)
           AND (c.not_before IS NULL OR c.not_before <= v_now)
           FOR UPDATE OF c SKIP LOCKED;
        IF NOT FOUND THEN
            v_skipped := v_skipped || v_pid; -- a concurrent pop has it
            CONTINUE;
        END IF;
        v_head := CASE WHEN r.delayed_processing > 0
                       THEN queen.deliverable_head(v_pid, r.head, r.delayed_processing, v_now) ELSE r.head END;
        v_take := least(v_head - r.committed, v_budget);
        CONTINUE WHEN v_take <= 0;

        v_pids := v_pids || v_pid;
        v_froms := v_froms || (r.committed + 1);
        v_ends := v_ends || (r.committed + v_take);
        v_leases := v_leases || CASE WHEN p_lease_seconds > 0 THEN p_lease_seconds
                                     WHEN r.lease_time > 0 THEN r.lease_time ELSE 60 END;
        v_pnames := v_pnames || r.pname;
        v_qnames := v_qnames || r.qname;
        v_budget := v_budget - v_take::integer;
        v_total := v_total + v_take;
    END LOOP;

    IF p_min > 0 AND v_total < p_min THEN
        RETURN QUERY SELECT 'end'::text, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
                            NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, v_total, v_ready, NULL::bigint[];
        RETURN;
    END IF;

    FOR i IN 1 .. cardinality(v_pids) LOOP
        IF p_auto_ack THEN
            UPDATE queen.cursors c
               SET committed = v_ends[i], lease_id = NULL, lease_end = NULL, lease_expires_at = NULL,
                   acked = '{}', total_consumed = c.total_consumed + (v_ends[i] - v_froms[i] + 1),
                   last_consumed_at = v_now
             WHERE c.partition_id = v_pids[i] AND c.consumer_group = p_group;
        ELSE
            UPDATE queen.cursors c
               SET lease_id = p_lease_id, lease_end = v_ends[i],
                   lease_expires_at = v_now + make_interval(secs => v_leases[i]),
                   acked = '{}', last_consumed_at = v_now
             WHERE c.partition_id = v_pids[i] AND c.consumer_group = p_group;
        END IF;

        SELECT coalesce(max(s.first_offset), v_froms[i]) INTO v_start FROM queen.segments s
         WHERE s.partition_id = v_pids[i] AND s.first_offset <= v_froms[i];

        -- Offsets of the span this group dead-lettered under an earlier
        -- lease stay resolved: they are leased along but not delivered (D5).
        v_dead := ARRAY(SELECT d."offset" FROM queen.dead_letters d
                         WHERE d.partition_id = v_pids[i] AND d.consumer_group = p_group
                           AND d."offset" BETWEEN v_froms[i] AND v_ends[i]);

        -- Only the span's frames leave the database: the first and last
        -- segments are cut with their ends[] table.
        RETURN QUERY
        SELECT 'seg'::text, v_pids[i], v_pnames[i], v_qnames[i], v_froms[i], v_ends[i], v_leases[i] * 1000::bigint,
               s.first_offset + x.k0, to_char(s.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
               queen.frame_slice(s.frames, s.ends, x.k0, x.k1), NULL::bigint, NULL::uuid[], v_dead
          FROM queen.segments s,
               LATERAL (SELECT greatest(v_froms[i] - s.first_offset, 0)::integer AS k0,
                               (least(v_ends[i], s.last_offset) - s.first_offset)::integer AS k1) x
         WHERE s.partition_id = v_pids[i] AND s.first_offset >= v_start AND s.first_offset <= v_ends[i]
         ORDER BY s.first_offset;
    END LOOP;

    RETURN QUERY SELECT 'end'::text, NULL::uuid, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
                        NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, v_total,
                        ARRAY(SELECT u FROM unnest(v_ready) AS u WHERE u <> ALL (v_pids) AND u <> ALL (v_skipped)),
                        NULL::bigint[];
END;
$$;
