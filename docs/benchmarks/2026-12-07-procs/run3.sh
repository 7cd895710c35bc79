#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: the broker on one Go processor",
# end to end at 10,000 msg/s one message per push (500 producers), where
# the aims run fell behind on one processor: run.sh's builds (head, g1),
# alternating, three rounds.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  if [ $((RUN % 2)) = 1 ]; then TS="g1 head"; else TS="head g1"; fi
  for T in $TS; do
    run e2e $T r10000-b1-$RUN --rate 10000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
