-- lease.sql: lease extension. How the files of sql/functions are applied:
-- sql/sql.go.

-- extend_lease (one lease per call, text reasons) became extend_leases.
DROP FUNCTION IF EXISTS queen.extend_lease(uuid, integer);

-- extend_leases without the cursor hints became this one (migration 007).
DROP FUNCTION IF EXISTS queen.extend_leases(uuid[], integer[], uuid[], text[]);

-- extend_leases applies lease extensions: item i pushes out every live span
-- carrying lease p_leases[i] (one per partition a pop claimed) to at least
-- now + p_seconds[i]; it never shortens a lease and never revives an expired
-- one, except that p_seconds[i] < 0 ends the lease now (its pop's client
-- left before the answer: the next claim may take the spans again, as after
-- an expiry; no delivery attempt is counted). Items apply in order and each
-- gets its row: the earliest new expiry, or NULL and a stable code
-- (queengo.AckFailure: 'lease_expired', 'lease_not_found'), never text; http
-- renders the text.
--
-- No index covers lease_id (so that claims and acks update cursors HOT:
-- migration 007). Hint j says that lease p_leases[p_hint_k[j]] covers the
-- cursor (p_hint_parts[j], p_hint_groups[j]): the broker that handed a
-- lease out knows all its cursors. A lease without hints (another process
-- handed it out, or it forgot) is looked for in every cursor. Either way
-- only a cursor that carries the lease is extended.
--
-- Every cursor row it may write is locked first, in (partition, group)
-- order, the order queen.ack locks them in: the UPDATEs alone would lock
-- them in the order they find them, and an ack of the same cursors running
-- meanwhile could deadlock with it. p_parts/p_groups name the cursors of the
-- acks that the broker commits right after it in the same transaction (the
-- ack coalescer's shared commit): they are locked in the same pass, so that
-- the transaction takes all its cursor locks in one order and queen.ack
-- then finds them held.
CREATE OR REPLACE FUNCTION queen.extend_leases(p_leases uuid[], p_seconds integer[], p_parts uuid[], p_groups text[],
                                               p_hint_k integer[], p_hint_parts uuid[], p_hint_groups text[])
RETURNS TABLE (idx integer, expires_at text, failure text)
LANGUAGE plpgsql
-- No enable_seqscan = off here: the scan for a lease without hints has no
-- index to use, and the cost that setting puts on a sequential scan passes
-- jit_above_cost, so PostgreSQL compiled the statement at every call (190 ms
-- on an empty table, seconds under load). jit = off for the same reason:
-- these statements are small, and a large cursor table must not make the
-- scan pay for compiling.
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_min    timestamptz;
    -- Where each lease may be: (k_lease[j], k_parts[j], k_groups[j]).
    k_lease  integer[] := coalesce(p_hint_k, '{}');
    k_parts  uuid[] := coalesce(p_hint_parts, '{}');
    k_groups text[] := coalesce(p_hint_groups, '{}');
BEGIN
    IF EXISTS (SELECT 1 FROM generate_subscripts(p_leases, 1) AS i WHERE NOT (i = ANY (k_lease))) THEN
        SELECT k_lease || array_agg(l.k::integer), k_parts || array_agg(c.partition_id),
               k_groups || array_agg(c.consumer_group)
          INTO k_lease, k_parts, k_groups
          FROM unnest(p_leases) WITH ORDINALITY AS l(lease, k)
          JOIN queen.cursors c ON c.lease_id = l.lease
         WHERE NOT (l.k::integer = ANY (k_lease));
    END IF;
    PERFORM 1 FROM queen.cursors c
     WHERE (c.partition_id, c.consumer_group) IN
           (SELECT u.part, u.grp FROM unnest(coalesce(p_parts, '{}') || k_parts, coalesce(p_groups, '{}') || k_groups)
                                      AS u(part, grp))
     ORDER BY c.partition_id, c.consumer_group
       FOR UPDATE OF c;
    FOR i IN 1 .. coalesce(cardinality(p_leases), 0) LOOP
        idx := i; expires_at := NULL; failure := NULL;
        WITH mine AS (
            SELECT DISTINCT u.part, u.grp FROM unnest(k_lease, k_parts, k_groups) AS u(k, part, grp) WHERE u.k = i
        ), upd AS (
            UPDATE queen.cursors c
               SET lease_expires_at = CASE WHEN p_seconds[i] < 0 THEN now()
                                           ELSE greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds[i])) END
              FROM mine
             WHERE c.partition_id = mine.part AND c.consumer_group = mine.grp
               AND c.lease_id = p_leases[i] AND c.lease_expires_at > now()
            RETURNING c.lease_expires_at
        )
        SELECT min(upd.lease_expires_at) INTO v_min FROM upd;
        IF v_min IS NOT NULL THEN
            expires_at := to_char(v_min, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
        ELSIF EXISTS (SELECT 1 FROM unnest(k_lease, k_parts, k_groups) AS u(k, part, grp)
                        JOIN queen.cursors c ON c.partition_id = u.part AND c.consumer_group = u.grp
                       WHERE u.k = i AND c.lease_id = p_leases[i]) THEN
            failure := 'lease_expired';
        ELSE
            failure := 'lease_not_found';
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;
