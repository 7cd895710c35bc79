#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07": queen.append_segments alone, as built at
# 83c9669 (old) and after (new), through pgbench: one commit's worth of items
# spread over the partitions of one queue, in a transaction that rolls back,
# 200 transactions per shape and version, alternating, three rounds. txids is
# vacuumed before each version's runs: the rolled-back inserts of the same
# transaction ids leave dead index entries that slow the duplicate probe.
#   git checkout <new> && go build -o /tmp/qg-new ./cmd/queengo
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
ROOT=$(cd "$OUT/../../.." && pwd)
DB=append_ab
. "$OUT/setup.sh"
# shape N P: N items of 100 bytes over P partitions, each partition's items together.
for s in "130 100" "400 100" "50 10" "500 10"; do
  set -- $s
  $PSQL -d $DB -c "create table args_$1_$2 as
    with parts as (select array_agg(id order by id) a from (select id from queen.partitions order by id limit $2) z),
         items as (select i, 1 + (i * 7919 % $2) as seg from generate_series(1, $1) i)
    select (select a from parts) parts, array_agg(seg order by seg, i) seg, array_agg('t$1-' || i order by seg, i) txids,
           array_agg(gen_random_uuid() order by seg, i) msgids,
           array_agg(decode(repeat('00', 100), 'hex') order by seg, i) frames from items"
  printf 'BEGIN;\nSELECT queen.append_segments(a.parts, a.seg, a.txids, a.msgids, a.frames) FROM args_%s_%s a;\nROLLBACK;\n' $1 $2 > /tmp/append_$1_$2.sql
done
git -C "$ROOT" show 83c9669:sql/functions/append.sql > /tmp/append-old.sql
cp "$ROOT/sql/functions/append.sql" /tmp/append-new.sql
for round in 1 2 3; do
  for v in old new; do
    $PSQL -d $DB -f /tmp/append-$v.sql -c "vacuum queen.txids"
    for s in 130_100 400_100 50_10 500_10; do
      echo "$round $v $s $(pgbench -h 127.0.0.1 -U postgres -n -M prepared -t 200 -f /tmp/append_$s.sql $DB 2>&1 | grep 'latency average')"
    done
  done
done | tee $OUT/append.txt
$PSQL -c "drop database $DB"
