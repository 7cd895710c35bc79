#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, night: cursors without a foreign key":
# two more pairs end to end at 5,000 and one at batch 10, nofk first; the
# builds of run.sh.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 3 4; do
  for T in nofk final; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
for T in nofk final; do
  run consume $T b10-3 --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
done
echo done $(date -u +%T)
