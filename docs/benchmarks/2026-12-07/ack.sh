#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07": queen.ack_spans alone, as built at
# 83c9669 (old) and after (new), through pgbench: an ack commit of 1, 5 and
# 48 spans, one message each, on as many cursors holding a live lease, in a
# transaction that rolls back; 600 transactions per shape and version,
# alternating, three rounds, cursors vacuumed before each version's runs.
#   git checkout <new> && go build -o /tmp/qg-new ./cmd/queengo
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
ROOT=$(cd "$OUT/../../.." && pwd)
DB=ack_ab
. "$OUT/setup.sh"
$PSQL -d $DB -c "insert into queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at)
  select id, '__QUEUE_MODE__', 0, gen_random_uuid(), 1, now() + interval '1 day' from queen.partitions"
for n in 1 5 48; do
  $PSQL -d $DB -c "create table spans_$n as
    select array_agg(c.partition_id order by c.partition_id) parts, array_agg(c.consumer_group order by c.partition_id) grps,
           array_agg(c.lease_id order by c.partition_id) leases, array_agg(1::bigint order by c.partition_id) firsts,
           array_agg(1::bigint order by c.partition_id) lasts, array_agg(t.transaction_id order by c.partition_id) txids
      from (select * from queen.cursors order by partition_id limit $n) c join queen.txids t on t.partition_id = c.partition_id"
  printf 'BEGIN;\nSELECT count(*) FROM spans_%s a, queen.ack_spans(a.parts, a.grps, a.leases, a.firsts, a.lasts, NULL, NULL, a.txids) x;\nROLLBACK;\n' $n > /tmp/ack_$n.sql
done
git -C "$ROOT" show 83c9669:sql/functions/ack.sql > /tmp/ack-old.sql
cp "$ROOT/sql/functions/ack.sql" /tmp/ack-new.sql
for round in 1 2 3; do
  for v in old new; do
    $PSQL -d $DB -f /tmp/ack-$v.sql -c "vacuum queen.cursors" 2>/dev/null
    for n in 1 5 48; do
      echo "$round $v $n $(pgbench -h 127.0.0.1 -U postgres -n -M prepared -t 600 -f /tmp/ack_$n.sql $DB 2>&1 | grep 'latency average')"
    done
  done
done | tee $OUT/ack.txt
$PSQL -c "drop database $DB"
