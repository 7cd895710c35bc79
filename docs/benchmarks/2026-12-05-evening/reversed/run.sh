#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-05, evening": ../run.sh's e2e and push pairs
# again with the new build first in each pair, to tell the order of the runs
# from the build (the same /tmp/qg-base and /tmp/qg-new).
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../../bench/runlib.sh
for RUN in 1 2; do
  for T in new base; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
    run push $T b1-$RUN --connections 50 --batch 1 --partitions 10 --duration 10s
  done
done
