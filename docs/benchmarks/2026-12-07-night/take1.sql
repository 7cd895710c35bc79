BEGIN;
SELECT count(*), sum(length(frames)) FROM queen.claim_take((select array_agg(id) from queen.queues), '__QUEUE_MODE__', false, (select array_agg(id) from queen.partitions), NULL, '{1}', '{10}', '{0}', '{0}', '{f}', ARRAY[gen_random_uuid()], false);
ROLLBACK;
