#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: the broker on one Go processor":
# the wake-up of one parked long poll (two alternating pairs) and 10,000
# parked long polls (one run each) with run.sh's builds (head, g1).
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  if [ $RUN = 1 ]; then TS="g1 head"; else TS="head g1"; fi
  for T in $TS; do run wake $T $RUN --count 500; done
done
for T in g1 head; do run idle $T 1 --polls 10000 --duration 60s; done
echo done $(date -u +%T)
