#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-05", the three trials not kept: builds of 657b5d9
# with a line or a few changed, against it (final), alternating, with server/stop/run
# of bench/runlib.sh as ../run.sh (OUT: this folder):
#   c2:   actors/broker.go newBroker: cfg.ClaimsInFlight = 2 (two claim rounds in flight per queue)
#   noho: actors/broker.go handOff returns (nil, false, nil) first (acks never ride a claim round)
#   gap:  actors/queue.go run: no claim round starts sooner than $QG_ROUND_GAP after the
#         previous one started (the actor's timer starts it then); /tmp/qg-gap2 and
#         /tmp/qg-gap5 are `QG_ROUND_GAP=2ms|5ms exec /tmp/qg-gap "$@"`
#   go build -o /tmp/qg-c2 ./cmd/queengo; go build -o /tmp/qg-noho ./cmd/queengo; go build -o /tmp/qg-gap ./cmd/queengo
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../../bench/runlib.sh
for RUN in 1 2; do for T in final c2; do
  run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
  run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 1200000 --duration 20s
done; done
for RUN in 1 2 3; do for T in final noho; do
  run e2e $T r5000-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
done; done
for RUN in 1 2; do for T in final noho; do
  run e2e $T r20000-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
for RUN in 1 2; do for T in final gap2 gap5; do
  run e2e $T gap-r2000-$RUN --rate 2000 --batch 1 --pop-partitions 0 --duration 15s
  run e2e $T gap-r5000-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
done; done
