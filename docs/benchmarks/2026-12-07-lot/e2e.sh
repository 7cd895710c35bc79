#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition": the end-to-end aims' scenarios, head (0f1b968) against the
# builds of this section, alternating. e2e/final: against 1e1bb1f (the lot
# and the slack; built as /tmp/qg-final), 5,000 msg/s batch 1 three pairs
# head first, 20,000 batch 10 two pairs final first then three head first.
# e2e/trim: against the commit that trims superseded entries off the lot's
# heaps (/tmp/qg-trim), 20,000 four pairs head first, 5,000 three pairs trim
# first.
D=$(cd "$(dirname "$0")" && pwd)
. $D/../../../bench/runlib.sh
OUT=$D/e2e/final
for i in 1 2 3; do for T in head final; do
  run e2e $T r5000-b1-pp0-$i --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
done; done
for i in 1 2; do for T in final head; do
  run e2e $T r20000-b10-pp0-$i --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
for i in 3 4 5; do for T in head final; do
  run e2e $T r20000-b10-pp0-$i --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
OUT=$D/e2e/trim
for i in 1 2 3 4; do for T in head trim; do
  run e2e $T r20000-b10-pp0-$i --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done; done
for i in 1 2 3; do for T in trim head; do
  run e2e $T r5000-b1-pp0-$i --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
done; done
