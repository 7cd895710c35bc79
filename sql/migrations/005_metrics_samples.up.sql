-- 005: the metrics collector's history (actors/collector.go). Every
-- METRICS_SAMPLE_INTERVAL_MS each broker process writes one process row
-- (queue_id NULL: its CPU, memory, pool, request counters and parked pops),
-- and one process per tick (the holder of an advisory lock) writes one row
-- per queue with the database-wide figures of that queue (idle queues
-- skipped) and one row of every queue together. Figures are
-- cumulative counters and gauges in a jsonb object; rates are deltas between
-- consecutive rows of one queue (or one instance). Rows older than
-- METRICS_RETENTION_DAYS are deleted in bounded batches by the collector.
-- No foreign key: a deleted queue's history ages out with the rest, and an
-- insert of a tick's rows needs no key share on the queue rows.
CREATE TABLE queen.metrics_samples (
    sampled_at timestamptz NOT NULL,
    instance   text NOT NULL,
    queue_id   uuid,
    figures    jsonb NOT NULL
);
-- The retention delete, oldest first.
CREATE INDEX metrics_samples_sampled_at ON queen.metrics_samples (sampled_at);
-- A queue's series, and the series of every queue together (the rows of
-- queue id ffffffff-ffff-ffff-ffff-ffffffffffff, one a tick).
CREATE INDEX metrics_samples_queue ON queen.metrics_samples (queue_id, sampled_at) WHERE queue_id IS NOT NULL;
-- The process series, without walking the queue rows of the window.
CREATE INDEX metrics_samples_process ON queen.metrics_samples (sampled_at) WHERE queue_id IS NULL;
