#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, late midday": the final build (`final`,
# 2205bc8) against the same code with dc057dd's sql/functions/claim.sql
# (`oldsql`), consume at batch 1, alternating, three pairs. The builds were
#   git checkout 2205bc8 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
#   git checkout 2205bc8 && git checkout dc057dd -- sql/functions/claim.sql && go build -o /tmp/qg-oldsql ./cmd/queengo
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../../bench/runlib.sh
b1() { run consume $1 b1-p10-$2 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; }
b1 oldsql 1; b1 final 1; b1 final 2; b1 oldsql 2; b1 oldsql 3; b1 final 3
echo done $(date -u +%T)
