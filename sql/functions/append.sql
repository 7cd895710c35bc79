-- append.sql: the write path. How the files of sql/functions are applied:
-- sql/sql.go.
--
-- The hot statements are one round trip and one implicit transaction each;
-- the broker pipelines several of them when it can.

-- append_segments writes one coalesced segment to each of several partitions
-- of a queue in one statement and one commit. Item i belongs to the segment of
-- partition p_parts[p_seg[i]]; the broker has already removed duplicates
-- inside each segment, this removes the ones already stored. Offsets are
-- assigned under the partition rows' locks, taken in id order so concurrent
-- writers never deadlock, so they are contiguous and gap-free even with
-- several broker processes (D1). Returns, per item, the id of the stored
-- message it duplicates, NULL when the item was written, or the all-ones id
-- when the item was refused because its queue is full.
--
-- maxSize: a queue with max_queue_size > 0 takes a fresh item only while it
-- holds fewer unconsumed messages than that: per partition, the messages
-- past the slowest group's committed offset (every retained message when no
-- group has a cursor there), summed over the queue's partitions. Items are
-- taken in request order until the queue is full, the rest are refused;
-- duplicates take no room. A transaction-scoped advisory lock per capped
-- queue, taken after the partition rows, makes concurrent writers of one
-- queue count one after the other. A queue without maxSize pays one
-- primary-key probe of its queue row, inside the statement that locks the
-- partitions.
--
-- encryptionEnabled: every item for such a queue must come sealed (flag bit
-- frameSealed, 4, of the frame's first byte: pg/frames.go). A writer that read
-- the queue's settings before encryption was turned on (maybe by another
-- process) is refused with QG412 before anything is written, and sends its
-- segment again sealed; a payload of an encrypted queue never reaches the
-- table in plaintext.
--
-- The lock is FOR NO KEY UPDATE: this function changes only head and
-- last_write_at, never the key. It excludes every other writer of the row
-- but not the FOR KEY SHARE locks that foreign-key checks take on it (a
-- claim creating cursors, an ack inserting attempts or dead letters), so
-- none of those ever waits for a writer; FOR UPDATE would, in whatever
-- order they meet the rows, and deadlock with the writers' id order
-- (issue 8). Lock order: docs/storage.md.
CREATE OR REPLACE FUNCTION queen.append_segments(
    p_parts  uuid[],
    p_seg    integer[],
    p_txids  text[],
    p_msgids uuid[],
    p_frames bytea[]
) RETURNS uuid[]
LANGUAGE plpgsql
-- Every lookup in the hot functions is by key. A broker starting on fresh
-- tables would otherwise have PL/pgSQL cache plans made for empty tables
-- (sequential scans) and keep them while the tables grow, until autovacuum
-- first analyzes them; a sequential scan of the transaction ids per commit
-- cost 30x the commit itself (docs/performance.md "The dated record").
SET enable_seqscan = off
AS $$
DECLARE
    v_locked  integer;
    v_capped  uuid[];
    v_sealed  uuid[];
    v_qid     uuid;
    v_refused integer[];
    v_k       integer;
    v_dup     uuid[];
    v_n       integer;
    v_ts      timestamptz;
    v_head    bigint[];
