-- lease.sql: lease extension. How the files of sql/functions are applied:
-- sql/sql.go.

-- extend_lease pushes out every live span carrying the lease id (one per
-- partition a pop claimed) to at least now + p_seconds; it never shortens a
-- lease and never revives an expired one. Returns the earliest new expiry, or
-- NULL with the reason.
--
-- The cursor rows are locked first in (partition, group) order, the order
-- queen.ack locks them in: the UPDATE alone would lock them in the order it
-- finds them (physical order), and an ack of the same lease's partitions
-- running meanwhile could deadlock with it.
CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease uuid, p_seconds integer, OUT expires_at text, OUT reason text)
LANGUAGE plpgsql AS $$
DECLARE
    v_min timestamptz;
BEGIN
    PERFORM 1 FROM queen.cursors c
     WHERE c.lease_id = p_lease AND c.lease_expires_at > now()
     ORDER BY c.partition_id, c.consumer_group
       FOR UPDATE;
    WITH upd AS (
        UPDATE queen.cursors
           SET lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => p_seconds))
         WHERE lease_id = p_lease AND lease_expires_at > now()
        RETURNING lease_expires_at
    )
    SELECT min(upd.lease_expires_at) INTO v_min FROM upd;
    IF v_min IS NOT NULL THEN
        expires_at := to_char(v_min, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"');
    ELSIF EXISTS (SELECT 1 FROM queen.cursors WHERE lease_id = p_lease) THEN
        reason := 'Lease already expired';
    ELSE
        reason := 'Lease not found';
    END IF;
END;
$$;
