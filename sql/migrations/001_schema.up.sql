-- 001: the storage model of docs/storage.md: per partition an append-only log of
-- segments (many frames per row), a transaction-id index for dedupe and ack
-- resolution, and a cursor per (partition, consumer group) carrying the lease
-- on the span (committed, lease_end].
CREATE SCHEMA IF NOT EXISTS queen;

-- Column names are the reference server's: operators and tests query them.
-- The defaults are what an implicitly created queue gets (lease_time 60,
-- docs/pop-routes.md); configure writes every column explicitly.
CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                        text NOT NULL UNIQUE,
    namespace                   text NOT NULL DEFAULT '',
    task                        text NOT NULL DEFAULT '',
    priority                    integer NOT NULL DEFAULT 0,
    lease_time                  integer NOT NULL DEFAULT 60,
    retry_limit                 integer NOT NULL DEFAULT 3,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    ttl                         integer NOT NULL DEFAULT 3600,
    dead_letter_queue           boolean NOT NULL DEFAULT false,
    dlq_after_max_retries       boolean NOT NULL DEFAULT false,
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_enabled           boolean NOT NULL DEFAULT false,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
    max_queue_size              integer NOT NULL DEFAULT 0,
    min_pop_wait_time           integer NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queues_namespace_task ON queen.queues (namespace, task);

-- head is the last offset assigned (0: empty); offsets start at 1. The row is
-- the serialisation point for writers: append_segments locks it (FOR NO KEY
-- UPDATE, docs/storage.md "Lock order").
CREATE TABLE queen.partitions (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id      uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name          text NOT NULL,
    head          bigint NOT NULL DEFAULT 0,
    last_write_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
);

-- One row per committed write: frames first_offset..last_offset, encoded by
-- the broker (see pg/frames.go) and concatenated; ends[i] is the byte offset
-- just past frame i (1-based), so SQL can cut out single frames or a span
-- without parsing them. EXTERNAL storage: pglz would spend CPU on every insert
-- and every pop for little gain on small JSON frames, and uncompressed
-- out-of-line values let substring() fetch only the chunks a span needs
-- (docs/performance.md, "Other measurements").
CREATE TABLE queen.segments (
    partition_id uuid NOT NULL,
    first_offset bigint NOT NULL,
    last_offset  bigint NOT NULL,
    created_at   timestamptz NOT NULL,
    ends         integer[] NOT NULL,
    frames       bytea NOT NULL,
    PRIMARY KEY (partition_id, first_offset)
);
ALTER TABLE queen.segments ALTER COLUMN frames SET STORAGE EXTERNAL;

-- (partition, transactionId) -> offset: push dedupe (D8) and ack resolution.
-- COLLATE "C": the index is only ever probed for equality, and byte order
-- spares a locale comparison on every one of the per-message inserts.
CREATE TABLE queen.txids (
    partition_id   uuid NOT NULL,
    transaction_id text COLLATE "C" NOT NULL,
    "offset"       bigint NOT NULL,
    message_id     uuid NOT NULL,
    PRIMARY KEY (partition_id, transaction_id)
);

-- segments and txids are the per-message tables: a foreign key would run a
-- referential check for every inserted row, although append_segments holds
-- the partition row's lock anyway. The cascade is a statement trigger on
-- queen.partitions instead, so deleting a queue (or partition) still removes
-- all of its data. Its function is the one function a migration creates:
-- the trigger needs it; its current body, as every other function, is in
-- sql/functions (partitions.sql).
CREATE FUNCTION queen.drop_partition_data() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM queen.segments s USING gone g WHERE s.partition_id = g.id;
    DELETE FROM queen.txids x USING gone g WHERE x.partition_id = g.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER partitions_cascade AFTER DELETE ON queen.partitions
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION queen.drop_partition_data();

-- The cursor of a (partition, group). A live lease is lease_id IS NOT NULL
-- AND lease_expires_at > now(); its span is (committed, lease_end]. acked holds
-- resolved offsets inside the span beyond the contiguous prefix (D2).
CREATE TABLE queen.cursors (
    partition_id     uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group   text NOT NULL,
    committed        bigint NOT NULL,
    lease_id         uuid,
    lease_end        bigint,
    lease_expires_at timestamptz,
    acked            bigint[] NOT NULL DEFAULT '{}',
    not_before       timestamptz,
    total_consumed   bigint NOT NULL DEFAULT 0,
    last_consumed_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX cursors_lease_id ON queen.cursors (lease_id) WHERE lease_id IS NOT NULL;
CREATE INDEX cursors_group ON queen.cursors (consumer_group);

-- Durable subscriptions (D6): written by the first pop of a new group that
-- carries a mode or a time, or by POST /consumer-groups/:group/subscription.
-- from_ts NULL means "all" (oldest retained).
CREATE TABLE queen.subscriptions (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    mode           text NOT NULL,
    from_ts        timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- Per-offset redelivery telemetry (D4, D10): failed acks consume budget.
CREATE TABLE queen.attempts (
    partition_id   uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    "offset"       bigint NOT NULL,
    failures       integer NOT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, consumer_group, "offset")
);

-- Dead letters keep a copy of the frame (ids, payload) and of its segment's
-- time, so they outlive segment retention (D5).
CREATE TABLE queen.dead_letters (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition_id        uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group      text NOT NULL,
    "offset"            bigint NOT NULL,
    frame               bytea NOT NULL,
    error_message       text,
    retry_count         integer NOT NULL DEFAULT 0,
    original_created_at timestamptz NOT NULL,
    failed_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partition_id, consumer_group, "offset")
);
CREATE INDEX dead_letters_failed_at ON queen.dead_letters (failed_at DESC);

-- Process-wide switches shared by every broker process (D11).
CREATE TABLE queen.system_state (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
