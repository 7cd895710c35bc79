#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, final", the trial not kept, second form
# (split2: as ../run.sh's split, but the queue's next commit waits for the
# round to come back, as before, so the commits keep carrying rounds):
#   git checkout c09471d && git apply ../split.patch && go build -o /tmp/qg-split2 ./cmd/queengo
# /tmp/qg-fuse is c09471d. Alternating, one server at a time, each on a fresh database.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in fuse split2; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
for RUN in 1 2; do
  for T in fuse split2; do
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
