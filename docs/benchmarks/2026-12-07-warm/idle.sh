#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning: kept goroutines": 10,000 parked
# long polls for 60 s, e89d0ab (`warm2`) against 9ddeedf (`head`), two
# alternating pairs; runlib samples /health every second.
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for T in warm2 head; do run idle $T 1 --polls 10000 --duration 60s; done
for T in head warm2; do run idle $T 2 --polls 10000 --duration 60s; done
echo done $(date -u +%T)
