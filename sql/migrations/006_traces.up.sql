-- 006: message traces (POST /api/v1/traces, docs/api.md "Traces"). A
-- trace names its message by (partition_id, transaction_id), the key every
-- client holds. All three tables hang off the partition (ON DELETE CASCADE):
-- traces go with their partition (a queue delete, an idle-partition
-- cleanup), not with their message's segment, so a trace outlives the
-- message's retention. Nothing else deletes them. They are written only by
-- queen.record_trace, which holds a key share on the partition (the foreign
-- key check of its first insert) until it commits, so queen.delete_queue's
-- NOWAIT lock on the partition waits out a trace being recorded and its
-- cascade then finds none of these rows locked.

-- One row per trace event. data is json, not jsonb: it is stored and
-- returned as the client sent it (compacted), never queried. names holds the
-- trace's names, sorted, so the readers need no join to list them.
CREATE TABLE queen.traces (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id text COLLATE "C" NOT NULL,
    consumer_group text NOT NULL,
    event_type     text NOT NULL,
    data           json NOT NULL,
    worker_id      text NOT NULL,
    names          text[] NOT NULL,
    created_at     timestamptz NOT NULL
);
-- The traces of a message, oldest first; also the partition cascade's index.
CREATE INDEX traces_message ON queen.traces (partition_id, transaction_id, created_at, id);

-- One row per (trace, name). The primary key serves the partition cascade
-- and record_trace's "first trace of this name for this message" probe;
-- trace_names_by_name pages a name's traces, newest first.
CREATE TABLE queen.trace_names (
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id text COLLATE "C" NOT NULL,
    name           text COLLATE "C" NOT NULL,
    trace_id       uuid NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (partition_id, transaction_id, name, trace_id)
);
CREATE INDEX trace_names_by_name ON queen.trace_names (name, created_at DESC, trace_id DESC);

-- Counters per (name, partition), kept by record_trace, so the names list
-- and a name's total cost one row per (name, partition), not one per trace.
-- Per partition rather than per name: a partition's counters go with it
-- through the cascade (no trigger to subtract them), a message belongs to
-- one partition (so distinct messages add up across partitions), and two
-- traces only wait for each other on a counter row when they carry the
-- same name for the same partition. Every trace updates its names' rows:
-- fillfactor 80 leaves room on each page for the new versions, so they stay
-- heap-only (no index entry) and are pruned on the page until autovacuum
-- comes.
CREATE TABLE queen.trace_name_stats (
    name         text COLLATE "C" NOT NULL,
    partition_id uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    traces       bigint NOT NULL,
    messages     bigint NOT NULL,
    last_seen    timestamptz NOT NULL,
    PRIMARY KEY (name, partition_id)
) WITH (fillfactor = 80);
CREATE INDEX trace_name_stats_partition ON queen.trace_name_stats (partition_id);
