#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06: a commit carries the claim round of its
# parked pops": the end-to-end aims of issue 9, and the consume and push
# scenarios the change must leave alone, on the build before (base, 18a3773)
# and the build with it (fuse, 3ae1efa), alternating, one server at a time,
# each on a fresh database. The builds were
#   git checkout 18a3773 && go build -o /tmp/qg-base ./cmd/queengo
#   git checkout 3ae1efa && go build -o /tmp/qg-fuse ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in base fuse; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
for T in base fuse; do
  run consume $T b1-p10-1 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  run push $T b1-1 --connections 50 --batch 1 --partitions 10 --duration 10s
done
echo done $(date -u +%T)
