#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning: kept goroutines", second set:
# e89d0ab (`warm2`: ab.sh's `warm` plus the ack commits on kept goroutines)
# against 9ddeedf (`head`), three alternating pairs per scenario, the order
# flipped in every pair, nothing else running (ab.sh's first pair of batch 1
# with 100 partitions and of batch 10 shared the machine with a compile).
#   git checkout e89d0ab && go build -o /tmp/qg-warm2 ./cmd/queengo
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for RUN in 4 5 6; do
  if [ $((RUN % 2)) = 0 ]; then ORDER="warm2 head"; else ORDER="head warm2"; fi
  for T in $ORDER; do
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 1200000 --duration 20s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
