#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-04, late": A/B of consume (prev = 935e76a,
# new = d44d650: ack_spans resolves a span that does not apply itself) and of
# push (old3 = e5745e4, the 2026-12-03 final build, against new), alternating,
# one server at a time, each on a fresh database (one.sh). The builds were
#   git checkout 935e76a && go build -o /tmp/qg-prev ./cmd/queengo
#   git checkout e5745e4 && go build -o /tmp/qg-old3 ./cmd/queengo
#   git checkout d44d650 && go build -o /tmp/qg-new ./cmd/queengo
#   go build -o /tmp/bench ./bench
# consume-ab.txt and push-ab.txt are what the loops printed (pg_stat_user_functions
# calls and self time in ms, transactions, the bench's summary line).
D=$(cd "$(dirname "$0")" && pwd)
export OUT=/tmp/prof; mkdir -p $OUT
for i in 1 2 3; do for T in prev new; do
  echo "== b1p10 $i $T"
  $D/one.sh $T consume --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  cp $OUT/$T-consume.json $D/b1p10-$i-$T.json
done; done
for i in 1 2; do for T in prev new; do
  echo "== b10 $i $T"
  $D/one.sh $T consume --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
  cp $OUT/$T-consume.json $D/b10-$i-$T.json
done; done
for b in 1 100; do for i in 1 2; do for T in old3 new; do
  echo "== push b$b $i $T"
  $D/one.sh $T push --connections 50 --batch $b --partitions 10 --duration 10s
  cp $OUT/$T-push.json $D/push-b$b-$i-$T.json
done; done; done
