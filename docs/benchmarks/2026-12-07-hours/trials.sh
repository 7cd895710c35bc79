#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, later afternoon: what the hour decides":
# two trials against the head (d17bef9, built as /tmp/qg-head), each a build
# with one line changed, alternating, one server at a time (bench/runlib.sh).
#   cm1: actors/pacer.go concurrentCommitMin = 1 (500 as built): a second
#        segment commit starts beside the one in flight whatever it carries;
#        the end-to-end aim at 5,000 msg/s (12:35-12:37 UTC);
#   c2:  actors/broker.go ClaimsInFlight default 2 (1 as built), consume at
#        batch 1 with 100 partitions (12:38-12:41 UTC).
D=$(cd "$(dirname "$0")" && pwd)
. $D/../../../bench/runlib.sh
OUT=$D/cm
for i in 1 2 3; do for T in head cm1; do
  run e2e $T r5000-b1-pp0-$i --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
done; done
OUT=$D/c2
for i in 1 2 3; do for T in head c2; do
  run consume $T b1-p100-$i --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
done; done
