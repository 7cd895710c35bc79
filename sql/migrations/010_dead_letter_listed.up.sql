-- 010: removing a dead letter (DLQ delete or requeue, message retry) must not
-- unresolve its offset (D5): past its group's committed offset, the row can
-- be the only record that the offset is resolved (a lease that ended on a
-- failure keeps only its resolved prefix). Such a removal hides the row
-- (listed false, its frame dropped) instead of deleting it; the DLQ views
-- list only listed rows, and every resolve check reads them all
-- (queen.remove_dead_letters).
ALTER TABLE queen.dead_letters ADD COLUMN IF NOT EXISTS listed boolean NOT NULL DEFAULT true;
