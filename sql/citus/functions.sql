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

-- The LANGUAGE sql functions that read sharded tables (sql/functions) run
-- as PL/pgSQL here: Citus plans the statements of a PL/pgSQL function with
-- their arguments' values, but cannot plan a SQL function's parameterized
-- body. The body is the same text. Which tables are sharded is read from
-- queen.citus_layout.
DO $convert$
DECLARE
    f    record;
    body text;
    def  text;
    at   integer;
BEGIN
    FOR f IN SELECT p.oid, p.prosrc, p.proretset, p.prorettype
               FROM pg_proc p
              WHERE p.pronamespace = 'queen'::regnamespace
                AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'sql')
                AND EXISTS (SELECT 1 FROM queen.citus_layout c
                             WHERE c.kind = 'distributed' AND p.prosrc LIKE '%' || c.tbl || '%') LOOP
        body := rtrim(btrim(f.prosrc), E' \n\t;');
        IF f.proretset THEN
            body := E'\n#variable_conflict use_column\nBEGIN\n    RETURN QUERY ' || body || E'\n    ;\nEND;\n';
        ELSIF f.prorettype = 'void'::regtype THEN
            body := E'\nBEGIN\n    ' || regexp_replace(body, '^SELECT', 'PERFORM') || E'\n    ;\nEND;\n';
        ELSE
            body := E'\nBEGIN\n    RETURN (' || body || E'\n    );\nEND;\n';
        END IF;
        def := pg_get_functiondef(f.oid);
        at := position('AS $function$' IN def);
        def := replace(substring(def FOR at - 1), 'LANGUAGE sql', 'LANGUAGE plpgsql')
               || 'AS $function$' || body || '$function$';
        EXECUTE def;
    END LOOP;
END;
$convert$;

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
-- holds: the advisory lock of the single-node version is per node. That
-- lock is an UPDATE of the row: a two-phase commit over every node for each
-- commit of a capped queue.
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
        -- Citus locks no row of a reference table for a SELECT; an UPDATE
        -- writes (and so locks) the row on every node.
        UPDATE queen.queues q SET updated_at = q.updated_at WHERE q.id = v_qid;
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

