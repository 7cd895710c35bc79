-- import.sql: the writes of `queengo import queen` (pg/queenimport.go,
-- docs/operations.md "Importing a Queen database"). How the files of
-- sql/functions are applied: sql/sql.go.
--
-- The import keeps the reference server's ids (queues, partitions,
-- messages, dead letters, traces) and its message times, and writes the
-- rows the broker writes: segments, transaction ids and heads as
-- append_segments does, cursors as a claim's first contact does, dead
-- letters as an ack does. It writes nothing of its own: where it stopped is
-- in those rows (a partition's head and its last segment), so a run after a
-- crash goes on from there.

-- import_segments appends the messages of one page of a Queen partition to
-- it, as segments: item i goes to segment p_seg[i] (1, 2, ... in item
-- order), created at p_created[p_seg[i]]. Offsets follow the partition's
-- head, which must be p_head, the count the import has written there: a
-- partition someone else wrote since (a broker's push) is refused (QG409)
-- rather than mixed with its messages. Frames of a queue with
-- encryptionEnabled must come sealed (QG412), as append_segments requires.
-- A transaction id already stored there is a unique violation: the
-- import read a message twice, which the head check rules out. Returns
-- the new head.
--
-- Locks the partition row FOR NO KEY UPDATE, as a segment write does
-- (docs/storage.md "Lock order"), then only rows it inserts.
CREATE OR REPLACE FUNCTION queen.import_segments(
    p_part    uuid,
    p_head    bigint,
    p_seg     integer[],
    p_created timestamptz[],
    p_txids   text[],
    p_msgids  uuid[],
    p_frames  bytea[]
) RETURNS bigint
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
DECLARE
    v_head   bigint;
    v_sealed boolean;
    v_n      integer := cardinality(p_txids);
BEGIN
    SELECT p.head, q.encryption_enabled INTO v_head, v_sealed
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE p.id = p_part FOR NO KEY UPDATE OF p;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'partition not found' USING ERRCODE = 'QG404';
    END IF;
    IF v_head <> p_head THEN
        RAISE EXCEPTION 'partition % holds offsets up to %, the import wrote up to %: it was written since', p_part, v_head, p_head
            USING ERRCODE = 'QG409';
    END IF;
    IF v_sealed AND EXISTS (SELECT 1 FROM unnest(p_frames) AS f(frame) WHERE get_byte(f.frame, 0) & 4 = 0) THEN
        RAISE EXCEPTION 'queue has encryptionEnabled: payloads must come sealed' USING ERRCODE = 'QG412';
    END IF;
    IF v_n = 0 THEN
        RETURN v_head;
    END IF;
    WITH items AS (
        SELECT t.seg, t.txid, t.msgid, t.frame, t.ord,
               sum(length(t.frame)) OVER (PARTITION BY t.seg ORDER BY t.ord) AS cum
          FROM unnest(p_seg, p_txids, p_msgids, p_frames) WITH ORDINALITY AS t(seg, txid, msgid, frame, ord)
    ), ins_tx AS (
        INSERT INTO queen.txids (partition_id, transaction_id, "offset", message_id)
        SELECT p_part, i.txid, v_head + i.ord, i.msgid FROM items i
    ), segs AS (
        SELECT i.seg, min(i.ord) AS first, max(i.ord) AS last, array_agg(i.cum::integer ORDER BY i.ord) AS ends,
               string_agg(i.frame, ''::bytea ORDER BY i.ord) AS frames
          FROM items i GROUP BY i.seg
    ), ins_seg AS (
        INSERT INTO queen.segments (partition_id, first_offset, last_offset, created_at, ends, frames)
        SELECT p_part, v_head + s.first, v_head + s.last, p_created[s.seg], s.ends, s.frames FROM segs s
    )
    UPDATE queen.partitions p
       SET head = v_head + v_n,
           last_write_at = greatest(p.last_write_at, (SELECT max(c.t) FROM unnest(p_created) AS c(t)))
     WHERE p.id = p_part;
    RETURN v_head + v_n;
END;
$$;

-- import_cursors sets the cursor of group p_groups[i] on partition
-- p_parts[i] before the message whose transaction id is p_next[i], the
-- first one the group has not consumed on Queen: committed is that
-- message's offset minus one, or the head when the group consumed all
-- (p_next NULL) or when that message is not imported yet (the import
-- writes a partition's messages in order, so every message before it is).
-- A cursor is never moved back, nor while it holds a live lease: a run
-- after consumers started on queengo leaves what they moved. Where it
-- writes a cursor and p_failures[i] > 0, the next offset gets that many
-- failures (queen.attempts): the reference counts its failed acks per
-- (partition, group) against whatever it delivers next. Returns the
-- cursors, written or kept. Locks each partition row FOR KEY SHARE and
-- inserts the cursors in (partition, group) order, as claim_contact does.
CREATE OR REPLACE FUNCTION queen.import_cursors(p_parts uuid[], p_groups text[], p_next text[], p_consumed bigint[],
                                                p_last_at timestamptz[], p_created timestamptz[], p_failures integer[])
RETURNS TABLE (partition_id uuid, consumer_group text, committed bigint, written boolean)
LANGUAGE plpgsql
SET enable_seqscan = off -- see append_segments in append.sql
AS $$
BEGIN
    RETURN QUERY
    WITH want AS (
        SELECT u.part, u.grp, u.consumed, u.last_at, u.created, u.failures, p.head,
               CASE WHEN u.next IS NULL THEN p.head
                    ELSE coalesce((SELECT x."offset" - 1 FROM queen.txids x
                                    WHERE x.partition_id = u.part AND x.transaction_id = u.next), p.head) END AS committed
          FROM unnest(p_parts, p_groups, p_next, p_consumed, p_last_at, p_created, p_failures)
               AS u(part, grp, next, consumed, last_at, created, failures)
          JOIN queen.partitions p ON p.id = u.part
         ORDER BY u.part, u.grp
           FOR KEY SHARE OF p
    ), up AS (
        INSERT INTO queen.cursors AS c (partition_id, consumer_group, committed, total_consumed, last_consumed_at,
                                        created_at)
        SELECT w.part, w.grp, w.committed, w.consumed, w.last_at, w.created FROM want w ORDER BY w.part, w.grp
        ON CONFLICT ON CONSTRAINT cursors_pkey DO UPDATE
           SET committed = EXCLUDED.committed, total_consumed = EXCLUDED.total_consumed,
               last_consumed_at = EXCLUDED.last_consumed_at, lease_id = NULL, lease_end = NULL,
               lease_expires_at = NULL, acked = '{}', not_before = NULL
         WHERE c.committed <= EXCLUDED.committed AND (c.lease_id IS NULL OR c.lease_expires_at <= now())
        RETURNING c.partition_id, c.consumer_group
    ), tried AS (
        INSERT INTO queen.attempts AS a (partition_id, consumer_group, "offset", failures)
        SELECT w.part, w.grp, w.committed + 1, w.failures
          FROM want w JOIN up ON up.partition_id = w.part AND up.consumer_group = w.grp
         WHERE w.failures > 0 AND w.committed < w.head
        ON CONFLICT ON CONSTRAINT attempts_pkey DO UPDATE SET failures = EXCLUDED.failures
    )
    SELECT w.part, w.grp, coalesce(c.committed, w.committed), up.partition_id IS NOT NULL
      FROM want w
      LEFT JOIN up ON up.partition_id = w.part AND up.consumer_group = w.grp
      LEFT JOIN queen.cursors c ON c.partition_id = w.part AND c.consumer_group = w.grp AND up.partition_id IS NULL;
END;
$$;

-- import_dead_letters copies Queen's dead letters: each names its message
-- by transaction id, and gets the frame the import stored for it (sealed
-- as its segment is) and its Queen id. It resolves its offset for its
-- group (D5) when that group's cursor has passed it, as it has when the
-- reference dead-lettered it (the reference moves the cursor onto the
-- dead letter); a group whose cursor is before it meets the message again,
-- as on the reference, whose dead letters never hide a message. A dead
-- letter whose message is not imported is left for a later run; one
-- already there (by id, or a second one of the same message and group) is
-- skipped. Returns how many it wrote.
CREATE OR REPLACE FUNCTION queen.import_dead_letters(p_ids uuid[], p_parts uuid[], p_groups text[], p_txids text[],
                                                     p_errors text[], p_retries integer[], p_created timestamptz[],
                                                     p_failed timestamptz[])
RETURNS integer
LANGUAGE sql AS $$
    WITH ins AS (
        INSERT INTO queen.dead_letters (id, partition_id, consumer_group, "offset", frame, error_message, retry_count,
                                        original_created_at, failed_at, resolves)
        SELECT d.id, d.part, d.grp, x."offset", queen.frame_at(s.frames, s.ends, (x."offset" - s.first_offset)::integer),
               nullif(d.err, ''), d.retries, coalesce(d.created, s.created_at), d.failed,
               coalesce(c.committed >= x."offset", false)
          FROM unnest(p_ids, p_parts, p_groups, p_txids, p_errors, p_retries, p_created, p_failed)
               AS d(id, part, grp, txid, err, retries, created, failed)
          JOIN queen.txids x ON x.partition_id = d.part AND x.transaction_id = d.txid
          JOIN queen.segments s ON s.partition_id = d.part AND s.first_offset <= x."offset" AND s.last_offset >= x."offset"
          LEFT JOIN queen.cursors c ON c.partition_id = d.part AND c.consumer_group = d.grp
        ON CONFLICT DO NOTHING
        RETURNING 1
    )
    SELECT count(*)::integer FROM ins
$$;

-- import_traces copies Queen's traces with their ids and times; trace
-- p_trace_of[j] carries name p_names[j] (names sorted by bytes). A trace
-- already there is skipped. The names' counters are import_trace_stats'.
-- Returns how many traces it wrote.
CREATE OR REPLACE FUNCTION queen.import_traces(p_ids uuid[], p_parts uuid[], p_txids text[], p_groups text[],
                                               p_events text[], p_data text[], p_workers text[],
                                               p_created timestamptz[], p_trace_of integer[], p_names text[])
RETURNS integer
LANGUAGE sql AS $$
    WITH n AS (
        SELECT n.k, array_agg(n.name ORDER BY n.name COLLATE "C") AS names
          FROM unnest(p_trace_of, p_names) AS n(k, name) GROUP BY n.k
    ), t AS (
        SELECT u.*, coalesce(n.names, '{}') AS names
          FROM unnest(p_ids, p_parts, p_txids, p_groups, p_events, p_data, p_workers, p_created)
               WITH ORDINALITY AS u(id, part, txid, grp, ev, data, worker, created, k)
          LEFT JOIN n ON n.k = u.k
    ), ins AS (
        INSERT INTO queen.traces (id, partition_id, transaction_id, consumer_group, event_type, data, worker_id, names,
                                  created_at)
        SELECT t.id, t.part, t.txid, t.grp, t.ev, t.data::json, t.worker, t.names, t.created FROM t
        ON CONFLICT (id) DO NOTHING
        RETURNING id, partition_id, transaction_id, names, created_at
    ), named AS (
        INSERT INTO queen.trace_names (partition_id, transaction_id, name, trace_id, created_at)
        SELECT i.partition_id, i.transaction_id, n.name, i.id, i.created_at FROM ins i, unnest(i.names) AS n(name)
        ON CONFLICT DO NOTHING
    )
    SELECT count(*)::integer FROM ins
$$;

-- import_trace_stats sets the counters of the trace names recorded on the
-- partitions from their trace_names rows (what record_trace keeps
-- counting): traces, distinct messages and the newest trace per (name,
-- partition).
CREATE OR REPLACE FUNCTION queen.import_trace_stats(p_parts uuid[])
RETURNS void
LANGUAGE sql AS $$
    DELETE FROM queen.trace_name_stats s WHERE s.partition_id = ANY (p_parts);
    INSERT INTO queen.trace_name_stats (name, partition_id, traces, messages, last_seen)
    SELECT n.name, n.partition_id, count(*), count(DISTINCT n.transaction_id), max(n.created_at)
      FROM queen.trace_names n WHERE n.partition_id = ANY (p_parts)
     GROUP BY n.name, n.partition_id;
$$;
