-- One claim_take under auto_explain (docs/benchmarks.md, "2026-12-05, night"), on a database a
-- broker filled with `bench push --batch 1 --partitions 100 --duration 2s --keep`, after
--   insert into queen.cursors(partition_id, consumer_group, committed)
--     select id, '__QUEUE_MODE__', head - 2 from queen.partitions;
\set QUIET on
select array_agg(p.id order by p.id) filter (where rn <= 15) as pool, (select array_agg(id) from queen.queues) as qs from (select id, row_number() over (order by id) rn from queen.partitions) p \gset
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_analyze = on;
SET auto_explain.log_timing = on;
SET auto_explain.log_level = notice;
SET client_min_messages = notice;
BEGIN;
select count(*), sum(length(frames)) from queen.claim_take(:'qs'::uuid[], '__QUEUE_MODE__', false, NULL, :'pool'::uuid[], array_fill(1, ARRAY[15]), ARRAY[100,100,100,100,100,100,100], ARRAY[0,0,0,0,0,0,0], ARRAY[0,0,0,0,0,0,0], ARRAY[false,false,false,false,false,false,false], ARRAY[gen_random_uuid(),gen_random_uuid(),gen_random_uuid(),gen_random_uuid(),gen_random_uuid(),gen_random_uuid(),gen_random_uuid()]);
ROLLBACK;