-- claim_one is claim_take's work (sql/functions/claim.sql) on one partition
-- for one pop: lock the group's cursor there SKIP LOCKED if it is
-- claimable, cut the span within p_budget messages, write the lease (or
-- the autoAck commit), and return claim_take's rows for it (ord p_ord,
-- claim p_claim) plus davail, the messages it could deliver. Each of its
-- statements names p_part in every sharded table it reads, so Citus
-- routes it to the partition's node (a statement that also joined the
-- queue's reference row, or chained the steps in one writable CTE, Citus
-- would plan in pieces, and cannot lock rows of a query planned so).
-- minPopWaitTime (p_min) counts this partition's messages only.
CREATE OR REPLACE FUNCTION queen.claim_one(
    p_part       uuid,
    p_ord        integer,
    p_claim      integer,
    p_group      text,
    p_budget     integer,
    p_min        integer,
    p_lease_secs integer,
    p_auto_ack   boolean,
    p_lease_id   uuid
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
    missing        boolean,
    davail         bigint
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_qid       uuid;
    v_pname     text;
    v_head      bigint;
    v_last      timestamptz;
    v_committed bigint;
    q           record;
    v_avail     bigint;
    v_tomb      bigint[];
    v_davail    bigint;
    v_dtake     bigint;
    v_take      bigint;
    v_lead      bigint;
    v_hold      boolean;
    v_secs      integer;
    v_end       boolean;
    v_exp       timestamptz;
BEGIN
    SELECT p.queue_id, p.name, p.head, p.last_write_at INTO v_qid, v_pname, v_head, v_last
      FROM queen.partitions p WHERE p.id = p_part;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT q0.name, q0.lease_time, q0.delayed_processing, q0.window_buffer INTO q
      FROM queen.queues q0 WHERE q0.id = v_qid;
    IF q.window_buffer > 0 AND v_last > now() - make_interval(secs => q.window_buffer) THEN
        RETURN;
    END IF;
    SELECT c.committed INTO v_committed
      FROM queen.cursors c
     WHERE c.partition_id = p_part AND c.consumer_group = p_group COLLATE "C" -- see claimable
       AND c.committed < v_head
       AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
       AND (c.not_before IS NULL OR c.not_before <= now())
       FOR UPDATE OF c SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_avail := CASE WHEN q.delayed_processing > 0
                    THEN coalesce((SELECT s.last_offset FROM queen.segments s
                                    WHERE s.partition_id = p_part
                                      AND s.created_at <= now() - make_interval(secs => q.delayed_processing)
                                    ORDER BY s.first_offset DESC LIMIT 1), 0)
                    ELSE v_head END - v_committed;
    v_tomb := ARRAY(SELECT t0."offset" FROM queen.tombstones t0
                     WHERE t0.partition_id = p_part AND t0."offset" > v_committed AND t0."offset" <= v_committed + v_avail
                    UNION
                    SELECT dl."offset" FROM queen.dead_letters dl
                     WHERE dl.partition_id = p_part AND dl.consumer_group = p_group
                       AND dl."offset" > v_committed AND dl."offset" <= v_committed + v_avail AND dl.resolves
                     ORDER BY 1);
    v_davail := v_avail - cardinality(v_tomb);
    v_dtake := greatest(least(v_davail, p_budget), 0);
    v_take := CASE WHEN cardinality(v_tomb) = 0 THEN v_dtake
                   WHEN v_davail <= 0 THEN greatest(v_avail, 0)
                   WHEN v_dtake = 0 THEN 0
                   ELSE v_dtake + (SELECT count(*) FROM unnest(v_tomb) WITH ORDINALITY AS u(o, i)
                                    WHERE u.o <= v_committed + v_dtake + u.i) END;
    v_lead := CASE WHEN cardinality(v_tomb) = 0 THEN 0
                   ELSE (SELECT count(*) FROM unnest(v_tomb) WITH ORDINALITY AS u(o, i)
                          WHERE u.o = v_committed + u.i) END;
    v_hold := p_min > 0 AND v_dtake < p_min;
    v_secs := CASE WHEN p_lease_secs > 0 THEN p_lease_secs WHEN q.lease_time > 0 THEN q.lease_time ELSE 60 END;
    IF v_take > 0 AND NOT v_hold THEN
        v_end := p_auto_ack OR v_lead = v_take;
        v_exp := now() + make_interval(secs => v_secs);
        UPDATE queen.cursors c
           SET committed = CASE WHEN p_auto_ack THEN v_committed + v_take ELSE v_committed + v_lead END,
               lease_id = CASE WHEN v_end THEN NULL ELSE p_lease_id END,
               lease_end = CASE WHEN v_end THEN NULL ELSE v_committed + v_take END,
               lease_expires_at = CASE WHEN v_end THEN NULL ELSE v_exp END,
               acked = CASE WHEN cardinality(v_tomb) = 0 OR v_end THEN '{}'
                            ELSE ARRAY(SELECT o FROM unnest(v_tomb) AS o
                                        WHERE o > v_committed + v_lead AND o <= v_committed + v_take) END,
               total_consumed = c.total_consumed + CASE WHEN p_auto_ack THEN v_take ELSE 0 END,
               batches_consumed = c.batches_consumed + CASE WHEN p_auto_ack AND v_take > v_lead THEN 1 ELSE 0 END,
               last_consumed_at = now()
         WHERE c.partition_id = p_part AND c.consumer_group = p_group COLLATE "C";
    END IF;
    ord := p_ord; claim := p_claim; taken := v_take; held := v_hold; partition_id := p_part;
    partition_name := v_pname; queue_name := q.name; span_from := v_committed + 1; lease_ms := 1000::bigint * v_secs;
    first_offset := NULL; created_at := NULL; frames := NULL; dead := NULL; missing := false; davail := v_davail;
    RETURN NEXT;
    IF v_take <= 0 OR v_hold THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT p_ord, p_claim, NULL::bigint, NULL::boolean, p_part, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
           g.first_offset + g.k0, g.created_at, queen.frame_slice(g.frames, g.ends, g.k0, g.k1), v_tomb, false, NULL::bigint
      FROM (SELECT g0.first_offset, g0.frames, g0.ends,
                   to_char(g0.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
                   greatest(v_committed + 1 - g0.first_offset, 0)::integer AS k0,
                   (least(v_committed + v_take, g0.last_offset) - g0.first_offset)::integer AS k1
              FROM queen.segments g0
             WHERE g0.partition_id = p_part AND g0.first_offset <= v_committed + v_take
               AND g0.first_offset >= (SELECT coalesce(max(g1.first_offset), v_committed + 1)
                                         FROM queen.segments g1
                                        WHERE g1.partition_id = p_part AND g1.first_offset <= v_committed + 1)) g
     ORDER BY 10;
END;
$$;

-- claim_take in the Citus mode: the single-node contract (sql/functions/
-- claim.sql), served partition by partition. The pool is read first
-- (p_pool, else queen.claimable: a read of every node holding the queues'
-- partitions, without locks); then, in pool order, claim_one on each
-- partition, one statement routed to its node, until cardinality(p_slots)
-- partitions are locked. A pop's budget counts what its earlier partitions
-- held, as in the single-node function. Runs on the coordinator, in the
-- caller's transaction (Citus commits it on every node it touched).
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
AS $$
#variable_conflict use_column
DECLARE
    v_pool    uuid[];
    v_new     boolean[];
    v_used    integer[] := array_fill(0, ARRAY[greatest(cardinality(p_budgets), 1)]);
    v_locked  integer := 0;
    v_done    boolean[];
    v_i       integer;
    v_slot    integer;
    v_claim   integer;
    v_part    uuid;
    v_miss    boolean;
    r         record;
BEGIN
    IF p_pool IS NOT NULL THEN
        v_pool := p_pool;
        v_new := array_fill(false, ARRAY[cardinality(p_pool)]);
        IF p_pinned THEN
            -- (Through a scalar: Citus sends an assignment to an array
            -- element to the worker as written, ":=" included.)
            FOR v_i IN 1 .. cardinality(p_pool) LOOP
                v_part := p_pool[v_i];
                SELECT NOT EXISTS (SELECT 1 FROM queen.cursors c0
                                    WHERE c0.partition_id = v_part AND c0.consumer_group = p_group COLLATE "C")
                       AND EXISTS (SELECT 1 FROM queen.partitions p0 WHERE p0.id = v_part) INTO v_miss;
                v_new[v_i] := v_miss;
            END LOOP;
        END IF;
    ELSE
        SELECT coalesce(array_agg(x.partition_id ORDER BY x.qpos, x.lca NULLS FIRST, x.partition_id), '{}'),
               coalesce(array_agg(x.avail IS NULL ORDER BY x.qpos, x.lca NULLS FIRST, x.partition_id), '{}')
          INTO v_pool, v_new
          FROM queen.claimable(p_queue_ids, ARRAY[p_group], ARRAY[p_full],
                               array_fill(1, ARRAY[coalesce(cardinality(p_cands), 0)]), coalesce(p_cands, '{}')) x;
    END IF;
    v_done := array_fill(false, ARRAY[greatest(cardinality(v_pool), 1)]);
    FOR v_i IN 1 .. coalesce(cardinality(v_pool), 0) LOOP
        EXIT WHEN v_locked >= coalesce(cardinality(p_slots), 0);
        CONTINUE WHEN v_new[v_i];
        v_slot := CASE WHEN p_pinned THEN v_i ELSE v_locked + 1 END;
        v_claim := p_slots[v_slot];
        FOR r IN SELECT * FROM queen.claim_one(v_pool[v_i], v_i, v_claim, p_group,
                                               p_budgets[v_claim] - v_used[v_claim], p_mins[v_claim],
                                               p_lease_secs[v_claim], p_auto_acks[v_claim], p_lease_ids[v_claim]) LOOP
            IF r.davail IS NOT NULL THEN
                v_done[v_i] := true;
                v_used[v_claim] := v_used[v_claim] + greatest(r.davail, 0)::integer;
            END IF;
            ord := r.ord; claim := r.claim; taken := r.taken; held := r.held; partition_id := r.partition_id;
            partition_name := r.partition_name; queue_name := r.queue_name; span_from := r.span_from;
            lease_ms := r.lease_ms; first_offset := r.first_offset; created_at := r.created_at;
            frames := r.frames; dead := r.dead; missing := r.missing;
            RETURN NEXT;
        END LOOP;
        IF v_done[v_i] THEN
            v_locked := v_locked + 1;
        END IF;
    END LOOP;
    FOR v_i IN 1 .. coalesce(cardinality(v_pool), 0) LOOP
        CONTINUE WHEN v_done[v_i] OR NOT (p_pool IS NULL OR v_new[v_i]);
        ord := v_i; claim := NULL; taken := NULL; held := NULL; partition_id := v_pool[v_i];
        partition_name := NULL; queue_name := NULL; span_from := NULL; lease_ms := NULL; first_offset := NULL;
        created_at := NULL; frames := NULL; dead := NULL; missing := v_new[v_i];
        RETURN NEXT;
    END LOOP;
END;
$$;

-- claim_contact in the Citus mode: the single-node contract (sql/functions/
-- claim.sql), one partition at a time in (queue id, partition id, group)
-- order, every statement routed to the partition's node: lock the
-- partition row FOR KEY SHARE, insert the seeded cursor, and, for a queue
-- with maxWaitTimeSeconds, evict what waited too long for the new cursors.
CREATE OR REPLACE FUNCTION queen.claim_contact(p_groups text[], p_sub_modes text[], p_sub_froms timestamptz[],
                                               p_k integer[], p_pids uuid[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    m        record;
    v_from   timestamptz;
    v_sub    record;
    v_parts  uuid[] := '{}';
    v_groups text[] := '{}';
BEGIN
    FOR m IN SELECT p.id AS pid, p.queue_id, p.head, p_groups[u.k] AS grp, u.k, q.max_wait_time_seconds AS mw
               FROM unnest(p_k, p_pids) AS u(k, pid)
               JOIN queen.partitions p ON p.id = u.pid
               JOIN queen.queues q ON q.id = p.queue_id
              ORDER BY p.queue_id, p.id, p_groups[u.k] LOOP
        PERFORM 1 FROM queen.partitions p WHERE p.id = m.pid FOR KEY SHARE;
        CONTINUE WHEN NOT FOUND;
        v_from := NULL;
        IF m.grp <> '__QUEUE_MODE__' THEN
            SELECT s.from_ts, true AS found INTO v_sub
              FROM queen.subscriptions s WHERE s.queue_id = m.queue_id AND s.consumer_group = m.grp;
            v_from := CASE WHEN v_sub.found THEN v_sub.from_ts
                           WHEN p_sub_modes[m.k] = 'new' THEN now()
                           WHEN p_sub_modes[m.k] = 'timestamp' THEN p_sub_froms[m.k] END;
        END IF;
        INSERT INTO queen.cursors (partition_id, consumer_group, committed)
        VALUES (m.pid, m.grp, queen.seed_offset(m.pid, m.head, v_from))
        ON CONFLICT DO NOTHING;
        IF FOUND AND m.mw > 0 THEN
            v_parts := v_parts || m.pid;
            v_groups := v_groups || m.grp;
        END IF;
    END LOOP;
    IF cardinality(v_parts) > 0 THEN
        PERFORM queen.evict(v_parts, v_groups, 10000 * cardinality(v_parts));
    END IF;
END;
$$;

-- ack_one is queen.ack (sql/functions/ack.sql) for the items of one
-- partition: its item-by-item path, with every statement routed to
-- p_part's node (the set path's one statement joins the items to their
-- cursors, which Citus cannot route). p_idx numbers the items as the
-- caller's call did; the answer is queen.ack's.
CREATE OR REPLACE FUNCTION queen.ack_one(
    p_part     uuid,
    p_idx      integer[],
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
AS $$
#variable_conflict use_column
DECLARE
    v_q         record;
    t           record;
    cur         refcursor;
    c           record;
    v_have      boolean;
    -- The cursor of the items being applied, as it will be written.
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
    v_batches   integer; -- leases the items ended resolved
    v_dirty     boolean := false;
    -- Every cursor that changed; u_ack_k/u_ack_off hold their acked arrays
    -- flattened (cursor number, offset).
    u_part      uuid[] := '{}';
    u_grp       text[] := '{}';
    u_committed bigint[] := '{}';
    u_lease     uuid[] := '{}';
    u_end       bigint[] := '{}';
    u_expires   timestamptz[] := '{}';
    u_not_bef   timestamptz[] := '{}';
    u_moved     bigint[] := '{}';
    u_batches   integer[] := '{}';
    u_ack_k     integer[] := '{}';
    u_ack_off   bigint[] := '{}';
    v_fails     integer;
    v_status    text;
    v_now       timestamptz := now();
    k           integer;
BEGIN
    SELECT q.name AS qname, p.name AS pname, q.retry_limit, q.retry_delay INTO v_q
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_part;
    -- The cursors the items may change, locked in (partition, group) order,
    -- with the offsets of their spans dead-lettered under an earlier lease:
    -- those stay resolved (D5).
    OPEN cur FOR
        SELECT c.partition_id, c.consumer_group, c.committed, c.lease_id, c.lease_end, c.lease_expires_at, c.acked,
               c.not_before,
               ARRAY(SELECT d."offset" FROM queen.dead_letters d
                      WHERE d.partition_id = p_part AND d.consumer_group = c.consumer_group
                        AND d."offset" > c.committed AND d."offset" <= coalesce(c.lease_end, c.committed)
                        AND d.resolves) AS dead
          FROM queen.cursors c
         WHERE c.partition_id = p_part
           AND c.consumer_group = ANY (ARRAY(SELECT u.grp FROM unnest(p_groups, p_statuses) AS u(grp, status)
                                              WHERE u.status IN ('completed', 'success', 'failed', 'retry', 'dlq')))
         ORDER BY c.partition_id, c.consumer_group
           FOR UPDATE OF c;
    FETCH cur INTO c;
    v_have := FOUND;

    FOR t IN
        SELECT u.ord::integer AS i, p_part AS part, u.grp, v_q.qname, v_q.pname, v_q.retry_limit, v_q.retry_delay,
               CASE WHEN v_q.qname IS NOT NULL THEN x."offset" END AS off
          FROM unnest(p_txids, p_groups) WITH ORDINALITY AS u(txid, grp, ord)
          LEFT JOIN queen.txids x ON x.partition_id = p_part AND x.transaction_id = u.txid
         ORDER BY u.grp, off, u.ord
    LOOP
        idx := p_idx[t.i]; success := false; error := NULL; lease_released := false; dlq := false;
        queue_name := NULL; partition_name := NULL; v_fails := NULL;
        v_status := p_statuses[t.i];
        IF t.off IS NULL THEN
            error := 'message_not_found';
            RETURN NEXT;
            CONTINUE;
        END IF;
        queue_name := t.qname; partition_name := t.pname;
        IF v_status NOT IN ('completed', 'success', 'failed', 'retry', 'dlq') THEN
            RETURN NEXT; -- unknown status: nothing happens (A-12)
            CONTINUE;
        END IF;

        IF v_part IS DISTINCT FROM t.part OR v_grp IS DISTINCT FROM t.grp THEN
            IF v_dirty THEN
                k := cardinality(u_part) + 1;
                u_part := u_part || v_part; u_grp := u_grp || v_grp; u_committed := u_committed || v_committed;
                u_lease := u_lease || v_lease; u_end := u_end || v_end; u_expires := u_expires || v_expires;
                u_not_bef := u_not_bef || v_not_bef; u_moved := u_moved || v_moved; u_batches := u_batches || v_batches;
                u_ack_k := u_ack_k || array_fill(k, ARRAY[cardinality(v_acked)]); u_ack_off := u_ack_off || v_acked;
            END IF;
            v_part := t.part; v_grp := t.grp; v_dirty := false; v_moved := 0; v_batches := 0;
            WHILE v_have AND (c.partition_id, c.consumer_group) < (v_part, v_grp) LOOP
                FETCH cur INTO c;
                v_have := FOUND;
            END LOOP;
            v_found := v_have AND c.partition_id = v_part AND c.consumer_group = v_grp;
            IF v_found THEN
                v_committed := c.committed; v_lease := c.lease_id; v_end := c.lease_end; v_expires := c.lease_expires_at;
                v_acked := c.acked; v_not_bef := c.not_before; v_dead := c.dead;
            END IF;
        END IF;

        IF NOT v_found OR v_lease IS NULL OR v_expires <= v_now OR t.off <= v_committed OR t.off > v_end
           OR (p_leases[t.i] IS NOT NULL AND p_leases[t.i] <> v_lease) THEN
            error := 'lease_invalid';
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_dirty := true;

        IF v_status = 'failed' THEN
            INSERT INTO queen.attempts AS a (partition_id, consumer_group, "offset", failures)
            VALUES (v_part, v_grp, t.off, 1)
            ON CONFLICT (partition_id, consumer_group, "offset") DO UPDATE SET failures = a.failures + 1
            RETURNING a.failures INTO v_fails;
            IF v_fails > t.retry_limit THEN
                v_status := 'dlq';
            END IF;
        END IF;

        IF v_status = 'dlq' THEN
            -- retryCount: the retries the message had (failures before this one).
            PERFORM queen.dead_letter(v_part, v_grp, t.off, coalesce(nullif(p_errors[t.i], ''), 'Retries exhausted'),
                                      coalesce(v_fails - 1, (SELECT a.failures FROM queen.attempts a
                                                              WHERE a.partition_id = v_part AND a.consumer_group = v_grp
                                                                AND a."offset" = t.off), 0));
            dlq := true;
        END IF;
        IF v_status IN ('completed', 'success', 'dlq') THEN
            IF t.off = v_committed + 1 THEN
                -- The common case, items in offset order: the prefix grows
                -- by one without touching the array.
                v_committed := v_committed + 1;
                v_moved := v_moved + 1;
            ELSIF NOT t.off = ANY (v_acked) THEN
                v_acked := v_acked || t.off;
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
            IF v_committed >= v_end THEN
                v_batches := v_batches + 1;
            END IF;
            v_acked := '{}'; v_lease := NULL; v_end := NULL; v_expires := NULL;
            v_not_bef := CASE WHEN v_status = 'failed' AND t.retry_delay > 0
                              THEN v_now + make_interval(secs => t.retry_delay / 1000.0) END;
            lease_released := true;
        END IF;
        success := true;
        RETURN NEXT;
    END LOOP;
    CLOSE cur;
    IF v_dirty THEN
        k := cardinality(u_part) + 1;
        u_part := u_part || v_part; u_grp := u_grp || v_grp; u_committed := u_committed || v_committed;
        u_lease := u_lease || v_lease; u_end := u_end || v_end; u_expires := u_expires || v_expires;
        u_not_bef := u_not_bef || v_not_bef; u_moved := u_moved || v_moved; u_batches := u_batches || v_batches;
        u_ack_k := u_ack_k || array_fill(k, ARRAY[cardinality(v_acked)]); u_ack_off := u_ack_off || v_acked;
    END IF;

    UPDATE queen.cursors c
       SET committed = u.committed, lease_id = u.lease, lease_end = u.lease_end, lease_expires_at = u.expires,
           not_before = u.not_before, total_consumed = c.total_consumed + u.moved,
           batches_consumed = c.batches_consumed + u.batches,
           last_consumed_at = CASE WHEN u.moved > 0 THEN v_now ELSE c.last_consumed_at END,
           acked = CASE WHEN u.k = ANY (u_ack_k)
                        THEN ARRAY(SELECT a.off FROM unnest(u_ack_k, u_ack_off) AS a(k, off) WHERE a.k = u.k)
                        ELSE '{}' END
      FROM unnest(u_part, u_grp, u_committed, u_lease, u_end, u_expires, u_not_bef, u_moved, u_batches)
               WITH ORDINALITY AS u(part, grp, committed, lease, lease_end, expires, not_before, moved, batches, k)
     WHERE c.partition_id = p_part AND c.partition_id = u.part AND c.consumer_group = u.grp;
END;
$$;


-- ack in the Citus mode: the single-node contract (sql/functions/ack.sql),
-- one ack_one per partition, in partition order (so cursors are locked in
-- the single-node order), in the caller's transaction. p_offsets, a hint
-- of the set path, is not needed: ack_one looks every item up.
CREATE OR REPLACE FUNCTION queen.ack(
    p_parts    uuid[],
    p_txids    text[],
    p_statuses text[],
    p_groups   text[],
    p_leases   uuid[],
    p_errors   text[],
    p_offsets  bigint[] DEFAULT NULL
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
AS $$
#variable_conflict use_column
DECLARE
    v_part uuid;
    v_ix   integer[];
BEGIN
    FOR v_part IN SELECT DISTINCT u FROM unnest(p_parts) AS u ORDER BY 1 LOOP
        v_ix := ARRAY(SELECT i FROM generate_subscripts(p_parts, 1) AS i WHERE p_parts[i] = v_part ORDER BY i);
        RETURN QUERY SELECT * FROM queen.ack_one(v_part, v_ix,
            ARRAY(SELECT p_txids[i] FROM unnest(v_ix) AS i), ARRAY(SELECT p_statuses[i] FROM unnest(v_ix) AS i),
            ARRAY(SELECT p_groups[i] FROM unnest(v_ix) AS i), ARRAY(SELECT p_leases[i] FROM unnest(v_ix) AS i),
            ARRAY(SELECT p_errors[i] FROM unnest(v_ix) AS i));
    END LOOP;
END;
$$;

-- ack_spans in the Citus mode: the same answer as the single-node function
-- gives when no span applies, every item answered through queen.ack (its
-- rows (NULL, i, ...)), status completed, under its span's lease.
CREATE OR REPLACE FUNCTION queen.ack_spans(p_parts uuid[], p_groups text[], p_leases uuid[], p_firsts bigint[],
                                           p_lasts bigint[], p_more_parts uuid[], p_more_groups text[],
                                           p_item_txids text[])
RETURNS TABLE (k integer, idx integer, success boolean, error text, released boolean, dlq boolean,
               queue_name text, partition_name text)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_parts  uuid[] := '{}';
    v_groups text[] := '{}';
    v_leases uuid[] := '{}';
    v_s      integer;
BEGIN
    FOR v_s IN 1 .. coalesce(cardinality(p_parts), 0) LOOP
        v_parts := v_parts || array_fill(p_parts[v_s], ARRAY[(p_lasts[v_s] - p_firsts[v_s] + 1)::integer]);
        v_groups := v_groups || array_fill(p_groups[v_s], ARRAY[(p_lasts[v_s] - p_firsts[v_s] + 1)::integer]);
        v_leases := v_leases || array_fill(p_leases[v_s], ARRAY[(p_lasts[v_s] - p_firsts[v_s] + 1)::integer]);
    END LOOP;
    RETURN QUERY SELECT NULL::integer, a.idx, a.success, a.error, a.lease_released, a.dlq, a.queue_name, a.partition_name
      FROM queen.ack(v_parts, p_item_txids, array_fill('completed'::text, ARRAY[cardinality(p_item_txids)]),
                     v_groups, v_leases, array_fill(NULL::text, ARRAY[cardinality(p_item_txids)])) a;
END;
$$;

-- claimable in the Citus mode: the single-node contract (sql/functions/
-- claim.sql), one statement per group, each a read of every node that holds
-- partitions of the queues (sharded tables joined on the partition id and
-- the queues' reference rows: Citus pushes it down to every shard). The
-- delayedProcessing head of a partition is a read routed to its node.
CREATE OR REPLACE FUNCTION queen.claimable(p_queue_ids uuid[], p_groups text[], p_full boolean[],
                                           p_cand_groups integer[], p_cand_parts uuid[])
RETURNS TABLE (grp integer, partition_id uuid, avail bigint, qpos integer, lca timestamptz)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    v_k     integer;
    v_cands uuid[];
    v_group text;
    v_full  boolean;
    v_pid   uuid;
    r       record;
BEGIN
    FOR v_k IN 1 .. coalesce(cardinality(p_groups), 0) LOOP
        v_cands := ARRAY(SELECT u.pid FROM unnest(p_cand_groups, p_cand_parts) AS u(k, pid) WHERE u.k = v_k);
        v_group := p_groups[v_k];
        v_full := coalesce(p_full[v_k], false);
        CONTINUE WHEN NOT v_full AND cardinality(v_cands) = 0;
        FOR r IN SELECT p.id, p.queue_id, p.head, q.delayed_processing AS delay, c.committed,
                        c.last_consumed_at AS lca, c.partition_id IS NULL AS fresh,
                        p.head > c.committed
                        AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
                        AND (c.not_before IS NULL OR c.not_before <= now())
                        AND (q.window_buffer <= 0 OR p.last_write_at <= now() - make_interval(secs => q.window_buffer)) AS ready
                   FROM queen.partitions p
                   JOIN queen.queues q ON q.id = p.queue_id
                   LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = v_group COLLATE "C"
                  WHERE p.queue_id = ANY (p_queue_ids) AND (v_full OR p.id = ANY (v_cands)) LOOP
            grp := v_k; partition_id := r.id; qpos := array_position(p_queue_ids, r.queue_id); lca := r.lca;
            IF r.fresh THEN
                avail := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
            CONTINUE WHEN NOT r.ready;
            avail := r.head - r.committed;
            IF r.delay > 0 THEN
                v_pid := r.id;
                avail := queen.deliverable_head(v_pid, r.head, r.delay, now()) - r.committed;
            END IF;
            CONTINUE WHEN avail <= 0;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END;
$$;

-- claim_subscribe in the Citus mode: the single-node contract (sql/functions/
-- claim.sql), one (queue, group) at a time: whether the group has a cursor
-- on any partition of the queue is a read of every node.
CREATE OR REPLACE FUNCTION queen.claim_subscribe(p_queue_ids uuid[], p_groups text[], p_sub_modes text[],
                                                 p_sub_froms timestamptz[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    r      record;
    v_qid  uuid;
    v_name text;
    v_mode text;
    v_from timestamptz;
BEGIN
    FOR r IN SELECT q.id AS qid, g.name, g.mode, g.from_ts
               FROM unnest(p_groups, p_sub_modes, p_sub_froms) AS g(name, mode, from_ts), unnest(p_queue_ids) AS q(id)
              WHERE g.mode <> '' AND g.name <> '__QUEUE_MODE__'
              ORDER BY q.id, g.name LOOP
        -- Scalars, not the record's fields, in the statements Citus plans.
        v_qid := r.qid;
        v_name := r.name;
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_id = v_qid AND s.consumer_group = v_name);
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
                               WHERE p.queue_id = v_qid AND c.consumer_group = v_name);
        -- (A value computed first: Citus sends a simple CASE inside the
        -- VALUES of a reference table's insert to the nodes mangled.)
        v_mode := r.mode;
        v_from := CASE WHEN v_mode = 'new' THEN now() WHEN v_mode = 'timestamp' THEN r.from_ts END;
        INSERT INTO queen.subscriptions (queue_id, consumer_group, mode, from_ts)
        VALUES (v_qid, v_name, v_mode, v_from)
        ON CONFLICT DO NOTHING;
    END LOOP;
END;
$$;

-- extend_leases in the Citus mode: the single-node contract (sql/functions/
-- lease.sql). A lease without hints is looked for on every node (lease_id
-- is not the distribution column); the cursors are locked one statement
-- each, in (partition, group) order, and each is extended by a statement
-- routed to its node.
CREATE OR REPLACE FUNCTION queen.extend_leases(p_leases uuid[], p_seconds integer[], p_parts uuid[], p_groups text[],
                                               p_hint_k integer[], p_hint_parts uuid[], p_hint_groups text[])
RETURNS TABLE (idx integer, expires_at text, failure text)
LANGUAGE plpgsql
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_min    timestamptz;
    v_e      timestamptz;
    v_seen   boolean;
    r        record;
    k_lease  integer[] := coalesce(p_hint_k, '{}');
    k_parts  uuid[] := coalesce(p_hint_parts, '{}');
    k_groups text[] := coalesce(p_hint_groups, '{}');
    v_bare   uuid[];
    v_now    timestamptz := now();
    v_new    timestamptz;
BEGIN
    v_bare := ARRAY(SELECT p_leases[i] FROM generate_subscripts(p_leases, 1) AS i WHERE NOT (i = ANY (k_lease)));
    IF cardinality(v_bare) > 0 THEN
        FOR r IN SELECT c.lease_id, c.partition_id, c.consumer_group FROM queen.cursors c
                  WHERE c.lease_id = ANY (v_bare) LOOP
            k_lease := k_lease || array_position(p_leases, r.lease_id);
            k_parts := k_parts || r.partition_id;
            k_groups := k_groups || r.consumer_group;
        END LOOP;
    END IF;
    FOR r IN SELECT DISTINCT u.part, u.grp
               FROM unnest(coalesce(p_parts, '{}') || k_parts, coalesce(p_groups, '{}') || k_groups) AS u(part, grp)
              ORDER BY 1, 2 LOOP
        PERFORM 1 FROM queen.cursors c WHERE c.partition_id = r.part AND c.consumer_group = r.grp FOR UPDATE;
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(p_leases), 0) LOOP
        idx := i; expires_at := NULL; failure := NULL; v_min := NULL; v_seen := false;
        FOR r IN SELECT DISTINCT u.part, u.grp FROM unnest(k_lease, k_parts, k_groups) AS u(k, part, grp)
                  WHERE u.k = i LOOP
            -- Times computed first: Citus refuses a CASE over now() in a
            -- statement it routes.
            v_new := CASE WHEN p_seconds[i] < 0 THEN v_now ELSE v_now + make_interval(secs => p_seconds[i]) END;
            UPDATE queen.cursors c
               SET lease_expires_at = CASE WHEN p_seconds[i] < 0 THEN v_new ELSE greatest(c.lease_expires_at, v_new) END
             WHERE c.partition_id = r.part AND c.consumer_group = r.grp
               AND c.lease_id = p_leases[i] AND c.lease_expires_at > v_now
            RETURNING c.lease_expires_at INTO v_e;
            IF FOUND THEN
                v_min := least(v_min, v_e);
            ELSIF EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = r.part AND c.consumer_group = r.grp
                                                         AND c.lease_id = p_leases[i]) THEN
                v_seen := true;
            END IF;
        END LOOP;
        IF v_min IS NOT NULL THEN
            expires_at := to_char(v_min, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
        ELSIF v_seen THEN
            failure := 'lease_expired';
        ELSE
            failure := 'lease_not_found';
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- Every PL/pgSQL function plans its statements with the values of their
-- arguments (a custom plan each call): Citus finds the node a statement
-- goes to from those values, and cannot plan a multi-shard statement
-- generically (the single-node functions force generic plans: one plan for
-- every call, cheaper there).
DO $custom$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
              WHERE p.pronamespace = 'queen'::regnamespace
                AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'plpgsql')
                AND p.prorettype <> 'trigger'::regtype
                AND NOT coalesce('plan_cache_mode=force_custom_plan' = ANY (p.proconfig), false) LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
    END LOOP;
END;
$custom$;

-- delete_queue in the Citus mode: the single-node contract (sql/functions/
-- queues.sql): never wait for a lock, retry for up to 10 seconds. The
-- queue's partitions are listed by a read of every node; their rows, cursors
-- and dead letters are locked NOWAIT by statements routed to each
-- partition's node, in partition id order; the delete of the queue's row
-- (a reference table) cascades on every node.
CREATE OR REPLACE FUNCTION queen.delete_queue(p_name text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_qid   uuid;
    v_pid   uuid;
    v_parts uuid[];
    v_until timestamptz := clock_timestamp() + interval '10 seconds';
    v_sleep float8 := 0.002;
BEGIN
    LOOP
        BEGIN
            SELECT q.id INTO v_qid FROM queen.queues q WHERE q.name = p_name FOR UPDATE NOWAIT;
            IF NOT FOUND THEN
                RETURN false;
            END IF;
            v_parts := ARRAY(SELECT p.id FROM queen.partitions p WHERE p.queue_id = v_qid ORDER BY p.id);
            FOREACH v_pid IN ARRAY v_parts LOOP
                PERFORM 1 FROM queen.partitions p WHERE p.id = v_pid FOR UPDATE NOWAIT;
            END LOOP;
            PERFORM 1 FROM queen.subscriptions s WHERE s.queue_id = v_qid FOR UPDATE NOWAIT;
            FOREACH v_pid IN ARRAY v_parts LOOP
                PERFORM 1 FROM queen.cursors c WHERE c.partition_id = v_pid FOR UPDATE NOWAIT;
                PERFORM 1 FROM queen.dead_letters d WHERE d.partition_id = v_pid FOR UPDATE NOWAIT;
            END LOOP;
            DELETE FROM queen.queues q WHERE q.id = v_qid;
            RETURN true;
        EXCEPTION WHEN lock_not_available THEN
            IF clock_timestamp() > v_until THEN
                RAISE;
            END IF;
        END;
        PERFORM pg_sleep(v_sleep * (0.5 + random()));
        v_sleep := least(v_sleep * 2, 0.05);
    END LOOP;
END;
$$;

-- remove_dead_letters in the Citus mode: the single-node contract (sql/
-- functions/ack.sql). The dead letters' partitions are found by a read of
-- every node (an id alone names no shard); then, per partition in id order,
-- statements routed to its node lock its dead letters of p_ids in id order,
-- hide or delete them, and return them.
CREATE OR REPLACE FUNCTION queen.remove_dead_letters(p_ids uuid[])
RETURNS TABLE (id uuid, partition_id uuid, consumer_group text, "offset" bigint, frame bytea)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_pid  uuid;
    v_ids  uuid[];
    r      record;
BEGIN
    FOR v_pid IN SELECT DISTINCT d.partition_id FROM queen.dead_letters d WHERE d.id = ANY (p_ids) AND d.listed ORDER BY 1 LOOP
        v_ids := ARRAY(SELECT d.id FROM queen.dead_letters d
                        WHERE d.partition_id = v_pid AND d.id = ANY (p_ids) AND d.listed ORDER BY d.id FOR UPDATE OF d);
        FOR r IN SELECT d.id AS did, d.consumer_group AS grp, d."offset" AS off, d.frame AS fr,
                        d.resolves AND EXISTS (SELECT 1 FROM queen.cursors c
                                                WHERE c.partition_id = v_pid AND c.consumer_group = d.consumer_group
                                                  AND c.committed < d."offset") AS keep
                   FROM queen.dead_letters d WHERE d.partition_id = v_pid AND d.id = ANY (v_ids) ORDER BY d.id LOOP
            id := r.did; partition_id := v_pid; consumer_group := r.grp; "offset" := r.off; frame := r.fr;
            RETURN NEXT;
        END LOOP;
        UPDATE queen.dead_letters d SET listed = false, frame = ''::bytea
         WHERE d.partition_id = v_pid AND d.id = ANY (v_ids) AND d.resolves
           AND EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = v_pid AND c.consumer_group = d.consumer_group
                                                       AND c.committed < d."offset");
        DELETE FROM queen.dead_letters d
         WHERE d.partition_id = v_pid AND d.id = ANY (v_ids) AND d.listed;
    END LOOP;
END;
$$;

-- seek_group in the Citus mode: the single-node contract (sql/functions/
-- groups.sql). The group's cursors on the queue are listed by a read of
-- every node; each is then locked, moved and its dead letters unresolved by
-- statements routed to its partition's node, in partition order.
CREATE OR REPLACE FUNCTION queen.seek_group(p_group text, p_queue text, p_partition text, p_to_end boolean,
                                            p_at timestamptz,
                                            OUT missing text, OUT partitions uuid[], OUT head_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_qid       uuid;
    v_pid       uuid;
    v_part      uuid;
    v_head      bigint;
    v_to        bigint;
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
        v_pid := queen.partition_key(v_qid, p_partition);
        SELECT p.id INTO v_pid FROM queen.partitions p WHERE p.id = v_pid;
        IF NOT FOUND THEN
            SELECT p.id INTO v_pid FROM queen.partitions p WHERE p.queue_id = v_qid AND p.name = p_partition;
        END IF;
        IF v_pid IS NULL THEN
            missing := 'partition';
            RETURN;
        END IF;
        SELECT s.created_at INTO head_at FROM queen.segments s WHERE s.partition_id = v_pid
         ORDER BY s.first_offset DESC LIMIT 1;
    END IF;
    FOR r IN SELECT c.partition_id
               FROM queen.partitions p
               JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
              WHERE p.queue_id = v_qid AND (v_pid IS NULL OR p.id = v_pid)
              ORDER BY c.partition_id
    LOOP
        v_part := r.partition_id;
        PERFORM 1 FROM queen.cursors c WHERE c.partition_id = v_part AND c.consumer_group = p_group FOR UPDATE;
        SELECT p.head INTO v_head FROM queen.partitions p WHERE p.id = v_part;
        v_to := CASE WHEN p_to_end THEN v_head ELSE queen.seek_offset(v_part, v_head, p_at) END;
        UPDATE queen.cursors c
           SET committed = v_to, lease_id = NULL, lease_end = NULL, lease_expires_at = NULL, acked = '{}',
               not_before = NULL
         WHERE c.partition_id = v_part AND c.consumer_group = p_group
        RETURNING c.committed INTO v_committed;
        PERFORM queen.unresolve_dead_letters(p_group, ARRAY[v_part], v_committed);
        partitions := partitions || v_part;
    END LOOP;
    IF cardinality(partitions) = 0 AND NOT queen.group_known(p_group, v_qid) THEN
        missing := 'group';
    END IF;
END;
$$;
