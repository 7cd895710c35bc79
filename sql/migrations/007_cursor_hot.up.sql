-- 007: cursor updates PostgreSQL can make HOT (heap-only tuples). Every claim
-- and every ack that ends a lease changes lease_id, and cursors_lease_id
-- indexed it, so no such update was HOT: each wrote new entries in every
-- cursor index. Consuming at batch 1 wrote 810 bytes of WAL per message with
-- the index and 398 without (docs/performance.md "The dated record"). Lease extension, the
-- index's only reader, finds a lease's cursors from the broker's hints or by
-- a scan (queen.extend_leases). A fillfactor of 70 leaves room on each page
-- for the new row versions a HOT update needs there.
DROP INDEX IF EXISTS queen.cursors_lease_id;
ALTER TABLE queen.cursors SET (fillfactor = 70);
