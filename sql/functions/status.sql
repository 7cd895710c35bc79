-- status.sql: the figures of the status routes and of the metrics collector
-- (actors/collector.go; docs/api-admin.md "Status, analytics and metrics"). Every
-- figure is cursor and segment arithmetic: an aggregate over partition and
-- cursor rows, at most two primary-key probes of queen.segments per
-- partition, and, only when the partitions have any, a probe per cursor of
-- their tombstones and failed attempts; no statement reads a message.
-- Read-only. How the files of sql/functions are applied: sql/sql.go (this
-- one needs queen.tombstones, migration 004).
--
-- The definitions are the resource routes' (docs/api-admin.md "Resources"). Per
-- (partition, group), with base the oldest retained offset minus one (head
-- when the partition holds no segment), committed taken no lower than base,
-- and a live lease one with lease_id set and lease_expires_at in the future:
--   processing = lease_end - committed - cardinality(acked) for a live
--                lease, else 0: leased, not yet acked;
--   pending    = head - (lease_end of a live lease, else committed), minus
--                the tombstoned offsets there;
--   completed  = committed - base, plus the acked offsets of a live lease,
--                plus the tombstoned offsets past the lease (or committed);
--   failed     = offsets past committed with at least one failed ack
--                (queen.attempts): a part of pending + processing.
-- So pending + processing + completed = head - base, the retained messages,
-- per group. A partition no group has a cursor on counts as one group at
-- base: every retained message not tombstoned is pending.

-- status_partitions: the figures of every partition of p_queues (NULL: of
-- every queue), summed over its groups, and its dead letters. Dynamic SQL,
-- planned at each call with the list at hand: an index lookup per queue for
-- a few queues, one pass over partitions and cursors for all of them (a
-- plan for both would be the worse of the two).
CREATE OR REPLACE FUNCTION queen.status_partitions(p_queues uuid[])
RETURNS TABLE (
    queue_id             uuid,
    partition_id         uuid,
    head                 bigint,
    retained             bigint,
    groups               integer,
    pending              bigint,
    processing           bigint,
    completed            bigint,
    failed               bigint,
    offset_lag           bigint,
    max_offset_lag       bigint,
    consumed             bigint,
    leases               integer,
    leased               bigint,
    leased_acked         bigint,
    oldest_unconsumed_at timestamptz,
    last_consumed_at     timestamptz,
    dead_letters         bigint
)
LANGUAGE plpgsql STABLE
-- The plan's cost estimate passes jit_above_cost at 10,000 partitions, and
-- compiling it took longer (450 ms) than running it (100 ms).
SET jit = off
-- The planner guesses 200 rows for the per-partition aggregate and joins it
-- back by a nested loop: 10,000 x 10,000 comparisons, 2-4 s at 10,000
-- partitions (bench admin). Hash joins take 90-125 ms; the per-partition
-- probes are subplans, which this setting does not touch.
SET enable_nestloop = off
AS $fn$
BEGIN
    RETURN QUERY EXECUTE format($q$
    -- MATERIALIZED: base is probed once per partition, not once per use.
    WITH p AS MATERIALIZED (
        SELECT p.id, p.queue_id, p.head,
               coalesce((SELECT s.first_offset - 1 FROM queen.segments s
                          WHERE s.partition_id = p.id ORDER BY s.first_offset LIMIT 1), p.head) AS base
          FROM queen.partitions p %s),
    -- Whether the partitions have any tombstone or failed attempt: the
    -- common case has none, and then no cursor probes for them.
    any_tomb AS (SELECT EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id IN (SELECT p.id FROM p)) AS yes),
    any_att AS (SELECT EXISTS (SELECT 1 FROM queen.attempts a WHERE a.partition_id IN (SELECT p.id FROM p)) AS yes),
    x AS (
        SELECT c.partition_id, c.consumer_group, p.head, p.base, greatest(c.committed, p.base) AS committed,
               c.total_consumed, c.last_consumed_at, cardinality(c.acked) AS acked, c.acked AS acked_offs, c.lease_end,
               (c.lease_id IS NOT NULL AND c.lease_expires_at > now()) AS live
          FROM p JOIN queen.cursors c ON c.partition_id = p.id),
    y AS (
        SELECT x.*,
               CASE WHEN x.live THEN greatest(least(x.lease_end, x.head) - x.committed - x.acked, 0) ELSE 0 END
                   AS processing,
               CASE WHEN x.live THEN greatest(x.lease_end, x.committed) ELSE x.committed END AS done_to
          FROM x),
    z AS (
        SELECT y.*,
               CASE WHEN (SELECT yes FROM any_tomb) THEN
                   (SELECT count(*) FROM queen.tombstones t
                     WHERE t.partition_id = y.partition_id AND t."offset" > y.done_to) ELSE 0 END AS tombs,
               CASE WHEN (SELECT yes FROM any_att) THEN
                   (SELECT count(*) FROM queen.attempts a
                     WHERE a.partition_id = y.partition_id AND a.consumer_group = y.consumer_group
                       AND a."offset" > y.committed AND a.failures > 0
                       AND NOT (y.live AND a."offset" = ANY (y.acked_offs))) ELSE 0 END AS failed
          FROM y),
    a AS (
        SELECT z.partition_id, count(*)::integer AS groups,
               sum(greatest(z.head - z.done_to, 0) - z.tombs)::bigint AS pending,
               sum(z.processing)::bigint AS processing,
               sum(z.committed - z.base + CASE WHEN z.live THEN z.acked ELSE 0 END + z.tombs)::bigint AS completed,
               sum(z.failed)::bigint AS failed,
               sum(z.head - z.committed)::bigint AS lag,
               max(z.head - z.committed)::bigint AS max_lag,
               sum(z.total_consumed)::bigint AS consumed,
               (count(*) FILTER (WHERE z.live))::integer AS leases,
               coalesce(sum(z.lease_end - z.committed) FILTER (WHERE z.live), 0)::bigint AS leased,
               coalesce(sum(z.acked) FILTER (WHERE z.live), 0)::bigint AS leased_acked,
               min(z.committed) AS min_committed,
               max(z.last_consumed_at) AS last_consumed_at
          FROM z GROUP BY z.partition_id),
    d AS (
        SELECT dl.partition_id, count(*) AS n FROM queen.dead_letters dl
         WHERE dl.listed AND dl.partition_id IN (SELECT p.id FROM p) GROUP BY dl.partition_id)
    SELECT p.queue_id, p.id, p.head, p.head - p.base,
           coalesce(a.groups, 0),
           coalesce(a.pending, p.head - p.base - CASE WHEN (SELECT yes FROM any_tomb) THEN
               (SELECT count(*) FROM queen.tombstones t WHERE t.partition_id = p.id AND t."offset" > p.base)
               ELSE 0 END),
           coalesce(a.processing, 0::bigint), coalesce(a.completed, 0::bigint), coalesce(a.failed, 0::bigint),
           coalesce(a.lag, p.head - p.base),
           coalesce(a.max_lag, p.head - p.base),
           coalesce(a.consumed, 0::bigint), coalesce(a.leases, 0), coalesce(a.leased, 0::bigint),
           coalesce(a.leased_acked, 0::bigint),
           CASE WHEN p.head > coalesce(a.min_committed, p.base) THEN
               (SELECT s.created_at FROM queen.segments s
                 WHERE s.partition_id = p.id AND s.first_offset <= coalesce(a.min_committed, p.base) + 1
                 ORDER BY s.first_offset DESC LIMIT 1)
           END,
           a.last_consumed_at,
           coalesce(d.n, 0::bigint)
      FROM p LEFT JOIN a ON a.partition_id = p.id LEFT JOIN d ON d.partition_id = p.id
    $q$, CASE WHEN p_queues IS NULL THEN '' ELSE 'WHERE p.queue_id = ANY ($1)' END) USING p_queues;
