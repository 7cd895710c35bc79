-- resources.sql: the figures of the resource routes and the queue clear.
-- How the files of sql/functions are applied: sql/sql.go.

-- The figures' function once took no p_newest.
DROP FUNCTION IF EXISTS queen.partition_figures(uuid[]);

-- partition_figures returns, per partition of p_pids (every partition when
-- NULL), its message figures,
-- by arithmetic on offsets, never by reading frames (docs/api-admin.md,
-- "Resources"):
--
--   base       the offset before the oldest retained one (its first
--              segment's first offset - 1, or head when none is retained)
--   total      retained messages: head - base
--   per cursor (partition, group), with hi the end of its live lease, else
--   committed, and tafter the tombstoned offsets past hi:
--     completed  resolved: retained offsets <= committed, the acked ones of
--                the live lease, tafter (dead-lettered offsets included)
--     processing inside the live lease and not acked
--     pending    past hi, minus tafter
--     failed     offsets past committed with a failed attempt (a part of
--                pending + processing)
--   pending, processing, completed, failed  summed over the partition's
--              cursors (a message counts once per group); a partition no
--              group has contacted counts every retained message that is
--              not tombstoned as pending
--   dead_letter the partition's dead letters, every group (they outlive
--              the segments)
--   oldest_at  the created_at of its first segment; newest_at of its last,
--              only with p_newest (NULL otherwise)
--
-- Cost: one probe of the segments' primary key per partition (two with
-- p_newest); cursors, attempts, dead letters and tombstones of the
-- partitions are read in one pass each and joined by hash, not probed per
-- partition (attempts and tombstones are small: the rows of failures and
-- deletes, dropped with their segments).
CREATE OR REPLACE FUNCTION queen.partition_figures(p_pids uuid[], p_newest boolean)
RETURNS TABLE (partition_id uuid, base bigint, total bigint, pending bigint, processing bigint, completed bigint,
               failed bigint, dead_letter bigint, oldest_at timestamptz, newest_at timestamptz, groups integer)
LANGUAGE plpgsql STABLE
-- The planner's estimates for the joins of every partition run into the
-- millions, past jit_above_cost; compiling the plan cost about 30 ms a call
-- at 10,000 partitions, more than its work on the cursors.
SET jit = off
AS $fn$
BEGIN
    -- EXECUTE: planned for the array it is given, so a few partitions are
    -- probed by key and thousands are joined by hash (a cached generic plan
    -- assumes a handful and probes every cursor one by one).
    RETURN QUERY EXECUTE $q$
    WITH pp AS MATERIALIZED (
        SELECT p.id, p.head, coalesce(s0.first_offset - 1, p.head) AS base, s0.created_at AS oldest_at
          FROM queen.partitions p
          LEFT JOIN LATERAL (SELECT s.first_offset, s.created_at FROM queen.segments s
                              WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1) s0 ON true
         WHERE ($1 IS NULL OR p.id = ANY ($1))
    ), tb AS MATERIALIZED (
        SELECT t.partition_id, count(*) AS n, array_agg(t."offset") AS offs
          FROM queen.tombstones t WHERE ($1 IS NULL OR t.partition_id = ANY ($1)) GROUP BY t.partition_id
    ), cx AS (
        SELECT c.partition_id, c.consumer_group, c.committed, greatest(c.committed, pp.base) - pp.base AS done,
               pp.head - greatest(CASE WHEN l.live THEN c.lease_end ELSE c.committed END, pp.base) AS ahead,
               greatest(CASE WHEN l.live THEN c.lease_end ELSE c.committed END, pp.base) AS hi,
               CASE WHEN l.live THEN cardinality(c.acked) ELSE 0 END AS acked_n,
               CASE WHEN l.live THEN greatest(c.lease_end - c.committed - cardinality(c.acked), 0) ELSE 0 END AS processing
          FROM queen.cursors c
          JOIN pp ON pp.id = c.partition_id
         CROSS JOIN LATERAL (SELECT c.lease_id IS NOT NULL AND c.lease_expires_at > now() AS live) l
    ), cc AS (
        SELECT cx.partition_id, count(*)::integer AS n,
               sum(greatest(cx.ahead, 0) - t.after)::bigint AS pending,
               sum(cx.processing)::bigint AS processing,
               sum(cx.done + cx.acked_n + t.after)::bigint AS completed
          FROM cx
          LEFT JOIN tb ON tb.partition_id = cx.partition_id
         CROSS JOIN LATERAL (SELECT CASE WHEN tb.offs IS NULL THEN 0
                                         ELSE (SELECT count(*) FROM unnest(tb.offs) AS o WHERE o > cx.hi) END AS after) t
         GROUP BY cx.partition_id
    ), fa AS (
        SELECT a.partition_id, count(*) AS n
          FROM queen.attempts a
          JOIN queen.cursors c ON c.partition_id = a.partition_id AND c.consumer_group = a.consumer_group
         WHERE ($1 IS NULL OR a.partition_id = ANY ($1)) AND a."offset" > c.committed
           -- acked inside the live lease: completed, not failed
           AND NOT (c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND a."offset" = ANY (c.acked))
         GROUP BY a.partition_id
    ), dl AS (
        SELECT d.partition_id, count(*) AS n FROM queen.dead_letters d WHERE d.listed AND ($1 IS NULL OR d.partition_id = ANY ($1))
         GROUP BY d.partition_id
    )
    SELECT pp.id, pp.base, pp.head - pp.base,
           CASE WHEN cc.n IS NULL THEN pp.head - pp.base - coalesce(tb.n, 0) ELSE cc.pending END,
           coalesce(cc.processing, 0),
           CASE WHEN cc.n IS NULL THEN coalesce(tb.n, 0) ELSE cc.completed END,
           coalesce(fa.n, 0), coalesce(dl.n, 0), pp.oldest_at,
           CASE WHEN $2 THEN (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = pp.id
                                     ORDER BY s.first_offset DESC LIMIT 1) END,
           coalesce(cc.n, 0)
      FROM pp
      LEFT JOIN cc ON cc.partition_id = pp.id
      LEFT JOIN tb ON tb.partition_id = pp.id
      LEFT JOIN fa ON fa.partition_id = pp.id
      LEFT JOIN dl ON dl.partition_id = pp.id
    $q$ USING p_pids, p_newest;
