#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, later morning": consume at batch 10 with
# enough messages (800,000) that the run does not drain within its 20 s, so
# its rate has no drain's tail in it; two runs, the build of run.sh.
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  run consume final b10-steady-$RUN --batch 10 --consumers 10 --partitions 10 --messages 800000 --duration 20s
done
echo done $(date -u +%T)
