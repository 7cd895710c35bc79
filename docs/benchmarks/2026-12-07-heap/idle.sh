#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday: a deadline heap for parked pops":
# 10,000 parked long polls of one consumer group for 40 s, the parking lot
# with a deadline heap (`heap`) against dc057dd (`head`), alternating. Short
# long polls (2 s, re-parked when they expire: 5,000 expiries a second) show
# what one expiry costs; 30 s ones are the default. The builds were
#   git checkout dc057dd && go build -o /tmp/qg-head ./cmd/queengo
#   git checkout <the commit that added this script> && go build -o /tmp/qg-heap ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for T in heap head; do run idle $T t2-1 --polls 10000 --duration 40s --poll-timeout 2s; done
for T in head heap; do run idle $T t2-2 --polls 10000 --duration 40s --poll-timeout 2s; done
for T in heap head; do run idle $T t30-1 --polls 10000 --duration 40s; done
echo done $(date -u +%T)
