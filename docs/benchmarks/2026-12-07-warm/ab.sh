#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning: kept goroutines": the queue and
# scope actors' mailboxes and the claim rounds and commits on kept goroutines
# (actors/warm.go, `warm`) against the head before it (9ddeedf, `head`),
# three alternating pairs per scenario, the order flipped in every pair, one
# server at a time, each on a fresh database. The builds were
#   git checkout 9ddeedf && go build -o /tmp/qg-head ./cmd/queengo && go build -o /tmp/bench ./bench
#   git checkout <the commit of warm.go> && go build -o /tmp/qg-warm ./cmd/queengo
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  if [ $((RUN % 2)) = 1 ]; then ORDER="warm head"; else ORDER="head warm"; fi
  for T in $ORDER; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 1200000 --duration 20s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
