#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning: kept goroutines", third set:
# consume at batch 1 with 10 partitions, e89d0ab (`warm2`) against 9ddeedf
# (`head`), three alternating pairs, the order flipped in every pair.
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for RUN in 4 5 6; do
  if [ $((RUN % 2)) = 0 ]; then ORDER="warm2 head"; else ORDER="head warm2"; fi
  for T in $ORDER; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  done
done
echo done $(date -u +%T)