BEGIN
    SELECT count(*), array_agg(DISTINCT l.queue_id) FILTER (WHERE l.max_queue_size > 0),
           array_agg(l.id) FILTER (WHERE l.encryption_enabled)
      INTO v_locked, v_capped, v_sealed
      FROM (SELECT p.id, p.queue_id, q.max_queue_size, q.encryption_enabled
              FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
             WHERE p.id = ANY (p_parts) ORDER BY p.id FOR NO KEY UPDATE OF p) l;
    IF v_locked < cardinality(p_parts) THEN
        RAISE EXCEPTION 'partition not found' USING ERRCODE = 'QG404';
    END IF;
    IF v_sealed IS NOT NULL AND EXISTS (
        SELECT 1 FROM unnest(p_seg, p_frames) AS u(seg, frame)
         WHERE p_parts[u.seg] = ANY (v_sealed) AND get_byte(u.frame, 0) & 4 = 0) THEN
        RAISE EXCEPTION 'queue has encryptionEnabled: payloads must come sealed' USING ERRCODE = 'QG412';
    END IF;

    -- One primary-key probe per item (a join would let the planner hash the
    -- whole index table). OFFSET 0 keeps the subquery whole: pulled up, its
    -- probe ran once for each of the two uses of dup.
    SELECT array_agg(t.dup ORDER BY t.ord), count(*) FILTER (WHERE t.dup IS NULL)
      INTO v_dup, v_n
      FROM (SELECT u.ord, (SELECT x.message_id FROM queen.txids x
                            WHERE x.partition_id = p_parts[u.seg] AND x.transaction_id = u.txid) AS dup
              FROM unnest(p_seg, p_txids) WITH ORDINALITY AS u(seg, txid, ord)
            OFFSET 0) t;
    IF v_n > 0 AND v_capped IS NOT NULL THEN
        -- In queue id order, so writers of several capped queues (a
        -- transaction) take them in one order. The key's class (0x7167,
        -- "qg") keeps it apart from other users of two-key advisory locks.
        FOREACH v_qid IN ARRAY ARRAY(SELECT u FROM unnest(v_capped) AS u ORDER BY u) LOOP
            PERFORM pg_advisory_xact_lock(x'7167'::integer, hashtext(v_qid::text));
        END LOOP;
        WITH room AS (
            SELECT q.id, q.max_queue_size - coalesce(
                   (SELECT sum(p.head - greatest(
                               coalesce((SELECT min(c.committed) FROM queen.cursors c WHERE c.partition_id = p.id), 0),
                               coalesce((SELECT s.first_offset FROM queen.segments s WHERE s.partition_id = p.id
                                          ORDER BY s.first_offset LIMIT 1), p.head + 1) - 1))
                      FROM queen.partitions p WHERE p.queue_id = q.id), 0) AS room
              FROM queen.queues q WHERE q.id = ANY (v_capped)
        ), fresh AS (
            SELECT u.ord, r.room, row_number() OVER (PARTITION BY r.id ORDER BY u.ord) AS rn
              FROM unnest(p_seg) WITH ORDINALITY AS u(seg, ord)
              JOIN queen.partitions p ON p.id = p_parts[u.seg]
              JOIN room r ON r.id = p.queue_id
             WHERE v_dup[u.ord] IS NULL
        )
        SELECT coalesce(array_agg(f.ord::integer), '{}') INTO v_refused FROM fresh f WHERE f.rn > f.room;
        FOREACH v_k IN ARRAY v_refused LOOP
            v_dup[v_k] := 'ffffffff-ffff-ffff-ffff-ffffffffffff';
        END LOOP;
        v_n := v_n - cardinality(v_refused);
    END IF;
    IF v_n = 0 THEN
        RETURN v_dup;
    END IF;

    -- One time for every segment of the commit, taken after the locks and
    -- never behind any of their partitions' last write, so createdAt orders
    -- segments within a partition and a push spread over several partitions
    -- shares one createdAt (docs/pop-routes.md). v_head[k] is the head of
    -- partition p_parts[k].
    SELECT greatest(clock_timestamp(), max(p.last_write_at)), array_agg(p.head ORDER BY u.k)
      INTO v_ts, v_head
      FROM unnest(p_parts) WITH ORDINALITY AS u(id, k) JOIN queen.partitions p ON p.id = u.id;

    -- Every item finds its partition's head by subscript and every segment
    -- is one group of a single pass: joining items to segments made the
    -- planner, which expects one row from each, loop over one for every row
    -- of the other, quadratic in a commit spread over many partitions
    -- (docs/performance.md "The dated record": "2026-12-07").
    WITH fresh AS (
        SELECT t.ord, t.seg, t.txid, t.msgid, t.frame,
               row_number() OVER w AS rn, sum(length(t.frame)) OVER w AS cum
          FROM unnest(p_seg, p_txids, p_msgids, p_frames) WITH ORDINALITY AS t(seg, txid, msgid, frame, ord)
         WHERE v_dup[t.ord] IS NULL
        WINDOW w AS (PARTITION BY t.seg ORDER BY t.ord)
    ), ins_tx AS (
        INSERT INTO queen.txids (partition_id, transaction_id, "offset", message_id)
        SELECT p_parts[f.seg], f.txid, v_head[f.seg] + f.rn, f.msgid FROM fresh f
    ), segs AS (
        SELECT f.seg, count(*) AS n, array_agg(f.cum::integer ORDER BY f.ord) AS ends,
               string_agg(f.frame, ''::bytea ORDER BY f.ord) AS frames
          FROM fresh f GROUP BY f.seg
    ), ins_seg AS (
        INSERT INTO queen.segments (partition_id, first_offset, last_offset, created_at, ends, frames)
        SELECT p_parts[s.seg], v_head[s.seg] + 1, v_head[s.seg] + s.n, v_ts, s.ends, s.frames FROM segs s
    )
    UPDATE queen.partitions p SET head = v_head[s.seg] + s.n, last_write_at = v_ts FROM segs s WHERE p.id = p_parts[s.seg];
    RETURN v_dup;
END;
$$;
