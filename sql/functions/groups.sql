-- groups.sql: consumer-group admin (docs/api-admin.md, "Consumer groups"). How the
-- files of sql/functions are applied: sql/sql.go.
--
-- Every figure is cursor and segment arithmetic. Per (partition, group) the
-- offset lag is head - committed, and the time lag is the age of the
-- segment holding the first unconsumed offset, committed + 1: one probe of
-- the segments' primary key (partition_id, first_offset). No statement here
-- reads a frame or walks a partition's segments.

-- oldest_unconsumed is the segment holding offset p_after + 1 of the
-- partition: the last one starting at or before it (segments are
-- contiguous) or, when retention dropped that one, the first retained one
-- after p_after. No row when the partition holds nothing past p_after
-- (p_head <= p_after: not even a probe). A plain SQL function, inlined into
-- the statements that use it: a lateral probe per cursor.
CREATE OR REPLACE FUNCTION queen.oldest_unconsumed(p_partition uuid, p_after bigint, p_head bigint)
RETURNS TABLE (created_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT x.created_at
      FROM ((SELECT s.created_at FROM queen.segments s
              WHERE p_head > p_after AND s.partition_id = p_partition AND s.first_offset <= p_after + 1
              ORDER BY s.first_offset DESC LIMIT 1)
            UNION ALL
            (SELECT s.created_at FROM queen.segments s
              WHERE p_head > p_after AND s.partition_id = p_partition AND s.first_offset > p_after
              ORDER BY s.first_offset LIMIT 1)
            LIMIT 1) x
$$;

-- group_list is one page of the consumer-group list: one row per (group,
-- queue) the group has a cursor or a subscription record on, in byte order
-- of group, then queue. One pass joins every cursor to its partition (an
-- aggregate over cursor and partition rows); the page is chosen from their
-- distinct pairs, and only the page's cursors are probed
-- (oldest_unconsumed, one probe per cursor behind its head) and
-- aggregated. members counts the cursors holding a live lease;
-- max_time_lag is in whole seconds.
CREATE OR REPLACE FUNCTION queen.group_list(p_limit integer, p_offset integer)
RETURNS TABLE (consumer_group text, queue_name text, partitions bigint, members bigint,
               partitions_with_lag bigint, total_lag bigint, max_time_lag bigint, consumed boolean,
               last_activity timestamptz, sub_mode text, sub_from timestamptz, sub_created timestamptz)
LANGUAGE sql STABLE AS $$
    WITH cur AS MATERIALIZED (
        SELECT c.consumer_group, p.queue_id, p.id AS pid, p.head, c.committed, c.lease_id, c.lease_expires_at,
               c.total_consumed, c.last_consumed_at
          FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
    ), page AS MATERIALIZED (
        SELECT x.consumer_group, q.id AS queue_id, q.name
          FROM (SELECT k.consumer_group, k.queue_id FROM cur k
                UNION
                SELECT s.consumer_group, s.queue_id FROM queen.subscriptions s) x
          JOIN queen.queues q ON q.id = x.queue_id
         ORDER BY x.consumer_group COLLATE "C", q.name COLLATE "C"
         LIMIT p_limit OFFSET p_offset
    ), agg AS (
        SELECT k.consumer_group, k.queue_id, count(*) AS partitions,
               count(*) FILTER (WHERE k.lease_id IS NOT NULL AND k.lease_expires_at > now()) AS members,
               count(*) FILTER (WHERE k.head > k.committed) AS with_lag,
               sum(greatest(k.head - k.committed, 0))::bigint AS total_lag,
               coalesce(max(greatest(floor(extract(epoch FROM now() - o.created_at)), 0)), 0)::bigint
                   AS max_time_lag,
               bool_or(k.total_consumed > 0) AS consumed,
               max(k.last_consumed_at) AS last_activity
          FROM cur k
          JOIN page g ON g.consumer_group = k.consumer_group AND g.queue_id = k.queue_id
          LEFT JOIN LATERAL queen.oldest_unconsumed(k.pid, k.committed, k.head) o ON true
         GROUP BY k.consumer_group, k.queue_id
    )
    SELECT g.consumer_group, g.name, coalesce(a.partitions, 0), coalesce(a.members, 0), coalesce(a.with_lag, 0),
           coalesce(a.total_lag, 0), coalesce(a.max_time_lag, 0), coalesce(a.consumed, false), a.last_activity,
           s.mode, s.from_ts, s.created_at
      FROM page g
      LEFT JOIN agg a ON a.consumer_group = g.consumer_group AND a.queue_id = g.queue_id
      LEFT JOIN queen.subscriptions s ON s.queue_id = g.queue_id AND s.consumer_group = g.consumer_group
     ORDER BY g.consumer_group COLLATE "C", g.name COLLATE "C"
$$;

-- group_lagging is one page of the cursors whose oldest unconsumed message
-- was written at least p_min_seconds ago, the longest waiting first (then
-- by group, queue and partition). Only cursors behind their head are
-- probed. lease_id is the live lease, NULL when none.
CREATE OR REPLACE FUNCTION queen.group_lagging(p_min_seconds bigint, p_limit integer, p_offset integer)
RETURNS TABLE (consumer_group text, queue_name text, partition_name text, partition_id uuid, lease_id uuid,
               last_consumed_at timestamptz, total_consumed bigint, offset_lag bigint,
               oldest_unconsumed_at timestamptz, time_lag_seconds bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.consumer_group, q.name, p.name, p.id,
           CASE WHEN c.lease_expires_at > now() THEN c.lease_id END,
           c.last_consumed_at, c.total_consumed, p.head - c.committed, o.created_at,
           greatest(floor(extract(epoch FROM now() - o.created_at)), 0)::bigint
      FROM queen.cursors c
      JOIN queen.partitions p ON p.id = c.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     CROSS JOIN LATERAL queen.oldest_unconsumed(p.id, c.committed, p.head) o
     WHERE p.head > c.committed
       AND o.created_at <= now() - make_interval(secs => p_min_seconds)
     ORDER BY o.created_at, c.consumer_group COLLATE "C", q.name COLLATE "C", p.name COLLATE "C"
     LIMIT p_limit OFFSET p_offset
$$;

-- group_partitions is one page of a group's cursors, by queue then
-- partition (byte order), through the consumer_group index; the lag probes
-- run for the page only.
CREATE OR REPLACE FUNCTION queen.group_partitions(p_group text, p_limit integer, p_offset integer)
RETURNS TABLE (queue_name text, partition_name text, partition_id uuid, lease_id uuid,
               last_consumed_at timestamptz, total_consumed bigint, offset_lag bigint,
               oldest_unconsumed_at timestamptz, time_lag_seconds bigint)
LANGUAGE sql STABLE AS $$
    SELECT x.qname, x.pname, x.pid, x.lease, x.last_consumed_at, x.total_consumed,
           greatest(x.head - x.committed, 0), o.created_at,
           coalesce(greatest(floor(extract(epoch FROM now() - o.created_at)), 0), 0)::bigint
      FROM (SELECT q.name AS qname, p.name AS pname, p.id AS pid, p.head, c.committed,
                   CASE WHEN c.lease_expires_at > now() THEN c.lease_id END AS lease,
                   c.last_consumed_at, c.total_consumed
              FROM queen.cursors c
              JOIN queen.partitions p ON p.id = c.partition_id
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE c.consumer_group = p_group
             ORDER BY q.name COLLATE "C", p.name COLLATE "C"
             LIMIT p_limit OFFSET p_offset) x
      LEFT JOIN LATERAL queen.oldest_unconsumed(x.pid, x.committed, x.head) o ON true
     ORDER BY x.qname COLLATE "C", x.pname COLLATE "C"
$$;

-- group_known reports whether the group has a cursor or a subscription
-- record on the queue p_queue (on any queue when NULL).
CREATE OR REPLACE FUNCTION queen.group_known(p_group text, p_queue uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_queue IS NULL THEN
        RETURN EXISTS (SELECT 1 FROM queen.cursors c WHERE c.consumer_group = p_group)
            OR EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.consumer_group = p_group);
    END IF;
    RETURN EXISTS (SELECT 1 FROM queen.partitions p
                     JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
                    WHERE p.queue_id = p_queue)
        OR EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_id = p_queue AND s.consumer_group = p_group);
END;
$$;

-- unresolve_dead_letters makes the dead letters of group p_group on the
-- partitions p_parts past offset p_after stop resolving their offsets
-- (migration 009): the group's cursor there is deleted (p_after 0) or moved
-- back to p_after (a seek), and the group meets those messages again. The
-- listed dead letters stay listed; the hidden ones, taken off the queue and
-- kept only to resolve their offsets (migration 010), go. The caller holds
-- the cursors, so only a transaction removing a dead letter (requeue,
-- delete, message retry) can hold one: those are skipped rather than waited
-- for, as a retry locks the dead letters before the cursors.
CREATE OR REPLACE FUNCTION queen.unresolve_dead_letters(p_group text, p_parts uuid[], p_after bigint)
RETURNS void
LANGUAGE sql AS $$
    WITH past AS MATERIALIZED (
        SELECT d0.id, d0.listed FROM queen.dead_letters d0
         WHERE d0.partition_id = ANY (p_parts) AND d0.consumer_group = p_group
           AND d0."offset" > p_after AND d0.resolves
           FOR UPDATE SKIP LOCKED
    ), hidden AS (
        DELETE FROM queen.dead_letters d USING past p WHERE d.id = p.id AND NOT p.listed
    )
    UPDATE queen.dead_letters d SET resolves = false FROM past p WHERE d.id = p.id AND p.listed
$$;

-- delete_group deletes the cursors of p_group on the queue p_queue (on
-- every queue when NULL) with their attempt counts and, with p_metadata,
-- its subscription records there; its dead letters stay listed but no
-- longer resolve their offsets (unresolve_dead_letters). The group's next pop
-- is a first contact (D6). missing is 'queue' or 'group' (the group has
-- neither a cursor nor a record there) when nothing was done; queues and
-- partitions name the cursors deleted, in partition id order. The state
-- rows of the stream queries whose cycles ack with the group go with its
-- cursors, partition by partition.
--
-- Locks (docs/storage.md, "Lock order"): the subscription records
-- first, as a claim round writes them before cursors; then the cursor rows
-- FOR UPDATE in (partition, group) order, as acks take them; under them the
-- attempts rows, which are only written under their cursor's lock, and the
-- group's dead letters there (skipping any being removed). No partition row
-- is locked.
CREATE OR REPLACE FUNCTION queen.delete_group(p_group text, p_queue text, p_metadata boolean,
                                              OUT missing text, OUT queues text[], OUT partitions uuid[])
LANGUAGE plpgsql AS $$
DECLARE
    v_qid  uuid;
    v_subs boolean;
BEGIN
    queues := '{}';
    partitions := '{}';
    IF p_queue IS NOT NULL THEN
        SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_queue;
        IF NOT FOUND THEN
            missing := 'queue';
            RETURN;
        END IF;
    END IF;
    IF p_metadata THEN
        DELETE FROM queen.subscriptions s
         WHERE s.consumer_group = p_group AND (v_qid IS NULL OR s.queue_id = v_qid);
        v_subs := FOUND;
    ELSE
        v_subs := EXISTS (SELECT 1 FROM queen.subscriptions s
                           WHERE s.consumer_group = p_group AND (v_qid IS NULL OR s.queue_id = v_qid));
    END IF;
    -- Stream queries consuming with the group (queen_streams.queries.
    -- consumer_group): their cycles' serialisation points first, as a cycle
    -- takes its own before any row, so a cycle and this never wait for each
    -- other's rows.
    PERFORM pg_advisory_xact_lock(x'7173'::integer, hashtext(l.qid::text || l.pid::text))
       FROM (SELECT sq.id AS qid, c.partition_id AS pid
               FROM queen_streams.queries sq
               JOIN queen.cursors c ON c.consumer_group = sq.consumer_group
               JOIN queen.partitions p ON p.id = c.partition_id
              WHERE sq.consumer_group = p_group AND (v_qid IS NULL OR p.queue_id = v_qid)
              ORDER BY sq.id, c.partition_id) l;
    SELECT coalesce(array_agg(l.qname ORDER BY l.pid), '{}'), coalesce(array_agg(l.pid ORDER BY l.pid), '{}')
      INTO queues, partitions
      FROM (SELECT c.partition_id AS pid, q.name AS qname
              FROM queen.cursors c
              JOIN queen.partitions p ON p.id = c.partition_id
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE c.consumer_group = p_group AND (v_qid IS NULL OR p.queue_id = v_qid)
             ORDER BY c.partition_id
               FOR UPDATE OF c) l;
    IF cardinality(partitions) = 0 AND NOT v_subs THEN
        missing := 'group';
        RETURN;
    END IF;
    DELETE FROM queen.attempts a WHERE a.partition_id = ANY (partitions) AND a.consumer_group = p_group;
    PERFORM queen.unresolve_dead_letters(p_group, partitions, 0);
    DELETE FROM queen.cursors c WHERE c.partition_id = ANY (partitions) AND c.consumer_group = p_group;
    -- The state the group's stream queries built from these partitions:
    -- the group starts over, and so does their state (docs/retention.md
    -- "Streams").
    DELETE FROM queen_streams.state s USING queen_streams.queries sq
     WHERE sq.consumer_group = p_group AND s.query_id = sq.id AND s.partition_id = ANY (partitions);
END;
$$;

-- seek_offset is the committed offset a seek to p_at gives a cursor on the
-- partition (D6's segment granularity): the last offset of the last
-- segment written at or before p_at, or, when every retained segment is
-- younger, just before the oldest retained offset (the partition restarts
-- from its beginning); p_head when it retains nothing. created_at never
-- decreases along a log, so the segment is found by a binary search over
-- offsets, each step one primary-key probe: about log2(messages) probes,
-- however old p_at is.
CREATE OR REPLACE FUNCTION queen.seek_offset(p_partition uuid, p_head bigint, p_at timestamptz)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_first bigint;
    v_last  bigint;
    v_at    timestamptz;
    v_best  bigint;
    v_lo    bigint;
    v_hi    bigint;
    v_mid   bigint;
BEGIN
    SELECT s.first_offset, s.last_offset, s.created_at INTO v_first, v_last, v_at
      FROM queen.segments s WHERE s.partition_id = p_partition
     ORDER BY s.first_offset LIMIT 1;
    IF NOT FOUND THEN
        RETURN p_head;
    END IF;
    IF v_at > p_at THEN
        RETURN v_first - 1;
    END IF;
    -- v_best is the last offset of a segment written at or before p_at;
    -- the answer's segment starts in [v_lo, v_hi], or v_best is it.
    v_best := v_last;
    v_lo := v_last + 1;
    v_hi := p_head;
    WHILE v_lo <= v_hi LOOP
        v_mid := v_lo + (v_hi - v_lo) / 2;
        SELECT s.first_offset, s.last_offset, s.created_at INTO v_first, v_last, v_at
          FROM queen.segments s WHERE s.partition_id = p_partition AND s.first_offset <= v_mid
         ORDER BY s.first_offset DESC LIMIT 1;
        IF v_at <= p_at THEN
            v_best := v_last;
            v_lo := v_last + 1;
        ELSE
            v_hi := v_first - 1;
        END IF;
    END LOOP;
    RETURN v_best;
END;
$$;

-- seek_group moves every cursor p_group has on the queue p_queue (on its
-- partition p_partition only, when given) to its partition's head
-- (p_to_end) or to seek_offset(p_at), and releases its lease: no lease, no
-- acked offsets, no retry delay. Acks under the old lease then fail; the
-- span is claimable again. Partitions the group never contacted are left
-- alone. Attempt counts stay; dead letters stay listed, and the ones past
-- the cursor's new place no longer resolve their offsets
-- (unresolve_dead_letters): a seek back delivers those messages again, as
-- it does every other. missing is 'queue', 'partition' or 'group' (neither a
-- cursor nor a record on the queue) when nothing was done; partitions lists
-- the cursors moved; head_at is when p_partition's newest segment was
-- written.
--
-- Locks: the cursor rows FOR UPDATE in (partition, group) order, as acks
-- take them, each updated as it is locked, then its dead letters (skipping
-- any being removed); partition rows are only read.
CREATE OR REPLACE FUNCTION queen.seek_group(p_group text, p_queue text, p_partition text, p_to_end boolean,
                                            p_at timestamptz,
                                            OUT missing text, OUT partitions uuid[], OUT head_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_qid       uuid;
    v_pid       uuid;
    v_committed bigint;
    r           record;
BEGIN
    partitions := '{}';
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_queue;
    IF NOT FOUND THEN
        missing := 'queue';
        RETURN;
    END IF;
    IF p_partition IS NOT NULL THEN
        SELECT p.id INTO v_pid FROM queen.partitions p WHERE p.queue_id = v_qid AND p.name = p_partition;
        IF NOT FOUND THEN
            missing := 'partition';
            RETURN;
        END IF;
        SELECT s.created_at INTO head_at FROM queen.segments s WHERE s.partition_id = v_pid
         ORDER BY s.first_offset DESC LIMIT 1;
    END IF;
    FOR r IN SELECT c.partition_id, p.head
               FROM queen.partitions p
               JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
              WHERE p.queue_id = v_qid AND (v_pid IS NULL OR p.id = v_pid)
              ORDER BY c.partition_id
                FOR UPDATE OF c
    LOOP
        UPDATE queen.cursors c
           SET committed = CASE WHEN p_to_end THEN r.head ELSE queen.seek_offset(r.partition_id, r.head, p_at) END,
               lease_id = NULL, lease_end = NULL, lease_expires_at = NULL, acked = '{}', not_before = NULL
         WHERE c.partition_id = r.partition_id AND c.consumer_group = p_group
        RETURNING c.committed INTO v_committed;
        PERFORM queen.unresolve_dead_letters(p_group, ARRAY[r.partition_id], v_committed);
        partitions := partitions || r.partition_id;
    END LOOP;
    IF cardinality(partitions) = 0 AND NOT queen.group_known(p_group, v_qid) THEN
        missing := 'group';
    END IF;
END;
$$;
