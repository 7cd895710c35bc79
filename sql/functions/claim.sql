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

-- The claim of one pop per call (8-10 statements each), replaced by the
-- set-based functions below.
DROP FUNCTION IF EXISTS queen.claim(uuid[], uuid, text, integer, integer, integer, boolean, uuid, text, timestamptz,
                                    uuid[], integer);
-- claim_take before p_pinned, when every single-partition pop of a round
-- had a claim_take of its own (p_pinned's default keeps such a call, from a
-- broker of that version sharing the database, valid).
DROP FUNCTION IF EXISTS queen.claim_take(uuid[], text, boolean, uuid[], uuid[], integer[], integer[], integer[],
                                         integer[], boolean[], uuid[]);

-- A claim round serves every pop a queue (or discovery scope) actor has ready
-- at once, whatever their number, in a fixed number of statements (the
-- broker's side: pg/claim.go). Per consumer group of the round:
--
--   claim_take     locks partitions for the group's pops, writes the leases
--                  (or autoAck commits) and returns the frames. When every
--                  pop of the group takes one partition (partitions=1, the
--                  default) it finds the claimable partitions itself: the
--                  round is this one statement. So it is when every pop of
--                  the group is of the single-partition route (pinned: each
--                  pop's pool row is its partition).
--   claim_read     otherwise first: the claimable partitions and what they
--                  hold, which the broker hands out to the pops within their
--                  budget and cap before claim_take locks them;
--   claim_contact  when a group meets partitions it never contacted: their
--                  cursors, then claim_take (or claim_read) again;
--   claim_subscribe when a pop carries a subscription intent: the durable
--                  records of groups that have none (D6).
--
-- The statements of one step of a round are pipelined in one implicit
-- transaction; claim_take runs again only for pops a concurrent round beat
-- to every partition they were given.

-- claim_subscribe records, per queue of p_queue_ids, the intent of each
-- group that carries one (p_sub_modes[g]: 'all', 'new', or 'timestamp' with
-- p_sub_froms[g]; '' none) and has neither a record nor a cursor there yet:
-- the first pop of a new group that carries a mode or a time writes the
-- durable record (D6), even when it contacts no partition. Queue mode has
-- none. In (queue id, group) order; a round inserts records before cursors
-- (lock order: docs/storage.md).
CREATE OR REPLACE FUNCTION queen.claim_subscribe(p_queue_ids uuid[], p_groups text[], p_sub_modes text[],
                                                 p_sub_froms timestamptz[])
RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
BEGIN
    INSERT INTO queen.subscriptions (queue_id, consumer_group, mode, from_ts)
    SELECT q.id, g.name, g.mode, CASE g.mode WHEN 'new' THEN now() WHEN 'timestamp' THEN g.from_ts END
      FROM unnest(p_groups, p_sub_modes, p_sub_froms) AS g(name, mode, from_ts), unnest(p_queue_ids) AS q(id)
     WHERE g.mode <> '' AND g.name <> '__QUEUE_MODE__'
       AND NOT EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_id = q.id AND s.consumer_group = g.name)
       AND NOT EXISTS (SELECT 1 FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
                        WHERE p.queue_id = q.id AND c.consumer_group = g.name)
     ORDER BY q.id, g.name
    ON CONFLICT DO NOTHING;
END;
$$;

-- claimable lists, per group g (p_groups[g]), the partitions it could claim
-- now, read without locks, with how many messages each holds past the
-- group's cursor (avail: an estimate) and what orders them for claiming
-- (qpos, the queue's position in p_queue_ids, which lists the queues in
-- scope by priority; lca, when the group last consumed from it). A partition
-- the group never contacted comes with avail NULL. Group g searches every
-- partition of the queues in scope (p_full[g]) or only the pairs
-- (p_cand_groups, p_cand_parts) naming it: the partitions the broker
-- believes ready, so an idle or leased partition costs nothing. Partitions
-- whose backlog is all younger than delayedProcessing are not claimable, so
-- they neither count toward a cap nor starve the others. A plain SQL
-- function, inlined into the statements that use it.
CREATE OR REPLACE FUNCTION queen.claimable(p_queue_ids uuid[], p_groups text[], p_full boolean[],
                                           p_cand_groups integer[], p_cand_parts uuid[])
RETURNS TABLE (grp integer, partition_id uuid, avail bigint, qpos integer, lca timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT x.k, x.pid, x.avail, x.qpos, x.lca
      FROM (SELECT s.k::integer AS k, p.id AS pid, array_position(p_queue_ids, p.queue_id) AS qpos,
                   c.last_consumed_at AS lca,
                   CASE WHEN q.delayed_processing > 0
                        THEN queen.deliverable_head(p.id, p.head, q.delayed_processing, now())
                        ELSE p.head END - c.committed AS avail
              FROM (SELECT f.k, pf.id AS pid
                      FROM unnest(p_full) WITH ORDINALITY AS f(full_search, k)
                      JOIN queen.partitions pf ON pf.queue_id = ANY (p_queue_ids)
                     WHERE f.full_search
                    UNION ALL
                    SELECT u.k, u.pid FROM unnest(p_cand_groups, p_cand_parts) AS u(k, pid)) s
              JOIN queen.partitions p ON p.id = s.pid
              JOIN queen.queues q ON q.id = p.queue_id
              -- COLLATE "C" (equality is the same under any deterministic
              -- collation) keeps the planner off cursors_group: with the
              -- statistics of a young database the cached generic plan
              -- scanned every cursor of the group once per partition.
              LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_groups[s.k] COLLATE "C"
             WHERE p.queue_id = ANY (p_queue_ids)
               AND (c.partition_id IS NULL
                    OR (p.head > c.committed
                        AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
                        AND (c.not_before IS NULL OR c.not_before <= now())
                        AND (q.window_buffer <= 0 OR p.last_write_at <= now() - make_interval(secs => q.window_buffer))))) x
     WHERE x.avail IS NULL OR x.avail > 0
$$;

-- claim_read returns claimable (see there) per group in claim order: queues
-- by priority, then the least recently consumed partition first.
CREATE OR REPLACE FUNCTION queen.claim_read(p_queue_ids uuid[], p_groups text[], p_full boolean[],
                                            p_cand_groups integer[], p_cand_parts uuid[])
RETURNS TABLE (grp integer, partition_id uuid, avail bigint)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
-- One plan for every call: with custom plans (the default for the first
-- calls, and kept when the array arguments make them look cheaper) the
-- statement was planned again at every call, a third of its cost.
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    RETURN QUERY
    SELECT x.grp, x.partition_id, x.avail
      FROM queen.claimable(p_queue_ids, p_groups, p_full, p_cand_groups, p_cand_parts) x
     ORDER BY x.grp, x.qpos, x.lca NULLS FIRST, x.partition_id;
END;
$$;

-- claim_contact creates the cursors of group p_groups[p_k[i]] on partition
-- p_pids[i], seeded (D6) by the group's durable record, else by the intent
-- its first pop of the round carried (p_sub_modes, p_sub_froms as for
-- claim_subscribe); queue mode is never seeded. In (queue id, partition id,
-- group) order: a concurrent first contact waits on every row this one
-- inserted first, so every round inserts in one order. It locks each
-- partition row FOR KEY SHARE (the cursor's key check before migration 008),
-- so no cursor is inserted for a partition being deleted; the writers' FOR
-- NO KEY UPDATE does not block that lock: a first contact never waits for a
-- segment write (issue 8).
CREATE OR REPLACE FUNCTION queen.claim_contact(p_groups text[], p_sub_modes text[], p_sub_froms timestamptz[],
                                               p_k integer[], p_pids uuid[])
RETURNS void
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
DECLARE
    v_parts  uuid[];
    v_groups text[];
BEGIN
    WITH made AS (
    INSERT INTO queen.cursors (partition_id, consumer_group, committed)
    SELECT p.id, p_groups[m.k],
           queen.seed_offset(p.id, p.head,
               CASE WHEN p_groups[m.k] = '__QUEUE_MODE__' THEN NULL
                    WHEN s.queue_id IS NOT NULL THEN s.from_ts
                    WHEN p_sub_modes[m.k] = 'new' THEN now()
                    WHEN p_sub_modes[m.k] = 'timestamp' THEN p_sub_froms[m.k] END)
      FROM unnest(p_k, p_pids) AS m(k, pid)
      JOIN queen.partitions p ON p.id = m.pid
      LEFT JOIN queen.subscriptions s ON s.queue_id = p.queue_id AND s.consumer_group = p_groups[m.k]
     ORDER BY p.queue_id, p.id, p_groups[m.k]
       FOR KEY SHARE OF p
    ON CONFLICT DO NOTHING
    RETURNING partition_id, consumer_group
    )
    -- maxWaitTimeSeconds bounds a message's age for every group, also one
    -- that meets the partition now (D9): what waited longer is
    -- dead-lettered for it here, before its first claim, as the eviction
    -- job does for the groups it knows (queen.evict). Only new cursors of
    -- queues with the option; at most 10,000 messages a cursor,
    -- so a first contact stays a short transaction (a longer backlog is
    -- the eviction job's, at its next run).
    SELECT array_agg(made.partition_id ORDER BY made.partition_id, made.consumer_group),
           array_agg(made.consumer_group ORDER BY made.partition_id, made.consumer_group)
      INTO v_parts, v_groups
      FROM made
      JOIN queen.partitions p ON p.id = made.partition_id
      JOIN queen.queues q ON q.id = p.queue_id
     WHERE q.max_wait_time_seconds > 0;
    IF v_parts IS NOT NULL THEN
        PERFORM queen.evict(v_parts, v_groups, 10000 * cardinality(v_parts));
    END IF;
END;
$$;

-- claim_take serves pops of group p_group in one statement. Its pool is
-- p_pool, in that order of preference, or, when p_pool is NULL, the group's
-- claimable partitions (claimable, searching everything in scope with
-- p_full, else p_cands) in claim order. It locks the first
-- cardinality(p_slots) partitions of the pool that are still claimable,
-- SKIP LOCKED (a concurrent round keeps what it locked, and this one locks
-- no more rows than it has pops for), gives the s-th locked row to pop
-- p_slots[s] (with p_pinned, the pool's s-th row, locked or not: the pops
-- of the single-partition route, each pinned to its own partition), cuts
-- each pop's spans within its budget p_budgets[pop] in slot order, writes
-- the leases (p_lease_ids[pop], for p_lease_secs[pop] or the queue's lease)
-- or, for autoAck pops, commits the cursors, and returns them.
--
-- Rows come in (pop, slot) order: for every locked row one with frames NULL
-- (taken: the messages it gave its pop, 0 when it held none after all),
-- followed by one row per segment of its span. A pop with p_mins[pop] > 0
-- takes nothing unless its rows hold that many messages (minPopWaitTime):
-- its rows then report taken, and held. Only the spans' frames leave the
-- database: the first and last segments are cut with their ends[] table.
-- Resolved offsets are never delivered again: tombstoned ones
-- (queen.tombstones, D10) for every group, and the ones the group
-- dead-lettered under an earlier lease (D5; a lease that ends on a failure
-- keeps only its resolved prefix, so a dead letter past it is found here, not
-- in the cursor). A pop's budget counts only the messages it delivers, the
-- span's leading resolved offsets move committed at once, the others start
-- the lease's acked set, a span holding only resolved offsets just moves the
-- cursor (no lease: nobody could ever ack it), and they are listed in dead,
-- so they are not delivered.
-- With p_pool NULL, one row (claim NULL) follows per partition of the pool
-- it did not lock: missing when the group never contacted it. With
-- p_pinned, one such row follows per partition of p_pool that exists and
-- the group never contacted (missing), so pinned pops need no claim_read
-- before them.
CREATE OR REPLACE FUNCTION queen.claim_take(
    p_queue_ids  uuid[],
    p_group      text,
    p_full       boolean,
    p_cands      uuid[],
    p_pool       uuid[],
    p_slots      integer[],
    p_budgets    integer[],
    p_mins       integer[],
    p_lease_secs integer[],
    p_auto_acks  boolean[],
    p_lease_ids  uuid[],
    p_pinned     boolean DEFAULT false
) RETURNS TABLE (
    ord            integer,
    claim          integer,
    taken          bigint,
    held           boolean,
    partition_id   uuid,
    partition_name text,
    queue_name     text,
    span_from      bigint,
    lease_ms       bigint,
    first_offset   bigint,
    created_at     text,
    frames         bytea,
    dead           bigint[],
    missing        boolean
)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
SET plan_cache_mode = force_generic_plan -- see claim_read
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH pool AS MATERIALIZED (
        SELECT u.pid, u.ord::integer AS ord,
               CASE WHEN p_pinned AND NOT EXISTS (SELECT 1 FROM queen.cursors c0
                                                   WHERE c0.partition_id = u.pid
                                                     AND c0.consumer_group = p_group COLLATE "C") -- see claimable
                    THEN EXISTS (SELECT 1 FROM queen.partitions p0 WHERE p0.id = u.pid)
                    ELSE false END AS missing
          FROM unnest(p_pool) WITH ORDINALITY AS u(pid, ord)
        UNION ALL
        SELECT x.partition_id,
               (row_number() OVER (ORDER BY x.qpos, x.lca NULLS FIRST, x.partition_id))::integer, x.avail IS NULL
          FROM queen.claimable(p_queue_ids, ARRAY[p_group], ARRAY[p_full],
                               array_fill(1, ARRAY[coalesce(cardinality(p_cands), 0)]), coalesce(p_cands, '{}')) x
         WHERE p_pool IS NULL
    ), locked AS MATERIALIZED (
        SELECT pool.ord, c.partition_id AS pid, c.committed, p.name AS pname, q.name AS qname, q.lease_time,
               CASE WHEN q.delayed_processing > 0
                    THEN queen.deliverable_head(p.id, p.head, q.delayed_processing, now())
                    ELSE p.head END - c.committed AS avail
          FROM pool
          JOIN queen.cursors c ON c.partition_id = pool.pid AND c.consumer_group = p_group COLLATE "C" -- see claimable
          JOIN queen.partitions p ON p.id = c.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE NOT pool.missing
           AND p.head > c.committed
           AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
           AND (c.not_before IS NULL OR c.not_before <= now())
           AND (q.window_buffer <= 0 OR p.last_write_at <= now() - make_interval(secs => q.window_buffer))
         ORDER BY pool.ord
         LIMIT cardinality(p_slots)
           FOR UPDATE OF c SKIP LOCKED
    ), slotted AS (
        -- tomb: the resolved offsets of what the row holds (tombstoned, or
        -- dead-lettered by the group), in order; davail: the messages it
        -- can deliver.
        SELECT l.*, p_slots[l.slot] AS claim_no, t.tomb, l.avail - cardinality(t.tomb) AS davail
          FROM (SELECT l0.*, CASE WHEN p_pinned THEN l0.ord
                                  ELSE row_number() OVER (ORDER BY l0.ord)::integer END AS slot
                  FROM locked l0) l
         CROSS JOIN LATERAL (SELECT ARRAY(SELECT t0."offset" FROM queen.tombstones t0
                                           WHERE t0.partition_id = l.pid AND t0."offset" > l.committed
                                             AND t0."offset" <= l.committed + l.avail
                                          UNION
                                          SELECT dl."offset" FROM queen.dead_letters dl
                                           WHERE dl.partition_id = l.pid AND dl.consumer_group = p_group
                                             AND dl."offset" > l.committed AND dl."offset" <= l.committed + l.avail
                                             AND dl.resolves
                                           ORDER BY 1) AS tomb
                             OFFSET 0) t -- one probe per row: pulled up, the
                                         -- subquery ran once per use of tomb
    ), cut0 AS (
        -- Greedy in slot order: a row gives what it holds, up to what its
        -- pop's budget has left after the rows before it.
        SELECT s.*, greatest(least(s.davail, p_budgets[s.claim_no]
                    - coalesce(sum(greatest(s.davail, 0)) OVER (PARTITION BY s.claim_no ORDER BY s.slot
                                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)), 0)::bigint AS dtake
          FROM slotted s
    ), cut AS (
        -- take: the offsets the row's span covers, its dtake messages, the
        -- resolved offsets among them and the ones right after the last of
        -- them (the i-th, t_i, has t_i - committed - i messages before it,
        -- so it falls inside exactly when t_i <= committed + dtake + i): an
        -- ack of the messages then moves committed past all of them. All it
        -- holds when that is only resolved offsets.
        SELECT c.*, CASE WHEN cardinality(c.tomb) = 0 THEN c.dtake
                         WHEN c.davail <= 0 THEN greatest(c.avail, 0)
                         WHEN c.dtake = 0 THEN 0
                         ELSE c.dtake + (SELECT count(*) FROM unnest(c.tomb) WITH ORDINALITY AS u(o, i)
                                          WHERE u.o <= c.committed + c.dtake + u.i) END AS take
          FROM cut0 c
    ), spans AS (
        -- lead: the resolved offsets that start the span: committed passes
        -- them at once.
        SELECT c.*, p_mins[c.claim_no] > 0 AND sum(c.dtake) OVER (PARTITION BY c.claim_no) < p_mins[c.claim_no] AS hold,
               CASE WHEN p_lease_secs[c.claim_no] > 0 THEN p_lease_secs[c.claim_no]
                    WHEN c.lease_time > 0 THEN c.lease_time ELSE 60 END AS secs,
               CASE WHEN cardinality(c.tomb) = 0 THEN 0
                    ELSE (SELECT count(*) FROM unnest(c.tomb) WITH ORDINALITY AS u(o, i)
                           WHERE u.o = c.committed + u.i) END AS lead
          FROM cut c
    ), written AS (
        UPDATE queen.cursors c
           SET committed = CASE WHEN p_auto_acks[s.claim_no] THEN s.committed + s.take ELSE s.committed + s.lead END,
               lease_id = CASE WHEN p_auto_acks[s.claim_no] OR s.lead = s.take THEN NULL ELSE p_lease_ids[s.claim_no] END,
               lease_end = CASE WHEN p_auto_acks[s.claim_no] OR s.lead = s.take THEN NULL ELSE s.committed + s.take END,
               lease_expires_at = CASE WHEN p_auto_acks[s.claim_no] OR s.lead = s.take THEN NULL
                                       ELSE now() + make_interval(secs => s.secs) END,
               acked = CASE WHEN cardinality(s.tomb) = 0 OR p_auto_acks[s.claim_no] OR s.lead = s.take THEN '{}'
                            ELSE ARRAY(SELECT o FROM unnest(s.tomb) AS o
                                        WHERE o > s.committed + s.lead AND o <= s.committed + s.take) END,
               total_consumed = c.total_consumed + CASE WHEN p_auto_acks[s.claim_no] THEN s.take ELSE 0 END,
               batches_consumed = c.batches_consumed + CASE WHEN p_auto_acks[s.claim_no] AND s.take > s.lead THEN 1 ELSE 0 END,
               last_consumed_at = now()
          FROM spans s
         WHERE c.partition_id = s.pid AND c.consumer_group = p_group COLLATE "C" -- see claimable
           AND s.take > 0 AND NOT s.hold
        RETURNING c.partition_id
    )
    SELECT s.ord, s.claim_no, s.take, s.hold, s.pid, s.pname, s.qname, s.committed + 1, 1000::bigint * s.secs,
           NULL::bigint, NULL::text, NULL::bytea, NULL::bigint[], false
      FROM spans s
    UNION ALL
    SELECT s.ord, s.claim_no, NULL::bigint, NULL::boolean, s.pid, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
           g.first_offset + g.k0, g.created_at, queen.frame_slice(g.frames, g.ends, g.k0, g.k1), s.tomb, false
      FROM spans s
     CROSS JOIN LATERAL (SELECT g0.first_offset, g0.frames, g0.ends,
                                to_char(g0.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
                                greatest(s.committed + 1 - g0.first_offset, 0)::integer AS k0,
                                (least(s.committed + s.take, g0.last_offset) - g0.first_offset)::integer AS k1
                           FROM queen.segments g0
                          WHERE g0.partition_id = s.pid AND g0.first_offset <= s.committed + s.take
                            AND g0.first_offset >= (SELECT coalesce(max(g1.first_offset), s.committed + 1)
                                                      FROM queen.segments g1
                                                     WHERE g1.partition_id = s.pid AND g1.first_offset <= s.committed + 1)) g
     WHERE s.take > 0 AND NOT s.hold
    UNION ALL
    SELECT pool.ord, NULL::integer, NULL::bigint, NULL::boolean, pool.pid, NULL::text, NULL::text, NULL::bigint,
           NULL::bigint, NULL::bigint, NULL::text, NULL::bytea, NULL::bigint[], pool.missing
      FROM pool
     WHERE (p_pool IS NULL OR pool.missing) AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.ord = pool.ord)
     ORDER BY 2 NULLS LAST, 1, 10 NULLS FIRST;
END;
$$;
