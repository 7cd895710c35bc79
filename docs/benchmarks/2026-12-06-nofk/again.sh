#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, night: cursors without a foreign key":
# three more pairs at batch 1, nofk first this time; the builds of run.sh.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 3 4 5; do
  for T in nofk final; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
  done
done
echo done $(date -u +%T)
