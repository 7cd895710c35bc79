#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07": end to end at 5,000 msg/s (pushes of one)
# and 20,000 (pushes of ten), the build before the append_segments change
# (head = 83c9669) and after (new), alternating pairs, one server at a time,
# each on a fresh database.
#   git checkout 83c9669 && go build -o /tmp/qg-head ./cmd/queengo
#   git checkout <new> && go build -o /tmp/qg-new ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in new head; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
for RUN in 1 2 3; do
  for T in new head; do
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
