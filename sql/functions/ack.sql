-- ack.sql: acknowledgements and dead letters (D2-D5). How the files of
-- sql/functions are applied: sql/sql.go.

-- frame_at returns frame k (0-based) of a segment.
CREATE OR REPLACE FUNCTION queen.frame_at(p_frames bytea, p_ends integer[], p_k integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(p_frames FROM coalesce(p_ends[p_k], 0) + 1 FOR p_ends[p_k + 1] - coalesce(p_ends[p_k], 0))
$$;

-- dead_letter copies the frame at p_offset into the dead letters of the group.
-- A dead letter of the offset that no longer resolves it (its group was
-- deleted or sought back since: migration 009) becomes this one, listed.
CREATE OR REPLACE FUNCTION queen.dead_letter(p_partition uuid, p_group text, p_offset bigint, p_error text, p_retries integer)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO queen.dead_letters (partition_id, consumer_group, "offset", frame, error_message, retry_count,
                                    original_created_at)
    SELECT p_partition, p_group, p_offset, queen.frame_at(s.frames, s.ends, (p_offset - s.first_offset)::integer),
           p_error, p_retries, s.created_at
      FROM queen.segments s
     WHERE s.partition_id = p_partition AND s.first_offset <= p_offset AND s.last_offset >= p_offset
    ON CONFLICT (partition_id, consumer_group, "offset") DO UPDATE
       SET resolves = true, listed = true, frame = excluded.frame, error_message = excluded.error_message,
           retry_count = excluded.retry_count, failed_at = excluded.failed_at
     WHERE NOT queen.dead_letters.resolves
$$;

-- remove_dead_letters takes the listed dead letters p_ids off the dead-letter
-- queue (DLQ delete and requeue, message retry) and returns them, frames
-- included. One whose offset its group has not committed past and that
-- still resolves it is hidden (listed false, frame dropped), not deleted:
-- it may be the only record that the offset is resolved (D5: a lease that
-- ended on a failure keeps only its resolved prefix), and the group must
-- not meet the message again (migration 010). The others are deleted.
-- Locks the dead letters, in id order; reads the cursors without locking.
CREATE OR REPLACE FUNCTION queen.remove_dead_letters(p_ids uuid[])
RETURNS TABLE (id uuid, partition_id uuid, consumer_group text, "offset" bigint, frame bytea)
LANGUAGE sql AS $$
    WITH gone AS MATERIALIZED (
        SELECT d.id, d.partition_id, d.consumer_group, d."offset", d.frame,
               d.resolves AND EXISTS (SELECT 1 FROM queen.cursors c
                                       WHERE c.partition_id = d.partition_id AND c.consumer_group = d.consumer_group
                                         AND c.committed < d."offset") AS keep
          FROM queen.dead_letters d
         WHERE d.id = ANY (p_ids) AND d.listed
         ORDER BY d.id
           FOR UPDATE OF d
    ), hidden AS (
        UPDATE queen.dead_letters d SET listed = false, frame = ''::bytea
          FROM gone g WHERE d.id = g.id AND g.keep
    ), deleted AS (
        DELETE FROM queen.dead_letters d USING gone g WHERE d.id = g.id AND NOT g.keep
    )
    SELECT g.id, g.partition_id, g.consumer_group, g."offset", g.frame FROM gone g
$$;

-- ack applies acknowledgements: item i acks transaction p_txids[i] of
-- partition p_parts[i] for group p_groups[i] with status p_statuses[i].
-- p_offsets[i], when not NULL, is that message's offset as the broker
-- delivered it: the set path below uses it instead of the lookup in
-- queen.txids (an index probe per item, most of a large batch's cost), so
-- the caller vouches that it belongs to p_txids[i] (the broker sends it only
-- for an item naming the lease that delivered the message, which the set
-- path requires to be live). The loop looks every
-- item up, so that a message gone since (a cleared queue) is reported as
-- such. p_offsets may be NULL or shorter than the other arrays. Items
-- are applied in (partition, group, message offset) order, whatever order
-- they came in (the broker merges the acks of concurrent requests into one
-- call: they resolve as if applied one after the other in that order), so
-- cursor rows are locked in one order and a mixed batch resolves the same
-- way however it was sent.
--
-- D2: an ack must hit the live span (committed, lease_end], and the live
-- lease when it names one; committed advances over the contiguous prefix of
-- resolved offsets (acked or dead-lettered, now or under an earlier lease),
-- never backwards; the lease ends when its whole span is resolved. D3:
-- failed (budget left) or retry ends the lease at once, keeps the resolved
-- prefix, drops the acks beyond it, and for failed delays the rest by
-- retryDelay. D4: the (retryLimit+1)-th failure of an offset dead-letters it.
-- Per-item problems are results, not errors: the column error carries a
-- stable code (queengo.AckFailure: 'message_not_found', 'lease_invalid'),
-- never text; http renders the text. (The column keeps its name so that the
-- function's row type, and so its signature, stays the same.)
--
-- The statements run do not depend on the number of items. A batch that
-- only completes messages of live leases (the common one) is one
-- statement; any other runs the loop: one statement resolving the items,
-- one locking their cursors (in (partition, group) order), one UPDATE
-- writing every cursor that changed, and a failed or dead-lettered item
-- adds its attempts and dead-letter rows. The loop steps through the items
-- in PL/pgSQL, about 10 µs each, which the set path does not pay.
DROP FUNCTION IF EXISTS queen.ack(uuid[], text[], text[], text[], uuid[], text[]);
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
SET enable_seqscan = off -- see append_segments in append.sql
SET plan_cache_mode = force_generic_plan -- see claim_read in claim.sql
AS $$
#variable_conflict use_column
DECLARE
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
    -- The common batch in one statement: every item completes a message of
    -- a live lease it names (or names none), no offset twice, on cursors
    -- with nothing acked out of order and nothing dead-lettered in their
    -- spans. Then committed advances over the contiguous prefix of the
    -- offsets (rn-th smallest = committed + rn), the rest are acked out of
    -- order, and the lease ends when its whole span is covered, at its
    -- highest offset: what the loop below does, without a PL/pgSQL step per
    -- item. Anything else (a failure, an unknown message or status, an
    -- expired or foreign lease) leaves the statement writing and returning
    -- nothing, and the loop applies the batch.
    IF NOT EXISTS (SELECT 1 FROM unnest(p_statuses) AS s WHERE s NOT IN ('completed', 'success')) THEN
        RETURN QUERY
        WITH items AS MATERIALIZED (
            SELECT u.ord::integer AS i, u.part, u.grp, u.lease,
                   coalesce(u.off, (SELECT x."offset" FROM queen.txids x
                                     WHERE x.partition_id = u.part AND x.transaction_id = u.txid)) AS off
              FROM unnest(p_parts, p_txids, p_groups, p_leases, p_offsets)
                   WITH ORDINALITY AS u(part, txid, grp, lease, off, ord)
        ), names AS MATERIALIZED (
            -- Once per partition, not per item: a batch is mostly one.
            SELECT p.id, p.name AS pname, q.name AS qname
              FROM queen.partitions p
              JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = ANY (p_parts)
        ), locked AS MATERIALIZED (
            SELECT c.partition_id, c.consumer_group, c.committed, c.lease_id, c.lease_end,
                   (c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND cardinality(c.acked) = 0
                    AND NOT EXISTS (SELECT 1 FROM queen.dead_letters d
                                     WHERE d.partition_id = c.partition_id AND d.consumer_group = c.consumer_group
                                       AND d."offset" > c.committed AND d."offset" <= c.lease_end
                                       AND d.resolves)) AS live
              FROM (SELECT DISTINCT it.part, it.grp FROM items it) i
              JOIN queen.cursors c ON c.partition_id = i.part AND c.consumer_group = i.grp
             ORDER BY c.partition_id, c.consumer_group
               FOR UPDATE OF c
        ), ranked AS (
            SELECT it.*, n.qname, n.pname, l.committed, l.lease_end,
                   row_number() OVER w AS rn,
                   coalesce(n.id IS NOT NULL AND l.live AND it.off > l.committed AND it.off <= l.lease_end
                            AND (it.lease IS NULL OR it.lease = l.lease_id)
                            AND it.off IS DISTINCT FROM lag(it.off) OVER w, false) AS fits
              FROM items it
              LEFT JOIN names n ON n.id = it.part
              LEFT JOIN locked l ON l.partition_id = it.part AND l.consumer_group = it.grp
            WINDOW w AS (PARTITION BY it.part, it.grp ORDER BY it.off)
        ), per AS (
            -- No DISTINCT or ORDER BY in these aggregates: each starts a sort
            -- of its own per group, which cost milliseconds (rest is sorted
            -- where it is written, and is mostly empty).
            SELECT r.part, r.grp, count(*) FILTER (WHERE r.off = r.committed + r.rn) AS moved, max(r.off) AS top,
                   coalesce(array_agg(r.off) FILTER (WHERE r.off <> r.committed + r.rn), '{}') AS rest,
                   bool_and(r.fits) AS ok
              FROM ranked r
             GROUP BY r.part, r.grp
        ), verdict AS (
            SELECT bool_and(per.ok) AS ok FROM per
        ), written AS (
            UPDATE queen.cursors c
               SET committed = c.committed + per.moved,
                   lease_id = CASE WHEN c.committed + per.moved >= c.lease_end THEN NULL ELSE c.lease_id END,
                   lease_end = CASE WHEN c.committed + per.moved >= c.lease_end THEN NULL ELSE c.lease_end END,
                   lease_expires_at = CASE WHEN c.committed + per.moved >= c.lease_end THEN NULL
                                           ELSE c.lease_expires_at END,
                   not_before = CASE WHEN c.committed + per.moved >= c.lease_end THEN NULL ELSE c.not_before END,
                   acked = ARRAY(SELECT o FROM unnest(per.rest) AS o ORDER BY o),
                   total_consumed = c.total_consumed + per.moved,
                   batches_consumed = c.batches_consumed + CASE WHEN c.committed + per.moved >= c.lease_end THEN 1 ELSE 0 END,
                   last_consumed_at = CASE WHEN per.moved > 0 THEN now() ELSE c.last_consumed_at END
              FROM per
             WHERE (SELECT v.ok FROM verdict v) AND c.partition_id = per.part AND c.consumer_group = per.grp
        )
        SELECT r.i, true, NULL::text, r.off = per.top AND r.committed + per.moved >= r.lease_end, false, r.qname, r.pname
          FROM ranked r
          JOIN per ON per.part = r.part AND per.grp = r.grp
         WHERE (SELECT v.ok FROM verdict v);
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;

    -- The cursors the items may change, locked in (partition, group) order,
    -- with the offsets of their spans dead-lettered under an earlier lease:
    -- those stay resolved (D5).
    OPEN cur FOR
        SELECT c.partition_id, c.consumer_group, c.committed, c.lease_id, c.lease_end, c.lease_expires_at, c.acked,
               c.not_before,
               ARRAY(SELECT d."offset" FROM queen.dead_letters d
                      WHERE d.partition_id = c.partition_id AND d.consumer_group = c.consumer_group
                        AND d."offset" > c.committed AND d."offset" <= coalesce(c.lease_end, c.committed)
                        AND d.resolves) AS dead
          FROM (SELECT DISTINCT u.part, u.grp FROM unnest(p_parts, p_groups, p_statuses) AS u(part, grp, status)
                 WHERE u.status IN ('completed', 'success', 'failed', 'retry', 'dlq')) i
          JOIN queen.cursors c ON c.partition_id = i.part AND c.consumer_group = i.grp
         ORDER BY c.partition_id, c.consumer_group
           FOR UPDATE OF c;
    FETCH cur INTO c;
    v_have := FOUND;

    FOR t IN
        SELECT u.ord::integer AS i, u.part, u.grp, q.name AS qname, p.name AS pname, q.retry_limit, q.retry_delay,
               CASE WHEN q.id IS NOT NULL THEN
                   (SELECT x."offset" FROM queen.txids x WHERE x.partition_id = u.part AND x.transaction_id = u.txid) END AS off
          FROM unnest(p_parts, p_txids, p_groups) WITH ORDINALITY AS u(part, txid, grp, ord)
          LEFT JOIN queen.partitions p ON p.id = u.part
          LEFT JOIN queen.queues q ON q.id = p.queue_id
         ORDER BY u.part, u.grp, off, u.ord
    LOOP
        idx := t.i; success := false; error := NULL; lease_released := false; dlq := false;
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
     WHERE c.partition_id = u.part AND c.consumer_group = u.grp;
END;
$$;

-- ack_spans applies spans: span k completes offsets p_firsts[k] to
-- p_lasts[k] of partition p_parts[k] for group p_groups[k], under lease
-- p_leases[k] (the caller made sure each is one cursor's acks, of distinct,
-- contiguous offsets, all completed: pg/ack.go). A span applies when it
-- starts right after the cursor's committed offset, within its live lease,
-- on a cursor with nothing acked out of order and nothing dead-lettered in
-- the lease's span: committed moves to the span's last offset, and the lease
-- ends when that is its end. This is what queen.ack's set path does with
-- such items, at the cost of a cursor rather than of an item: an ack of
-- four batch-100 pops cost 0.4 ms of PostgreSQL CPU with its commit instead
-- of 1.7-2.7 ms, one of ten batch-1 pops 0.46-0.53 ms instead of 0.59-0.61
-- (TestCost, docs/performance.md "The dated record": "2026-12-04, evening"). A row (k, NULL, ...)
-- answers each span that applied.
--
-- p_item_txids are the transaction ids of the spans' items, span by span,
-- each span's in offset order: item i of the call is an offset of one span.
-- The items of the spans that did not apply go through queen.ack in the same
-- statement (status completed, which is what success means there too), so
-- they resolve as queen.ack alone would resolve them, in the caller's
-- transaction (a lease they end is claimable by the claim that follows in
-- it, and no second commit can fail after the first): a row (NULL, i, ...)
-- answers item i.
--
-- It first locks, in (partition, group) order, the cursors of the spans and
-- those of (p_more_parts[i], p_more_groups[i]): the cursors of the items the
-- caller sends to queen.ack in the same transaction. So the transaction
-- takes all its cursor locks in one pass, in the order a lone queen.ack
-- takes them, and the conditions are checked on the locked rows.
CREATE OR REPLACE FUNCTION queen.ack_spans(p_parts uuid[], p_groups text[], p_leases uuid[], p_firsts bigint[],
                                           p_lasts bigint[], p_more_parts uuid[], p_more_groups text[],
                                           p_item_txids text[])
RETURNS TABLE (k integer, idx integer, success boolean, error text, released boolean, dlq boolean,
               queue_name text, partition_name text)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
SET plan_cache_mode = force_generic_plan -- see claim_read in claim.sql
AS $$
#variable_conflict use_column
DECLARE
    v_k      integer[];
    v_rel    boolean[];
    v_qname  text[];
    v_pname  text[];
    v_left   integer[];
    v_parts  uuid[];
    v_txids  text[];
    v_groups text[];
    v_leases uuid[];
    v_offs   bigint[];
    v_i      integer;
BEGIN
    -- A locked row per span (k) and per cursor of p_more (k NULL): a span
    -- reads its own row, with no join of spans to rows, which the planner
    -- (expecting one row from each side) ran as a loop over all rows for
    -- every span. A cursor named twice is locked twice, which is a no-op.
    WITH locked AS MATERIALIZED (
        SELECT x.k, c.partition_id, c.consumer_group, c.committed, c.lease_id, c.lease_end, c.lease_expires_at, c.acked
          FROM (SELECT s.part, s.grp, s.k::integer AS k
                  FROM unnest(p_parts, p_groups) WITH ORDINALITY AS s(part, grp, k)
                UNION ALL
                SELECT m.part, m.grp, NULL FROM unnest(p_more_parts, p_more_groups) AS m(part, grp)) x
          JOIN queen.cursors c ON c.partition_id = x.part AND c.consumer_group = x.grp
         ORDER BY c.partition_id, c.consumer_group
           FOR UPDATE OF c
    ), fit AS (
        SELECT l.k, l.partition_id, l.consumer_group, l.lease_end, p_lasts[l.k] AS last
          FROM locked l
         WHERE l.k IS NOT NULL
           AND l.lease_id = p_leases[l.k] AND l.committed = p_firsts[l.k] - 1 AND p_lasts[l.k] <= l.lease_end
           AND l.lease_expires_at > now() AND cardinality(l.acked) = 0
           AND NOT EXISTS (SELECT 1 FROM queen.dead_letters d
                            WHERE d.partition_id = l.partition_id AND d.consumer_group = l.consumer_group
                              AND d."offset" > l.committed AND d."offset" <= l.lease_end AND d.resolves)
    ), applied AS (
        UPDATE queen.cursors c
           SET committed = f.last,
               lease_id = CASE WHEN f.last >= f.lease_end THEN NULL ELSE c.lease_id END,
               lease_end = CASE WHEN f.last >= f.lease_end THEN NULL ELSE c.lease_end END,
               lease_expires_at = CASE WHEN f.last >= f.lease_end THEN NULL ELSE c.lease_expires_at END,
               not_before = CASE WHEN f.last >= f.lease_end THEN NULL ELSE c.not_before END,
               total_consumed = c.total_consumed + (f.last - c.committed),
               batches_consumed = c.batches_consumed + CASE WHEN f.last >= f.lease_end THEN 1 ELSE 0 END,
               last_consumed_at = now()
          FROM fit f
          JOIN queen.partitions p ON p.id = f.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE c.partition_id = f.partition_id AND c.consumer_group = f.consumer_group
        RETURNING f.k, f.last >= f.lease_end AS rel, q.name AS qname, p.name AS pname
    )
    SELECT array_agg(a.k), array_agg(a.rel), array_agg(a.qname), array_agg(a.pname)
      INTO v_k, v_rel, v_qname, v_pname
      FROM applied a;
    -- RETURN NEXT rather than a query over the arrays: no statement to run.
    FOR v_i IN 1 .. coalesce(cardinality(v_k), 0) LOOP
        k := v_k[v_i];
        idx := NULL;
        success := true;
        error := NULL;
        released := v_rel[v_i];
        dlq := false;
        queue_name := v_qname[v_i];
        partition_name := v_pname[v_i];
        RETURN NEXT;
    END LOOP;
    IF coalesce(cardinality(v_k), 0) = cardinality(p_parts) THEN
        RETURN;
    END IF;
    -- The items of the spans that did not apply, as p_item_txids lists them.
    SELECT array_agg(x.pos ORDER BY x.pos), array_agg(x.part ORDER BY x.pos), array_agg(p_item_txids[x.pos] ORDER BY x.pos),
           array_agg(x.grp ORDER BY x.pos), array_agg(x.lease ORDER BY x.pos), array_agg(x.off ORDER BY x.pos)
      INTO v_left, v_parts, v_txids, v_groups, v_leases, v_offs
      FROM (SELECT s.k, s.part, s.grp, s.lease, o.off, (row_number() OVER (ORDER BY s.k, o.off))::integer AS pos
              FROM unnest(p_parts, p_groups, p_leases, p_firsts, p_lasts)
                   WITH ORDINALITY AS s(part, grp, lease, first, last, k)
             CROSS JOIN LATERAL generate_series(s.first, s.last) AS o(off)) x
     WHERE NOT (x.k = ANY (coalesce(v_k, '{}')));
    IF v_left IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT NULL::integer, v_left[a.idx], a.success, a.error, a.lease_released, a.dlq, a.queue_name, a.partition_name
      FROM queen.ack(v_parts, v_txids, array_fill('completed'::text, ARRAY[cardinality(v_left)]), v_groups, v_leases,
                     array_fill(''::text, ARRAY[cardinality(v_left)]), v_offs) a;
END;
$$;
