#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition": consumers pinned to partitions, one long poll each, against
# the build before the change (head, 0f1b968) and with it (lot), alternating,
# one server at a time on a fresh database: 2,000 polls on 2,000 partitions
# held 30 s idle, and with 2,000 msg/s pushed over them (the polls ack what
# they get); then consume at batch 1 with 50 consumers on 10 partitions,
# wildcard and pinned, the routes of every benchmark before. Builds:
#   git checkout 0f1b968 && go build -o /tmp/qg-head ./cmd/queengo
#   git checkout <this commit> && go build -o /tmp/qg-lot ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for i in 1 2; do
  for T in head lot; do
    run idle $T pin2000-$i --polls 2000 --partitions 2000 --duration 30s --poll-timeout 30s
    run idle $T pin2000-r2000-$i --polls 2000 --partitions 2000 --push-rate 2000 --duration 30s --poll-timeout 30s
  done
done
echo done $(date -u +%T)