END;
$fn$;

-- cursor_lag describes the lag of every cursor (partition, group), caught-up
-- ones included: in messages (head - committed) and in seconds (the age of
-- the segment holding its first unconsumed message, the oldest retained one
-- when retention dropped past it; 0 when it consumed everything): average,
-- median, minimum and maximum of each. One probe of the segments' primary
-- key per lagging cursor.
CREATE OR REPLACE FUNCTION queen.cursor_lag()
RETURNS TABLE (msgs_avg float8, msgs_median float8, msgs_min float8, msgs_max float8,
               secs_avg float8, secs_median float8, secs_min float8, secs_max float8)
LANGUAGE sql STABLE
-- Its estimated cost passes jit_inline_above_cost at 30,000 cursors:
-- compiling, inlining and optimising the plan took about 220 ms a call,
-- three times the work.
SET jit = off
AS $$
    SELECT coalesce(avg(l.msgs), 0), coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.msgs), 0),
           coalesce(min(l.msgs), 0), coalesce(max(l.msgs), 0),
           coalesce(avg(l.secs), 0), coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.secs), 0),
           coalesce(min(l.secs), 0), coalesce(max(l.secs), 0)
      FROM (SELECT greatest(p.head - c.committed, 0)::float8 AS msgs,
                   CASE WHEN p.head <= c.committed THEN 0 ELSE
                       coalesce(extract(epoch FROM now() - coalesce(
                           (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
                               AND s.first_offset <= c.committed + 1 ORDER BY s.first_offset DESC LIMIT 1),
                           (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = p.id
                             ORDER BY s.first_offset LIMIT 1))), 0) END::float8 AS secs
              FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
            OFFSET 0) l -- evaluated once per cursor, not once per aggregate
$$;

-- clear_queue empties queue p_queue, or only its partition p_partition when
-- that is not NULL: it drops every segment, transaction id, attempt count
-- and tombstone of those partitions and moves every cursor on them to the
-- head, ending its lease. The queue, its partitions, their heads (offsets
-- keep growing: none is ever used twice), subscriptions, configuration and
-- dead letters stay. outcome is 'queue' or 'partition' when that is not
-- found, else 'ok' with the partitions cleared and the messages dropped.
--
-- Like delete_queue it never waits for a row lock: it takes the partition
-- rows FOR UPDATE NOWAIT in id order (so no writer, retention batch, first
-- contact, ack failure or delete is inside them), then their cursors FOR
-- UPDATE NOWAIT in (partition, group) order (so no claim, ack or eviction
-- is), and when one is held elsewhere it rolls back what it took and tries
-- again a little later, for up to 10 s (then lock_not_available, 55P03).
CREATE OR REPLACE FUNCTION queen.clear_queue(p_queue text, p_partition text)
RETURNS TABLE (outcome text, cleared integer, dropped bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_qid   uuid;
    v_pids  uuid[];
    v_until timestamptz := clock_timestamp() + interval '10 seconds';
    v_sleep float8 := 0.002;
BEGIN
    LOOP
        BEGIN
            SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_queue;
            IF v_qid IS NULL THEN
                outcome := 'queue';
                RETURN NEXT;
                RETURN;
            END IF;
            v_pids := ARRAY(SELECT p.id FROM queen.partitions p
                             WHERE p.queue_id = v_qid AND (p_partition IS NULL OR p.name = p_partition)
                             ORDER BY p.id FOR UPDATE NOWAIT);
            IF p_partition IS NOT NULL AND cardinality(v_pids) = 0 THEN
                outcome := 'partition';
                RETURN NEXT;
                RETURN;
            END IF;
            PERFORM 1 FROM queen.cursors c WHERE c.partition_id = ANY (v_pids)
             ORDER BY c.partition_id, c.consumer_group FOR UPDATE NOWAIT;
            SELECT coalesce(sum(p.head - f.base), 0) INTO dropped
              FROM queen.partitions p
             CROSS JOIN LATERAL (SELECT coalesce((SELECT s.first_offset - 1 FROM queen.segments s
                                                   WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1),
                                                 p.head) AS base) f
             WHERE p.id = ANY (v_pids);
            DELETE FROM queen.segments s WHERE s.partition_id = ANY (v_pids);
            DELETE FROM queen.txids x WHERE x.partition_id = ANY (v_pids);
            DELETE FROM queen.attempts a WHERE a.partition_id = ANY (v_pids);
            DELETE FROM queen.tombstones t WHERE t.partition_id = ANY (v_pids);
            UPDATE queen.cursors c
               SET committed = p.head, lease_id = NULL, lease_end = NULL, lease_expires_at = NULL, acked = '{}',
                   not_before = NULL
              FROM queen.partitions p
             WHERE p.id = c.partition_id AND c.partition_id = ANY (v_pids);
            outcome := 'ok';
            cleared := cardinality(v_pids);
            RETURN NEXT;
            RETURN;
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
