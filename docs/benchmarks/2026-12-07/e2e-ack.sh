#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07": end to end at 5,000 msg/s, the build with
# the new append_segments (prev = 42678bc) against the one that also has the
# new ack_spans (new), alternating pairs, new first.
#   git checkout 42678bc && go build -o /tmp/qg-prev ./cmd/queengo
#   git checkout <new> && go build -o /tmp/qg-new ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in new prev; do
    run e2e $T s5k-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
