-- traces.sql: message traces (docs/api.md "Traces"; tables in migration
-- 006). How the files of sql/functions are applied: sql/sql.go.

-- record_trace records a trace event for the message (p_partition, p_txid)
-- and returns its id, or NULL when no such message is stored (never pushed,
-- its segment is gone, or it was deleted: a tombstone, migration 004).
-- p_names must be sorted and distinct: the counter
-- rows of one partition are then locked in one order by every trace.
--
-- Locks: the partition row FOR KEY SHARE (foreign-key check of the first
-- insert), then the counter row of each (name, partition) in name order;
-- nothing else. The counters are updated under that row lock, so two traces
-- of one message with the same name, recorded at once, count the message
-- once: the probe of trace_names runs after the lock is held, in a snapshot
-- that sees the other trace's row (every statement of a plpgsql function
-- takes a fresh snapshot under READ COMMITTED).
CREATE OR REPLACE FUNCTION queen.record_trace(p_partition uuid, p_txid text, p_group text, p_event text,
                                              p_data json, p_worker text, p_names text[])
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id   uuid := gen_random_uuid();
    v_at   timestamptz := clock_timestamp();
    v_name text;
BEGIN
    PERFORM 1 FROM queen.txids x
     WHERE x.partition_id = p_partition AND x.transaction_id = p_txid
       AND NOT EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = x.partition_id AND t."offset" = x."offset");
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO queen.traces (id, partition_id, transaction_id, consumer_group, event_type, data, worker_id, names,
                              created_at)
    VALUES (v_id, p_partition, p_txid, p_group, p_event, p_data, p_worker, p_names, v_at);
    FOREACH v_name IN ARRAY p_names LOOP
        INSERT INTO queen.trace_name_stats AS s (name, partition_id, traces, messages, last_seen)
        VALUES (v_name, p_partition, 1, 0, v_at)
        ON CONFLICT (name, partition_id) DO UPDATE
           SET traces = s.traces + 1, last_seen = greatest(s.last_seen, EXCLUDED.last_seen);
        UPDATE queen.trace_name_stats s SET messages = s.messages + 1
         WHERE s.name = v_name AND s.partition_id = p_partition
           AND NOT EXISTS (SELECT 1 FROM queen.trace_names n
                            WHERE n.partition_id = p_partition AND n.transaction_id = p_txid AND n.name = v_name);
        INSERT INTO queen.trace_names (partition_id, transaction_id, name, trace_id, created_at)
        VALUES (p_partition, p_txid, v_name, v_id, v_at);
    END LOOP;
    RETURN v_id;
END;
$$;
