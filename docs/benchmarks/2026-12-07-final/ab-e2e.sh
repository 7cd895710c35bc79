#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, final": end to end at 20,000 msg/s
# (pushes of 10, pops uncapped in partitions), the final build (94e71cc,
# /tmp/qg-final) against the head before the session (0f8a55d, /tmp/qg-prev:
# git checkout 0f8a55d && go build -o /tmp/qg-prev ./cmd/queengo), right
# after run.sh: three alternating pairs in each order, 15 s each.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do for T in prev final; do
  run e2e $T r20k-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
for RUN in 1 2 3; do for T in final prev; do
  run e2e $T r20kb-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
