#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: the broker on one Go processor":
# the wake-up of one parked long poll (two alternating pairs) with run.sh's
# builds (head, g1); then 10,000 parked long polls for 60 s, one run each:
# round 2 with head and g1, round 3 with new = a build of 522ddba whose
# hang-up watcher yielded (runtime.Gosched) after every 256 peeks (not
# kept), and g1; round 4 with new = 522ddba plus the watcher's pauses
# (the commit after it), and head. runlib samples idle every second.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  if [ $RUN = 1 ]; then TS="g1 head"; else TS="head g1"; fi
  for T in $TS; do run wake $T $RUN --count 500; done
done
for T in g1 head; do run idle $T 2 --polls 10000 --duration 60s; done
# go build -o /tmp/qg-new ./cmd/queengo with the Gosched variant:
for T in new g1; do run idle $T 3 --polls 10000 --duration 60s; done
# go build -o /tmp/qg-new ./cmd/queengo with the pauses:
for T in new head; do run idle $T 4 --polls 10000 --duration 60s; done
echo done $(date -u +%T)
