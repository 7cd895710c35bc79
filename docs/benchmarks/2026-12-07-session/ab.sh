#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, late midday": the wildcard route at the
# session's end (`final`, 2205bc8) against its start (`start`, dc057dd),
# alternating: consume at batch 1 (10 partitions) and 10, three pairs each;
# pairs 4-6 at batch 1 were added after the rest ran and ran on their own.
# The builds were
#   git checkout dc057dd && go build -o /tmp/qg-start ./cmd/queengo
#   git checkout 2205bc8 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
b1() { run consume $1 b1-p10-$2 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
b10() { run consume $1 b10-$2 --batch 10 --consumers 10 --partitions 10 --messages 800000 --duration 20s; }
b1 final 1; b1 start 1; b1 start 2; b1 final 2; b1 final 3; b1 start 3
b1 start 4; b1 final 4; b1 final 5; b1 start 5; b1 start 6; b1 final 6
b10 start 1; b10 final 1; b10 final 2; b10 start 2; b10 start 3; b10 final 3
echo done $(date -u +%T)
