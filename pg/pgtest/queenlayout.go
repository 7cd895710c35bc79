package pgtest

// QueenLayout creates, in an empty database, the tables of a reference
// Queen server that `queengo import queen` reads, as the reference lays
// them out (schema queen; the columns, their types, NULLs and defaults,
// the keys and the (partition, created_at, id) order index it reads
// messages by), so tests can fill a Queen database without running the
// reference. Written from a database the reference server made (psql's
// \d), not from its schema file; the tables the import does not read
// (statistics, lookups, watermarks) are left out.
const QueenLayout = `
CREATE SCHEMA queen;

CREATE TABLE queen.queues (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name varchar(255) NOT NULL UNIQUE,
    namespace varchar(255),
    task varchar(255),
    priority integer DEFAULT 0,
    lease_time integer DEFAULT 300,
    retry_limit integer DEFAULT 3,
    retry_delay integer DEFAULT 1000,
    ttl integer DEFAULT 3600,
    dead_letter_queue boolean DEFAULT false,
    dlq_after_max_retries boolean DEFAULT false,
    delayed_processing integer DEFAULT 0,
    window_buffer integer DEFAULT 0,
    retention_seconds integer DEFAULT 0,
    completed_retention_seconds integer DEFAULT 0,
    retention_enabled boolean DEFAULT false,
    encryption_enabled boolean DEFAULT false,
    max_wait_time_seconds integer DEFAULT 0,
    max_queue_size integer DEFAULT 0,
    created_at timestamptz DEFAULT now()
);

CREATE TABLE queen.partitions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    queue_id uuid REFERENCES queen.queues (id) ON DELETE CASCADE,
    name varchar(255) NOT NULL DEFAULT 'Default',
    created_at timestamptz DEFAULT now(),
    last_activity timestamptz DEFAULT now(),
    UNIQUE (queue_id, name)
);

-- One row per message; delivery order is (created_at, id).
CREATE TABLE queen.messages (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    transaction_id varchar(255) NOT NULL,
    trace_id uuid DEFAULT gen_random_uuid(),
    partition_id uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    payload jsonb NOT NULL,
    created_at timestamptz DEFAULT now(),
    is_encrypted boolean DEFAULT false,
    producer_sub text
);
CREATE INDEX ON queen.messages (partition_id, created_at, id);
CREATE UNIQUE INDEX ON queen.messages (partition_id, transaction_id);

-- A group's place: the last consumed (created_at, id); the nil id with a
-- NULL time means it consumed nothing yet. worker_id and lease_expires_at
-- are its lease.
CREATE TABLE queen.partition_consumers (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    partition_id uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group varchar(255) DEFAULT '__QUEUE_MODE__',
    last_consumed_id uuid DEFAULT '00000000-0000-0000-0000-000000000000',
    last_consumed_created_at timestamptz,
    total_messages_consumed bigint DEFAULT 0,
    total_batches_consumed bigint DEFAULT 0,
    last_consumed_at timestamptz,
    lease_expires_at timestamptz,
    lease_acquired_at timestamptz,
    message_batch jsonb,
    batch_size integer DEFAULT 0,
    acked_count integer DEFAULT 0,
    worker_id varchar(255),
    pending_estimate bigint DEFAULT 0,
    last_stats_update timestamptz,
    batch_retry_count integer DEFAULT 0,
    created_at timestamptz DEFAULT now(),
    UNIQUE (partition_id, consumer_group),
    CHECK ((last_consumed_id = '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NULL)
        OR (last_consumed_id <> '00000000-0000-0000-0000-000000000000' AND last_consumed_created_at IS NOT NULL))
);

-- Durable subscriptions, by queue name; partition_name '' is queue-wide.
CREATE TABLE queen.consumer_groups_metadata (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    consumer_group text NOT NULL,
    queue_name text NOT NULL DEFAULT '',
    partition_name text NOT NULL DEFAULT '',
    namespace text NOT NULL DEFAULT '',
    task text NOT NULL DEFAULT '',
    subscription_mode text NOT NULL,
    subscription_timestamp timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (consumer_group, queue_name, partition_name, namespace, task)
);

CREATE TABLE queen.dead_letter_queue (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id uuid REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    consumer_group varchar(255),
    error_message text,
    retry_count integer DEFAULT 0,
    original_created_at timestamptz,
    failed_at timestamptz DEFAULT now()
);

CREATE TABLE queen.message_traces (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    message_id uuid REFERENCES queen.messages (id) ON DELETE CASCADE,
    partition_id uuid REFERENCES queen.partitions (id) ON DELETE CASCADE,
    transaction_id varchar(255) NOT NULL,
    consumer_group varchar(255),
    event_type varchar(100),
    data jsonb NOT NULL,
    created_at timestamptz DEFAULT now(),
    worker_id varchar(255)
);

CREATE TABLE queen.message_trace_names (
    trace_id uuid NOT NULL REFERENCES queen.message_traces (id) ON DELETE CASCADE,
    trace_name text NOT NULL,
    PRIMARY KEY (trace_id, trace_name)
);

CREATE TABLE queen.system_state (
    key text PRIMARY KEY,
    value jsonb NOT NULL,
    updated_at timestamptz DEFAULT now()
);
`