END;
$fn$;

-- status_queues: status_partitions summed per queue; oldest_unconsumed_at
-- is the oldest unconsumed segment of any partition for any group (the time
-- lag).
CREATE OR REPLACE FUNCTION queen.status_queues(p_queues uuid[])
RETURNS TABLE (
    queue_id             uuid,
    partitions           integer,
    pushed               bigint,
    retained             bigint,
    pending              bigint,
    processing           bigint,
    completed            bigint,
    failed               bigint,
    offset_lag           bigint,
    max_offset_lag       bigint,
    consumed             bigint,
    leases               integer,
    partitions_leased    integer,
    leased               bigint,
    leased_acked         bigint,
    oldest_unconsumed_at timestamptz,
    last_consumed_at     timestamptz,
    dead_letters         bigint
)
LANGUAGE sql STABLE AS $$
    SELECT s.queue_id, count(*)::integer, sum(s.head)::bigint, sum(s.retained)::bigint,
           sum(s.pending)::bigint, sum(s.processing)::bigint, sum(s.completed)::bigint, sum(s.failed)::bigint,
           sum(s.offset_lag)::bigint, max(s.max_offset_lag)::bigint, sum(s.consumed)::bigint,
           sum(s.leases)::integer, (count(*) FILTER (WHERE s.leases > 0))::integer,
           sum(s.leased)::bigint, sum(s.leased_acked)::bigint,
           min(s.oldest_unconsumed_at), max(s.last_consumed_at), sum(s.dead_letters)::bigint
      FROM queen.status_partitions(p_queues) s
     GROUP BY s.queue_id
$$;
