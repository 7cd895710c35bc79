-- retention.sql: the data lifecycle (D9): segment retention, maxWaitTimeSeconds
-- eviction, idle-partition cleanup. The broker's retention service calls these
-- in short transactions of bounded size (docs/retention.md "Retention and
-- eviction"); lock order: docs/storage.md "Lock order". How the files of
-- sql/functions are applied: sql/sql.go (this one needs frame_at, ack.sql, and
-- seed_offset, claim.sql).

-- droppable says whether a partition's oldest segment may be dropped now.
-- Only with retentionEnabled (D9, as the reference: without it nothing is
-- deleted, whatever the two numbers say): it is older than
-- retentionSeconds, or every group has committed past it (p_min_committed,
-- the smallest committed offset, NULL when some group has no cursor on the
-- partition) and it is older than completedRetentionSeconds. Only ever
-- asked of the oldest segment, so what it drops is always a prefix of the
-- partition's log.
CREATE OR REPLACE FUNCTION queen.droppable(
    p_created        timestamptz,
    p_last           bigint,
    p_min_committed  bigint,
    p_enabled        boolean,
    p_seconds        integer,
    p_completed_secs integer,
    p_now            timestamptz
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_enabled AND ((p_seconds > 0 AND p_created < p_now - make_interval(secs => p_seconds))
                                   OR (p_completed_secs > 0 AND p_last <= p_min_committed
                                       AND p_created < p_now - make_interval(secs => p_completed_secs))), false)
$$;

-- move_cursor moves the cursor of (p_partition, p_group), which the caller
-- has locked, forward to p_to; it never moves one back. Acks recorded at or
-- below p_to go; committed then advances over the contiguous prefix of
-- resolved offsets beyond it (acked, or dead-lettered inside the lease's
-- span: D2). The lease ends when its whole span is resolved, or when it had
-- expired, and the acks recorded under it go with it, as when an ack ends a
-- lease.
CREATE OR REPLACE FUNCTION queen.move_cursor(p_partition uuid, p_group text, p_to bigint)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    c           record;
    v_committed bigint := p_to;
    v_acked     bigint[];
    v_dead      bigint[];
BEGIN
    SELECT x.committed, x.acked, x.lease_id, x.lease_end, x.lease_expires_at INTO c
      FROM queen.cursors x WHERE x.partition_id = p_partition AND x.consumer_group = p_group;
    IF NOT FOUND OR c.committed >= p_to THEN
        RETURN;
    END IF;
    v_acked := ARRAY(SELECT a FROM unnest(c.acked) AS a WHERE a > p_to);
    v_dead := ARRAY(SELECT d."offset" FROM queen.dead_letters d
                     WHERE d.partition_id = p_partition AND d.consumer_group = p_group
                       AND d."offset" > p_to AND d."offset" <= coalesce(c.lease_end, p_to) AND d.resolves);
    WHILE (v_committed + 1) = ANY (v_acked) OR (v_committed + 1) = ANY (v_dead) LOOP
        v_acked := array_remove(v_acked, v_committed + 1);
        v_committed := v_committed + 1;
    END LOOP;
    IF c.lease_id IS NOT NULL AND (v_committed >= c.lease_end OR c.lease_expires_at <= now()) THEN
        UPDATE queen.cursors
           SET committed = v_committed, acked = '{}', lease_id = NULL, lease_end = NULL, lease_expires_at = NULL
         WHERE partition_id = p_partition AND consumer_group = p_group;
    ELSE
        UPDATE queen.cursors SET committed = v_committed, acked = v_acked
         WHERE partition_id = p_partition AND consumer_group = p_group;
    END IF;
END;
$$;

-- retention_targets lists, in id order, the partitions of queues with
-- retentionEnabled and a retention option whose oldest segment may be
-- dropped now, or that have a
-- cursor behind their oldest retained offset (a first contact seeded while
-- a drop was committing). One primary-key probe of segments and cursors per
-- partition of those queues, no matter how long their logs are.
CREATE OR REPLACE FUNCTION queen.retention_targets()
RETURNS SETOF uuid
LANGUAGE sql STABLE AS $$
    SELECT p.id
      FROM queen.queues q
      JOIN queen.partitions p ON p.queue_id = q.id
      LEFT JOIN LATERAL (SELECT s.first_offset, s.last_offset, s.created_at FROM queen.segments s
                          WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) s ON true
      LEFT JOIN LATERAL (SELECT min(c.committed) AS committed FROM queen.cursors c
                          WHERE c.partition_id = p.id) c ON true
     WHERE q.retention_enabled AND (q.retention_seconds > 0 OR q.completed_retention_seconds > 0)
       AND (queen.droppable(s.created_at, s.last_offset, c.committed, q.retention_enabled, q.retention_seconds,
                            q.completed_retention_seconds, now())
            OR c.committed < coalesce(s.first_offset - 1, p.head))
     ORDER BY p.id
$$;

-- retention_take is the first half of one retention batch (retention_drop,
-- in the same transaction, is the second): it walks p_parts in order and
-- picks the droppable prefix of each partition's log until about p_limit
-- messages are picked (a batch stops at the first segment that would start
-- past the budget, and always takes at least one). It returns a 'part' row
-- per partition it looked at, with floor, the offset lagging cursors move
-- to (the oldest retained offset minus one, once the picked segments are
-- gone); a 'seg' row per picked segment, with its size in bytes and the
-- first p_head bytes of each frame (where the transaction id is: the broker
-- decodes the ids, so the frame format stays in one place); and an 'end' row
-- with done, how many leading partitions of p_parts are finished.
--
-- Completed retention waits for every group of the queue (D9): one that has
-- a subscription record on it, or a cursor on any of its partitions, but
-- none on this partition yet would start at its oldest retained message, so
-- until it has one nothing is dropped for completion. The groups of each
-- queue are counted once per call.
--
-- Locks (docs/storage.md "Lock order"): per partition, its row FOR KEY
-- SHARE SKIP LOCKED (a partition being deleted, with its queue or as idle,
-- is skipped; writers are not blocked), then its cursor rows FOR UPDATE in
-- group order, so no ack or claim sees a cursor pointing into segments
-- being dropped.
CREATE OR REPLACE FUNCTION queen.retention_take(p_parts uuid[], p_limit integer, p_head integer)
RETURNS TABLE (
    kind         text,
    partition_id uuid,
    first_offset bigint,
    last_offset  bigint,
    bytes        bigint,
    heads        bytea[],
    floor        bigint,
    done         integer
)
LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := now();
    v_budget bigint := greatest(p_limit, 1);
    v_done   integer := 0;
    v_pid    uuid;
    q        record;
    s        record;
    v_min    bigint;
    v_firsts bigint[];
    v_last   bigint;
    v_cut    boolean;
    v_frames bytea;
    v_ends   integer[];
    v_groups jsonb := '{}'; -- per queue id: how many groups it has
    v_n      bigint;
BEGIN
    FOREACH v_pid IN ARRAY p_parts LOOP
        EXIT WHEN v_budget <= 0;
        SELECT x.id, x.retention_enabled, x.retention_seconds, x.completed_retention_seconds INTO q
          FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
         WHERE p.id = v_pid
           FOR KEY SHARE OF p SKIP LOCKED;
        IF NOT FOUND THEN
            v_done := v_done + 1; -- gone, or being deleted
            CONTINUE;
        END IF;
        PERFORM 1 FROM queen.cursors c WHERE c.partition_id = v_pid ORDER BY c.consumer_group FOR UPDATE;
        SELECT min(c.committed), count(*) INTO v_min, v_n FROM queen.cursors c WHERE c.partition_id = v_pid;
        IF q.completed_retention_seconds > 0 AND v_min IS NOT NULL THEN
            IF NOT v_groups ? q.id::text THEN
                v_groups := v_groups || jsonb_build_object(q.id::text, (
                    SELECT count(*) FROM (SELECT sub.consumer_group FROM queen.subscriptions sub WHERE sub.queue_id = q.id
                                          UNION
                                          SELECT cur.consumer_group FROM queen.partitions par
                                            JOIN queen.cursors cur ON cur.partition_id = par.id
                                           WHERE par.queue_id = q.id) g));
            END IF;
            IF v_n < (v_groups ->> q.id::text)::bigint THEN
                v_min := NULL; -- a group of the queue has not met this partition
            END IF;
        END IF;

        v_firsts := '{}'; v_last := NULL; v_cut := false;
        FOR s IN SELECT x.first_offset, x.last_offset, x.created_at FROM queen.segments x
                  WHERE x.partition_id = v_pid ORDER BY x.first_offset LOOP
            EXIT WHEN NOT queen.droppable(s.created_at, s.last_offset, v_min, q.retention_enabled,
                                          q.retention_seconds, q.completed_retention_seconds, v_now);
            IF v_budget <= 0 THEN
                v_cut := true;
                EXIT;
            END IF;
            v_firsts := v_firsts || s.first_offset;
            v_last := s.last_offset;
            v_budget := v_budget - (s.last_offset - s.first_offset + 1);
        END LOOP;

        -- Head and the segments read by one statement, so a segment a writer
        -- commits meanwhile is seen by both or by neither.
        RETURN QUERY
        SELECT 'part'::text, v_pid, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bytea[],
               coalesce((SELECT min(x.first_offset) FROM queen.segments x
                          WHERE x.partition_id = v_pid AND x.first_offset > coalesce(v_last, 0)) - 1, p.head),
               NULL::integer
          FROM queen.partitions p WHERE p.id = v_pid;

        FOR s IN SELECT unnest(v_firsts) AS first_offset LOOP
            SELECT x.frames, x.ends INTO v_frames, v_ends
              FROM queen.segments x WHERE x.partition_id = v_pid AND x.first_offset = s.first_offset;
            RETURN QUERY
            SELECT 'seg'::text, v_pid, s.first_offset, s.first_offset + cardinality(v_ends) - 1,
                   octet_length(v_frames)::bigint,
                   ARRAY(SELECT substring(v_frames FROM coalesce(v_ends[k], 0) + 1
                                          FOR least(p_head, v_ends[k + 1] - coalesce(v_ends[k], 0)))
                           FROM generate_series(0, cardinality(v_ends) - 1) AS k ORDER BY k),
                   NULL::bigint, NULL::integer;
        END LOOP;
        EXIT WHEN v_cut;
        v_done := v_done + 1;
    END LOOP;
    RETURN QUERY SELECT 'end'::text, NULL::uuid, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bytea[],
                        NULL::bigint, v_done;
END;
$$;

-- retention_drop is the second half of a retention batch: it deletes the
-- picked segments (p_seg_parts, p_seg_firsts), their transaction ids
-- (p_tx_parts, p_txids: dedupe of those ids ends with them, D8) and the
-- attempt counts at or below each partition's floor, and moves the cursors
-- behind a floor to it (move_cursor). Dead letters stay: they carry their
-- own copy of the frame (D5).
CREATE OR REPLACE FUNCTION queen.retention_drop(
    p_parts      uuid[],
    p_floors     bigint[],
    p_seg_parts  uuid[],
    p_seg_firsts bigint[],
    p_tx_parts   uuid[],
    p_txids      text[]
) RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off -- every delete is by key; see append_segments in append.sql
AS $$
DECLARE
    r record;
BEGIN
    DELETE FROM queen.txids x USING unnest(p_tx_parts, p_txids) AS t(pid, txid)
     WHERE x.partition_id = t.pid AND x.transaction_id = t.txid;
    DELETE FROM queen.segments x USING unnest(p_seg_parts, p_seg_firsts) AS t(pid, first)
     WHERE x.partition_id = t.pid AND x.first_offset = t.first;
    DELETE FROM queen.attempts a USING unnest(p_parts, p_floors) AS t(pid, floor)
     WHERE a.partition_id = t.pid AND a."offset" <= t.floor;
    DELETE FROM queen.tombstones x USING unnest(p_parts, p_floors) AS t(pid, floor)
     WHERE x.partition_id = t.pid AND x."offset" <= t.floor;
    -- SKIP LOCKED passes over nothing retention_take locked (a
    -- transaction's own locks never conflict), only a cursor created since
    -- by a first contact and held by its consumer: waiting for it could
    -- close a cycle with an ack holding it, and the next run moves it.
    FOR r IN SELECT c.partition_id, c.consumer_group, t.floor
               FROM unnest(p_parts, p_floors) AS t(pid, floor)
               JOIN queen.cursors c ON c.partition_id = t.pid AND c.committed < t.floor
              ORDER BY c.partition_id, c.consumer_group
                FOR UPDATE OF c SKIP LOCKED LOOP
        PERFORM queen.move_cursor(r.partition_id, r.consumer_group, r.floor);
    END LOOP;
END;
$$;

-- eviction_targets lists, in (partition, group) order, the cursors of queues
-- with maxWaitTimeSeconds whose first unconsumed message is older than that
-- and that no consumer holds a live lease on; a partition nobody has a cursor
-- on yet is listed for queue mode (its messages wait for the default group)
-- unless a named group consumes the queue: its partitions wait for their
-- groups, which meet them at their first contact. One primary-key probe of
-- segments per cursor of those queues.
CREATE OR REPLACE FUNCTION queen.eviction_targets()
RETURNS TABLE (partition_id uuid, consumer_group text)
LANGUAGE sql STABLE AS $$
    WITH named AS (
        SELECT DISTINCT p.queue_id
          FROM queen.queues q
          JOIN queen.partitions p ON p.queue_id = q.id
          JOIN queen.cursors c ON c.partition_id = p.id
         WHERE q.max_wait_time_seconds > 0 AND c.consumer_group <> '__QUEUE_MODE__'
    )
    SELECT p.id, coalesce(c.consumer_group, '__QUEUE_MODE__')
      FROM queen.queues q
      JOIN queen.partitions p ON p.queue_id = q.id
      LEFT JOIN queen.cursors c ON c.partition_id = p.id
     WHERE q.max_wait_time_seconds > 0
       AND (c.partition_id IS NOT NULL OR q.id NOT IN (SELECT n.queue_id FROM named n))
       AND p.head > coalesce(c.committed, 0)
       AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
       -- The segment holding the first unconsumed offset, or the oldest
       -- one when the cursor is behind it.
       AND coalesce((SELECT s.created_at FROM queen.segments s
                      WHERE s.partition_id = p.id AND s.first_offset <= coalesce(c.committed, 0) + 1
                      ORDER BY s.first_offset DESC LIMIT 1),
                    (SELECT s.created_at FROM queen.segments s
                      WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1))
           < now() - make_interval(secs => q.max_wait_time_seconds)
     ORDER BY 1, 2
$$;

-- forget_evicted_cursors deletes the queue-mode cursors that eviction made
-- for partitions nobody had contacted (evict) once a named group consumes
-- the queue (has a cursor on any of its partitions): never claimed by a
-- queue-mode pop (no delivery, no lease), they would go on dead-lettering
-- every message of their partition for a group nobody runs, and, lagging,
-- count against maxSize and hold back completedRetentionSeconds (where they
-- would make queue mode one of the queue's groups). Their dead letters
-- stay, and resolve their offsets for queue mode. One that another
-- transaction holds is left for the next run. Returns how many it deleted.
CREATE OR REPLACE FUNCTION queen.forget_evicted_cursors()
RETURNS integer
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM queen.cursors c
         WHERE (c.partition_id, c.consumer_group) IN (
                   SELECT c0.partition_id, c0.consumer_group
                     FROM queen.queues q
                     JOIN queen.partitions p ON p.queue_id = q.id
                     JOIN queen.cursors c0 ON c0.partition_id = p.id
                    WHERE q.max_wait_time_seconds > 0 AND c0.consumer_group = '__QUEUE_MODE__'
                      AND c0.last_consumed_at IS NULL AND c0.lease_id IS NULL
                      AND EXISTS (SELECT 1 FROM queen.partitions np JOIN queen.cursors n ON n.partition_id = np.id
                                   WHERE np.queue_id = q.id AND n.consumer_group <> '__QUEUE_MODE__')
                    ORDER BY c0.partition_id
                      FOR UPDATE OF c0 SKIP LOCKED)
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- evict dead-letters, per group (D9), the messages of each cursor
-- (p_parts[i], p_groups[i]) that waited longer than their queue's
-- maxWaitTimeSeconds without being consumed, and moves the cursor past them,
-- until about p_limit messages are evicted. A message the group acked inside
-- an expired lease is consumed, not evicted; one it dead-lettered already
-- keeps its dead letter. A cursor under a live lease is left alone: its
-- consumer is at work, and the next run after the lease ends evicts. done
-- is how many leading targets are finished; evicted counts dead letters
-- written.
--
-- Locks (docs/storage.md "Lock order"), per target in (partition,
-- group) order, as queen.ack takes them: the queue-mode cursor it inserts
-- for a partition without any (key share on the partition), the cursor row
-- FOR UPDATE; under it the dead letters it inserts (key share on the
-- partition).
CREATE OR REPLACE FUNCTION queen.evict(p_parts uuid[], p_groups text[], p_limit integer)
RETURNS TABLE (done integer, evicted bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := now();
    v_budget bigint := greatest(p_limit, 1);
    v_wait   integer;
    c        record;
    s        record;
    v_from   bigint;
    v_start  bigint;
    v_to     bigint;
    v_cut    boolean;
    v_n      bigint;
    i        integer;
BEGIN
    done := 0;
    evicted := 0;
    FOR i IN 1 .. coalesce(cardinality(p_parts), 0) LOOP
        EXIT WHEN v_budget <= 0;
        SELECT q.max_wait_time_seconds INTO v_wait
          FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_parts[i];
        IF NOT FOUND OR v_wait <= 0 THEN
            done := done + 1;
            CONTINUE;
        END IF;
        IF p_groups[i] = '__QUEUE_MODE__' THEN
            -- Seeded as at a first contact: the oldest retained offset.
            INSERT INTO queen.cursors (partition_id, consumer_group, committed)
            SELECT p.id, '__QUEUE_MODE__', queen.seed_offset(p.id, p.head, NULL)
              FROM queen.partitions p
             WHERE p.id = p_parts[i]
               AND NOT EXISTS (SELECT 1 FROM queen.cursors x WHERE x.partition_id = p.id)
               FOR KEY SHARE OF p -- no cursor for a partition being deleted (migration 008)
            ON CONFLICT DO NOTHING;
        END IF;
        SELECT x.committed, x.acked, x.lease_id, x.lease_expires_at INTO c
          FROM queen.cursors x WHERE x.partition_id = p_parts[i] AND x.consumer_group = p_groups[i]
           FOR UPDATE;
        IF NOT FOUND OR (c.lease_id IS NOT NULL AND c.lease_expires_at > v_now) THEN
            done := done + 1;
            CONTINUE;
        END IF;

        -- From the first unconsumed offset (the oldest retained one when the
        -- cursor is behind it), segment by segment while they are older
        -- than the limit, within the budget.
        v_from := greatest(c.committed, coalesce((SELECT x.first_offset FROM queen.segments x
                                                    WHERE x.partition_id = p_parts[i]
                                                    ORDER BY x.first_offset LIMIT 1), 0) - 1) + 1;
        v_start := coalesce((SELECT max(x.first_offset) FROM queen.segments x
                              WHERE x.partition_id = p_parts[i] AND x.first_offset <= v_from), v_from);
        v_to := NULL;
        v_cut := false;
        FOR s IN SELECT x.last_offset, x.created_at FROM queen.segments x
                  WHERE x.partition_id = p_parts[i] AND x.first_offset >= v_start
                  ORDER BY x.first_offset LOOP
            EXIT WHEN s.created_at >= v_now - make_interval(secs => v_wait);
            CONTINUE WHEN s.last_offset < v_from;
            v_to := s.last_offset;
            IF v_to - v_from + 1 >= v_budget THEN
                v_to := v_from + v_budget - 1;
                v_cut := true;
                EXIT;
            END IF;
        END LOOP;
        IF v_to IS NULL THEN
            done := done + 1;
            CONTINUE;
        END IF;

        INSERT INTO queen.dead_letters (partition_id, consumer_group, "offset", frame, error_message, retry_count,
                                        original_created_at)
        SELECT p_parts[i], p_groups[i], o.o, queen.frame_at(x.frames, x.ends, (o.o - x.first_offset)::integer),
               format('Evicted: not consumed within maxWaitTimeSeconds (%s s)', v_wait),
               coalesce((SELECT a.failures FROM queen.attempts a
                          WHERE a.partition_id = p_parts[i] AND a.consumer_group = p_groups[i]
                            AND a."offset" = o.o), 0),
               x.created_at
          FROM queen.segments x
         CROSS JOIN LATERAL generate_series(greatest(x.first_offset, v_from), least(x.last_offset, v_to)) AS o(o)
         WHERE x.partition_id = p_parts[i] AND x.first_offset >= v_start AND x.first_offset <= v_to
           AND NOT (o.o = ANY (c.acked))
           -- A deleted message (D10) is resolved already, not waiting.
           AND NOT EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = p_parts[i] AND t."offset" = o.o)
        -- One that no longer resolves its offset (migration 009) becomes this one.
        ON CONFLICT (partition_id, consumer_group, "offset") DO UPDATE
           SET resolves = true, listed = true, frame = excluded.frame, error_message = excluded.error_message,
               retry_count = excluded.retry_count, failed_at = now()
         WHERE NOT queen.dead_letters.resolves;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        PERFORM queen.move_cursor(p_parts[i], p_groups[i], v_to);
        evicted := evicted + v_n;
        v_budget := v_budget - (v_to - v_from + 1);
        EXIT WHEN v_cut;
        done := done + 1;
    END LOOP;
    RETURN NEXT;
END;
$$;

-- remove_idle_partitions deletes up to p_limit partitions that hold no
-- segment and saw no activity for p_idle: no write, no cursor created or
-- consuming, no dead letter. Their cursors, attempts and dead letters go
-- with them (ON DELETE CASCADE); a push to one creates it again, under a new
-- id (P-8). Returns how many it deleted.
--
-- Like delete_queue it never waits for a row lock: it takes the partition,
-- its cursors and its dead letters with NOWAIT, and a partition with any of
-- them held elsewhere is in use after all and is left for a later run.
CREATE OR REPLACE FUNCTION queen.remove_idle_partitions(p_idle interval, p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_cut timestamptz := now() - p_idle;
    v_pid uuid;
    v_n   integer := 0;
BEGIN
    FOR v_pid IN
        SELECT p.id FROM queen.partitions p
         WHERE greatest(p.created_at, p.last_write_at) < v_cut
           AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = p.id)
           AND NOT EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = p.id
                             AND greatest(c.created_at, c.last_consumed_at) >= v_cut)
           AND NOT EXISTS (SELECT 1 FROM queen.dead_letters d WHERE d.partition_id = p.id AND d.listed
                             AND d.failed_at >= v_cut)
         ORDER BY p.id
         LIMIT p_limit
    LOOP
        BEGIN
            PERFORM 1 FROM queen.partitions p WHERE p.id = v_pid FOR UPDATE NOWAIT;
            PERFORM 1 FROM queen.cursors c WHERE c.partition_id = v_pid ORDER BY c.consumer_group FOR UPDATE NOWAIT;
            PERFORM 1 FROM queen.dead_letters d WHERE d.partition_id = v_pid FOR UPDATE NOWAIT;
            -- Under these locks nothing writes to it: look again.
            DELETE FROM queen.partitions p
             WHERE p.id = v_pid
               AND greatest(p.created_at, p.last_write_at) < v_cut
               AND NOT EXISTS (SELECT 1 FROM queen.segments s WHERE s.partition_id = p.id)
               AND NOT EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = p.id
                                 AND greatest(c.created_at, c.last_consumed_at) >= v_cut);
            IF FOUND THEN
                v_n := v_n + 1;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            NULL; -- in use: the subtransaction let go of what it took
        END;
    END LOOP;
    RETURN v_n;
END;
$$;

-- oldest_messages returns, per queue holding any, the time of its oldest
-- retained message (its segment's createdAt). One primary-key probe per
-- partition.
CREATE OR REPLACE FUNCTION queen.oldest_messages()
RETURNS TABLE (queue_name text, oldest timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT q.name, min(s.created_at)
      FROM queen.queues q
      JOIN queen.partitions p ON p.queue_id = q.id
     CROSS JOIN LATERAL (SELECT x.created_at FROM queen.segments x
                          WHERE x.partition_id = p.id ORDER BY x.first_offset LIMIT 1) s
     GROUP BY q.name
$$;
