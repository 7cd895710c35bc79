#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, last: three knobs, tried again": head =
# be2ba83, each variant the same with one change, alternating pairs, one
# server at a time, each on a fresh database. The builds:
#   go build -o /tmp/qg-head ./cmd/queengo && go build -o /tmp/bench ./bench
#   nocr: actors/queue.go commitRound returns nil first (no commit carries a claim round)
#   ac10: actors/acks.go ackConcurrentMin = 10 (a second ack commit beside one in flight from 10 items, not 100)
#   cm200: actors/pacer.go concurrentCommitMin = 200 (a second segment commit from 200 waiting messages, not 500)
# each built with go build -o /tmp/qg-<name> ./cmd/queengo, then the change undone.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in head nocr; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
  for T in head cm200; do
    run push $T b10-$RUN --connections 50 --batch 10 --partitions 10 --duration 10s
  done
done
for RUN in 1 2; do
  for T in head ac10; do
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
  done
  run consume head b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
done
echo done $(date -u +%T)
