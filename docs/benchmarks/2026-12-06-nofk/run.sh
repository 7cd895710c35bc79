#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, night: cursors without a foreign key":
# base = 154b6bd (/tmp/qg-final), nofk = the same with migration 008,
# alternating, two pairs per scenario, one server at a time, each on a fresh
# database with track_functions=pl. The builds:
#   git checkout 154b6bd && go build -o /tmp/qg-final ./cmd/queengo
#   git checkout <008's commit> && go build -o /tmp/qg-nofk ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  for T in final nofk; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
