-- 004: message tombstones (D10). DELETE /api/v1/messages/:partitionId/:transactionId
-- cannot cut a frame out of its segment: it records the offset here instead.
-- A tombstoned offset is resolved for every consumer group: a claim leases it
-- along without delivering it (and a span that holds nothing else just moves
-- the cursor), and the figures of the resource routes count it as done. The
-- table is empty unless an operator deletes messages, so the claim's probe
-- of it is one descent of an empty index. The foreign key removes the rows
-- with their partition (a queue delete, idle-partition cleanup); a queue
-- clear removes them with the segments.
CREATE TABLE queen.tombstones (
    partition_id uuid NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    "offset"     bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, "offset")
);
