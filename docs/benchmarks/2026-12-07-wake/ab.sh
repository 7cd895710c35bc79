#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday: wakes that reach only their
# partition's pops": consumers pinned to partitions (`--pin`, the
# single-partition route) and the wildcard route at batch 1, the targeted
# wakes (`wake`) against the commit before them (`heap`, 2e91571),
# alternating. The builds were
#   git checkout 2e91571 && go build -o /tmp/qg-heap ./cmd/queengo
#   git checkout <the commit that added this script> && go build -o /tmp/qg-wake ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
pin10() { run consume $1 pin-b1-p10-$2 --pin --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
pin100() { run consume $1 pin-b1-p100-$2 --pin --batch 1 --consumers 100 --partitions 100 --messages 150000 --duration 20s; }
wild10() { run consume $1 b1-p10-$2 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
pin10 wake 1; pin10 heap 1; pin10 heap 2; pin10 wake 2
pin100 wake 1; pin100 heap 1
wild10 heap 1; wild10 wake 1; wild10 wake 2; wild10 heap 2
echo done $(date -u +%T)
