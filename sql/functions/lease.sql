-- lease.sql: lease extension. How the files of sql/functions are applied:
-- sql/sql.go.

-- extend_lease (one lease per call, text reasons) became extend_leases.
DROP FUNCTION IF EXISTS queen.extend_lease(uuid, integer);

-- extend_leases applies lease extensions: item i pushes out every live span
-- carrying lease p_leases[i] (one per partition a pop claimed) to at least
-- now + p_seconds[i]; it never shortens a lease and never revives an expired
-- one. Items apply in order and each gets its row: the earliest new expiry,
-- or NULL and a stable code (queengo.AckFailure: 'lease_expired',
-- 'lease_not_found'), never text; http renders the text.
--
-- Every cursor row it may write is locked first, in (partition, group)
-- order, the order queen.ack locks them in: the UPDATEs alone would lock
-- them in the order they find them (physical order, lease by lease), and an
-- ack of the same cursors running meanwhile could deadlock with it.
-- p_parts/p_groups name the cursors of the acks that the broker commits
-- right after it in the same transaction (the ack coalescer's shared
-- commit): they are locked in the same pass, so that the transaction takes
-- all its cursor locks in one order and queen.ack then finds them held.
CREATE OR REPLACE FUNCTION queen.extend_leases(p_leases uuid[], p_seconds integer[], p_parts uuid[], p_groups text[])
RETURNS TABLE (idx integer, expires_at text, failure text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_min timestamptz;
BEGIN
    PERFORM 1 FROM queen.cursors c
     WHERE (c.lease_id = ANY (p_leases) AND c.lease_expires_at > now())
        OR (c.partition_id, c.consumer_group) IN (SELECT u.part, u.grp FROM unnest(p_parts, p_groups) AS u(part, grp))
     ORDER BY c.partition_id, c.consumer_group
       FOR UPDATE OF c;
    FOR i IN 1 .. coalesce(cardinality(p_leases), 0) LOOP
        idx := i; expires_at := NULL; failure := NULL;
        WITH upd AS (
            UPDATE queen.cursors c
               SET lease_expires_at = greatest(c.lease_expires_at, now() + make_interval(secs => p_seconds[i]))
             WHERE c.lease_id = p_leases[i] AND c.lease_expires_at > now()
            RETURNING c.lease_expires_at
        )
        SELECT min(upd.lease_expires_at) INTO v_min FROM upd;
        IF v_min IS NOT NULL THEN
            expires_at := to_char(v_min, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
        ELSIF EXISTS (SELECT 1 FROM queen.cursors c WHERE c.lease_id = p_leases[i]) THEN
            failure := 'lease_expired';
        ELSE
            failure := 'lease_not_found';
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;
