#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition", tried and not kept: two claim rounds in flight per queue
# (Config.ClaimsInFlight 2) at consume batch 1, 10 partitions, three
# alternating pairs (10:29-10:32), results in claims2/. Builds:
#   git checkout 0f1b968 && go build -o /tmp/qg-head ./cmd/queengo   (ran as T=h)
#   the same with actors/broker.go's default cfg.ClaimsInFlight = 2 -> /tmp/qg-c2
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D/claims2; . $D/../../../bench/runlib.sh
for i in 1 2 3; do for T in head c2; do
  run consume $T b1-p10-$i --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
done; done
