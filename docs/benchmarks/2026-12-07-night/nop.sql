BEGIN;
SELECT count(*) FROM (select array_agg(id) from queen.queues) a, (select array_agg(id) from queen.partitions) b;
ROLLBACK;
