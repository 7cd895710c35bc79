#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, evening": two more pairs of the path the
# change leaves alone (pops of the wildcard route, batch 1, 10 partitions),
# pinned first this time; the builds of run.sh.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 3 4; do
  for T in pinned base; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  done
done
echo done $(date -u +%T)
