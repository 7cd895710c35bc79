#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday: single-partition rounds without
# claim_read": consumers pinned to partitions (`--pin`) and the wildcard
# route, the round without claim_read (`direct`) against 0104b62 (`wake`),
# alternating. The builds were
#   git checkout 0104b62 && go build -o /tmp/qg-wake ./cmd/queengo
#   git checkout e6fa131 && go build -o /tmp/qg-direct ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
pin10() { run consume $1 pin-b1-p10-$2 --pin --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
pin100() { run consume $1 pin-b1-p100-$2 --pin --batch 1 --consumers 100 --partitions 100 --messages 150000 --duration 20s; }
pinb10() { run consume $1 pin-b10-p10-$2 --pin --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s; }
wild10() { run consume $1 b1-p10-$2 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
pin10 direct 1; pin10 wake 1; pin10 wake 2; pin10 direct 2
pin100 direct 1; pin100 wake 1
pinb10 wake 1; pinb10 direct 1
wild10 direct 1; wild10 wake 1
wild10 wake 2; wild10 direct 2; wild10 direct 3; wild10 wake 3
echo done $(date -u +%T)
