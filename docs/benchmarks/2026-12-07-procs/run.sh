#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: the broker on one processor": the
# same build with GOMAXPROCS unset (head: 2 on this machine) and with
# GOMAXPROCS=1 (g1), alternating, three rounds, each run on a fresh database
# and a fresh server. The builds were
#   git checkout d466d3a && go build -o /tmp/qg-head ./cmd/queengo && go build -o /tmp/bench ./bench
#   printf '#!/bin/sh\nGOMAXPROCS=1 exec /tmp/qg-head "$@"\n' > /tmp/qg-g1 && chmod +x /tmp/qg-g1
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  if [ $((RUN % 2)) = 1 ]; then TS="head g1"; else TS="g1 head"; fi
  for T in $TS; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 1200000 --duration 20s
    run push $T b1-$RUN --connections 50 --batch 1 --partitions 10 --duration 10s
    run e2e $T r5000-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
