-- streams.sql: the streams routes (issue 42, docs/api.md "Streams"). How the
-- files of sql/functions are applied: sql/sql.go.

-- streams_register registers the query p_name idempotently: a new name is
-- inserted (fresh); the same hash keeps the row (source and sink updated);
-- another hash is refused (conflict) unless p_reset, which takes the hash
-- and deletes up to p_batch state rows (more: rows are left, the caller
-- deletes them with streams_wipe, one bounded transaction at a time).
CREATE OR REPLACE FUNCTION queen.streams_register(p_name text, p_source text, p_sink text, p_hash text,
                                                  p_reset boolean, p_batch integer)
RETURNS TABLE (id uuid, fresh boolean, did_reset boolean, conflict boolean, more boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id   uuid;
    v_hash text;
BEGIN
    fresh := false; did_reset := false; conflict := false; more := false;
    INSERT INTO queen_streams.queries (name, source_queue, sink_queue, config_hash)
    VALUES (p_name, p_source, nullif(p_sink, ''), p_hash)
    ON CONFLICT (name) DO NOTHING
    RETURNING queries.id INTO v_id;
    IF v_id IS NOT NULL THEN
        id := v_id; fresh := true;
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT q.id, q.config_hash INTO v_id, v_hash FROM queen_streams.queries q WHERE q.name = p_name FOR UPDATE;
    id := v_id;
    IF v_hash <> p_hash AND NOT p_reset THEN
        conflict := true;
        RETURN NEXT;
        RETURN;
    END IF;
    IF v_hash <> p_hash THEN
        did_reset := true;
        more := queen.streams_wipe(v_id, p_batch) >= p_batch;
    END IF;
    UPDATE queen_streams.queries q
       SET source_queue = p_source, sink_queue = nullif(p_sink, ''), config_hash = p_hash, updated_at = now()
     WHERE q.id = v_id;
    RETURN NEXT;
END;
$$;

-- streams_wipe deletes up to p_batch state rows of query p_query and
-- returns how many: fewer than p_batch means none is left. A reset is a
-- series of these, each its own bounded transaction.
CREATE OR REPLACE FUNCTION queen.streams_wipe(p_query uuid, p_batch integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    DELETE FROM queen_streams.state s
     WHERE (s.partition_id, s.query_id, s.key) IN (
           SELECT x.partition_id, x.query_id, x.key FROM queen_streams.state x
            WHERE x.query_id = p_query LIMIT p_batch);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END;
$$;

-- streams_state_get reads the state rows of (p_query, p_part): those of
-- p_keys (all when empty), whose key starts with p_prefix (when not empty),
-- and whose value's numeric windowEnd is at or before p_ripe (when not
-- NULL), in key order.
CREATE OR REPLACE FUNCTION queen.streams_state_get(p_query uuid, p_part uuid, p_keys text[], p_prefix text,
                                                   p_ripe bigint)
RETURNS TABLE (key text, value jsonb, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.key, s.value, s.updated_at
      FROM queen_streams.state s
     WHERE s.partition_id = p_part AND s.query_id = p_query
       AND (cardinality(p_keys) = 0 OR s.key = ANY (p_keys))
       AND (p_prefix = '' OR starts_with(s.key, p_prefix))
       AND (p_ripe IS NULL OR (jsonb_typeof(s.value -> 'windowEnd') = 'number'
                               AND (s.value ->> 'windowEnd')::numeric <= p_ripe))
     ORDER BY s.key
$$;

-- streams_begin opens a cycle of (p_query, p_part): it serialises the
-- cycles of that pair (a transaction-scoped advisory lock, class 0x7173,
-- "qs"; cycles of other pairs do not wait) and names what is missing:
-- 'query', 'partition', or NULL when both exist. A cycle with an ack
-- (p_group not NULL) records its group on the query (docs/retention.md
-- "Streams").
CREATE OR REPLACE FUNCTION queen.streams_begin(p_query uuid, p_part uuid, p_group text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(x'7173'::integer, hashtext(p_query::text || p_part::text));
    IF NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = p_part) THEN
        RETURN 'partition';
    END IF;
    IF p_group IS NULL THEN
        PERFORM 1 FROM queen_streams.queries q WHERE q.id = p_query;
    ELSE
        UPDATE queen_streams.queries q SET consumer_group = p_group
         WHERE q.id = p_query AND q.consumer_group IS DISTINCT FROM p_group;
        IF NOT FOUND THEN
            PERFORM 1 FROM queen_streams.queries q WHERE q.id = p_query;
        END IF;
    END IF;
    IF NOT FOUND THEN
        RETURN 'query';
    END IF;
    RETURN NULL;
END;
$$;

-- streams_apply applies a cycle's state ops to (p_query, p_part): op i sets
-- key p_keys[i] to p_values[i], or deletes it when p_values[i] is NULL. Only
-- the last op of each key decides its row, which is what applying them in
-- order gives. It returns how many keys it was to delete were not there
-- (the caller refuses a flush cycle that meets one: another cycle closed
-- that window first).
CREATE OR REPLACE FUNCTION queen.streams_apply(p_query uuid, p_part uuid, p_keys text[], p_values jsonb[])
RETURNS integer
LANGUAGE sql AS $$
    WITH last AS MATERIALIZED (
        SELECT DISTINCT ON (u.key) u.key, u.value
          FROM unnest(p_keys, p_values) WITH ORDINALITY AS u(key, value, ord)
         ORDER BY u.key, u.ord DESC
    ), gone AS (
        DELETE FROM queen_streams.state s USING last l
         WHERE l.value IS NULL AND s.partition_id = p_part AND s.query_id = p_query AND s.key = l.key
        RETURNING s.key
    ), put AS (
        INSERT INTO queen_streams.state AS s (partition_id, query_id, key, value, updated_at)
        SELECT p_part, p_query, l.key, l.value, now() FROM last l WHERE l.value IS NOT NULL
        ON CONFLICT (partition_id, query_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
    )
    SELECT ((SELECT count(*) FROM last l WHERE l.value IS NULL) - (SELECT count(*) FROM gone))::integer
$$;

-- streams_ack is a cycle's source ack: the message p_txid of p_part must lie
-- in the live span (committed, lease_end] of the cursor of p_group, under
-- lease p_lease when not NULL (D2), else the ack fails ('message_not_found',
-- 'lease_invalid') and writes nothing. It resolves every offset of the span
-- up to and including that message; completed (or success) completes them,
-- failed and dlq dead-letter the message itself (the reference's cycle
-- does the same). committed then advances over the resolved prefix (earlier
-- out-of-order acks, offsets dead-lettered under an earlier lease). The
-- lease ends when p_release, on a dead letter, or when its whole span is
-- resolved; otherwise it stays on the rest of the span (the gate's ordered
-- partial ack), which returns when it expires. acked is how many offsets
-- committed moved.
CREATE OR REPLACE FUNCTION queen.streams_ack(p_part uuid, p_group text, p_txid text, p_lease uuid, p_status text,
                                             p_error text, p_release boolean)
RETURNS TABLE (failure text, acked bigint, released boolean, dlq boolean, queue_name text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_off       bigint;
    c           record;
    v_committed bigint;
    v_acked     bigint[];
    v_dead      bigint[];
    v_n         bigint;
BEGIN
    failure := NULL; acked := 0; released := false; dlq := false;
    SELECT q.name INTO queue_name FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = p_part;
    SELECT x."offset" INTO v_off FROM queen.txids x WHERE x.partition_id = p_part AND x.transaction_id = p_txid;
    IF v_off IS NULL THEN
        failure := 'message_not_found';
        RETURN NEXT;
        RETURN;
    END IF;
    SELECT cu.committed, cu.lease_id, cu.lease_end, cu.lease_expires_at, cu.acked INTO c
      FROM queen.cursors cu WHERE cu.partition_id = p_part AND cu.consumer_group = p_group FOR UPDATE;
    IF NOT FOUND OR c.lease_id IS NULL OR c.lease_expires_at <= now() OR v_off <= c.committed OR v_off > c.lease_end
       OR (p_lease IS NOT NULL AND p_lease <> c.lease_id) THEN
        failure := 'lease_invalid';
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_status IN ('failed', 'dlq') THEN
        PERFORM queen.dead_letter(p_part, p_group, v_off, coalesce(nullif(p_error, ''), 'Streaming cycle reported failure'), 0);
        dlq := true;
    END IF;
    v_dead := ARRAY(SELECT d."offset" FROM queen.dead_letters d
                     WHERE d.partition_id = p_part AND d.consumer_group = p_group
                       AND d."offset" > v_off AND d."offset" <= c.lease_end AND d.resolves);
    v_committed := v_off;
    v_acked := ARRAY(SELECT o FROM unnest(c.acked) AS o WHERE o > v_off ORDER BY o);
    WHILE (v_committed + 1) = ANY (v_acked) OR (v_committed + 1) = ANY (v_dead) LOOP
        v_acked := array_remove(v_acked, v_committed + 1);
        v_committed := v_committed + 1;
    END LOOP;
    v_n := v_committed - c.committed;
    acked := v_n;
    released := p_release OR dlq OR v_committed >= c.lease_end;
    UPDATE queen.cursors cu
       SET committed = v_committed,
           lease_id = CASE WHEN released THEN NULL ELSE cu.lease_id END,
           lease_end = CASE WHEN released THEN NULL ELSE cu.lease_end END,
           lease_expires_at = CASE WHEN released THEN NULL ELSE cu.lease_expires_at END,
           not_before = CASE WHEN released THEN NULL ELSE cu.not_before END,
           acked = CASE WHEN released THEN '{}'::bigint[] ELSE v_acked END,
           total_consumed = cu.total_consumed + v_n,
           batches_consumed = cu.batches_consumed + CASE WHEN v_committed >= c.lease_end THEN 1 ELSE 0 END,
           last_consumed_at = now()
     WHERE cu.partition_id = p_part AND cu.consumer_group = p_group;
    RETURN NEXT;
END;
$$;

-- streams_list lists the registered queries (p_name NULL: every one), by
-- name, with their state's rows and source partitions and the lag of their
-- group: the source queue's messages past the group's committed offsets
-- (every message of a partition where it has no cursor, or when the query
-- has not acked yet).
CREATE OR REPLACE FUNCTION queen.streams_list(p_name text)
RETURNS TABLE (id uuid, name text, source_queue text, sink_queue text, config_hash text, consumer_group text,
               created_at timestamptz, updated_at timestamptz, state_rows bigint, state_partitions bigint, lag bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.name, q.source_queue, coalesce(q.sink_queue, ''), q.config_hash, coalesce(q.consumer_group, ''),
           q.created_at, q.updated_at,
           (SELECT count(*) FROM queen_streams.state s WHERE s.query_id = q.id),
           (SELECT count(DISTINCT s.partition_id) FROM queen_streams.state s WHERE s.query_id = q.id),
           coalesce((SELECT sum(p.head - coalesce(c.committed, 0))
                       FROM queen.queues sq
                       JOIN queen.partitions p ON p.queue_id = sq.id
                       LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = q.consumer_group
                      WHERE sq.name = q.source_queue), 0)::bigint
      FROM queen_streams.queries q
     WHERE p_name IS NULL OR q.name = p_name
     ORDER BY q.name
$$;

-- streams_partitions is one query's view per source partition: its state
-- rows there, the last state write, and its group's lag.
CREATE OR REPLACE FUNCTION queen.streams_partitions(p_query uuid)
RETURNS TABLE (partition_id uuid, partition_name text, state_rows bigint, lag bigint, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT p.id, p.name, count(s.key), p.head - coalesce(c.committed, 0), max(s.updated_at)
      FROM queen_streams.queries q
      JOIN queen.queues sq ON sq.name = q.source_queue
      JOIN queen.partitions p ON p.queue_id = sq.id
      LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = q.consumer_group
      LEFT JOIN queen_streams.state s ON s.partition_id = p.id AND s.query_id = q.id
     WHERE q.id = p_query
     GROUP BY p.id, p.name, p.head, c.committed
     ORDER BY p.name
$$;
