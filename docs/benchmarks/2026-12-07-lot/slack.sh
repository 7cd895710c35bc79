#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition", second part: keys due within recheckSlack of one that is due
# re-check with it. 2,000 polls pinned to 2,000 partitions held 30 s, idle
# and with 2,000 msg/s pushed over them, the lot build (7ad3530) against the
# slack build, alternating. Builds:
#   git checkout 7ad3530 && go build -o /tmp/qg-lot ./cmd/queengo
#   git checkout <this commit> && go build -o /tmp/qg-slack ./cmd/queengo && go build -o /tmp/bench ./bench
D=$(cd "$(dirname "$0")" && pwd); OUT=$D/slack
mkdir -p $OUT
. $D/../../../bench/runlib.sh
for i in 1 2; do
  for T in lot slack; do
    run idle $T pin2000-$i --polls 2000 --partitions 2000 --duration 30s --poll-timeout 30s
    run idle $T pin2000-r2000-$i --polls 2000 --partitions 2000 --push-rate 2000 --duration 30s --poll-timeout 30s
  done
done
echo done $(date -u +%T)
