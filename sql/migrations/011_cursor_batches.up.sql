-- 011: batches_consumed counts the batches a (partition, group) consumed,
-- for /status/queues/:queue's cursor.batchesConsumed: the spans its claims
-- handed out that ended resolved (the last message acked or dead-lettered
-- ends the lease) or that were auto-acked. A constant default adds the
-- column without rewriting the table.
ALTER TABLE queen.cursors ADD COLUMN IF NOT EXISTS batches_consumed bigint NOT NULL DEFAULT 0;
