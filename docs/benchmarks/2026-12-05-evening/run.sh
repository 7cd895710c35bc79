#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-05, evening": the build before this session's
# cross-process and supervision changes (base) beside the one after (new),
# alternating, two rounds, one server at a time on a fresh database each.
# The builds were
#   git checkout e5ad6ed && go build -o /tmp/qg-base ./cmd/queengo
#   git checkout <new> && go build -o /tmp/qg-new ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  for T in base new; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run push $T b1-$RUN --connections 50 --batch 1 --partitions 10 --duration 10s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
