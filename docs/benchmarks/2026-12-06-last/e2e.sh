#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, last": more pairs of head and nocr end to
# end, right after run.sh (same builds), nocr first in each pair this time.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 4 5 6; do
  for T in nocr head; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
for RUN in 1 2; do
  for T in nocr head; do
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
