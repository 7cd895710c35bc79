#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: the broker on one processor", the
# other aims: run.sh's builds (head, g1), alternating, three rounds.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  if [ $((RUN % 2)) = 1 ]; then TS="g1 head"; else TS="head g1"; fi
  for T in $TS; do
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run push $T b10-$RUN --connections 50 --batch 10 --partitions 10 --duration 10s
    run push $T b100-$RUN --connections 50 --batch 100 --partitions 10 --duration 10s
    run e2e $T r20000-b10-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
