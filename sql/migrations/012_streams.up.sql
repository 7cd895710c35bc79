-- 012: streams (issue 42, docs/api.md "Streams"). The schema and table
-- names are the reference server's (queen_streams.queries, .state): the
-- SDKs' own test suites clean up with DELETE FROM queen_streams.queries.
--
-- queries is the registry, one row per named query; consumer_group is the
-- group its last acking cycle used, so that deleting that group can wipe the
-- state built from it (docs/retention.md "Streams").
--
-- state rows are keyed (partition_id, query_id, key), partition_id first:
-- the source partition a cycle holds the lease of. A Citus layout
-- distributes the table by partition_id, colocated with the other
-- per-partition tables; queries stays small (a reference table there).
-- Deleting the source queue deletes its partitions and so their state
-- (ON DELETE CASCADE); deleting a query deletes its state.
CREATE SCHEMA IF NOT EXISTS queen_streams;

CREATE TABLE queen_streams.queries (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name           text NOT NULL UNIQUE,
    source_queue   text NOT NULL,
    sink_queue     text,
    config_hash    text NOT NULL,
    consumer_group text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queries_source_queue ON queen_streams.queries (source_queue);

CREATE TABLE queen_streams.state (
    partition_id uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    query_id     uuid NOT NULL REFERENCES queen_streams.queries (id) ON DELETE CASCADE,
    key          text NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, query_id, key)
);
-- A query's reset and delete find its rows without a scan.
CREATE INDEX state_query ON queen_streams.state (query_id);
