#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06": the end-to-end table's other rates on
# the build with the change (fuse, 3ae1efa; built as run.sh says), one run
# each, pops uncapped in partitions.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for r in 2000 10000; do run e2e fuse r$r-b1-pp0-1 --rate $r --batch 1 --pop-partitions 0 --duration 15s; done
run e2e fuse r40000-b10-pp0-1 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
# Then the build before (base, 18a3773) at 10,000 and 40,000 (twice), and
# the change again at 40,000, alternating.
run e2e base r10000-b1-pp0-1 --rate 10000 --batch 1 --pop-partitions 0 --duration 15s
run e2e base r40000-b10-pp0-1 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
run e2e fuse r40000-b10-pp0-2 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
run e2e base r40000-b10-pp0-2 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
echo done $(date -u +%T)
# The trial not kept (trials/): commitRound's condition "no pop pending or
# parked" made "no pop parked" (a.pops.lot.empty() alone), built as
# /tmp/qg-fuse2, then with OUT=trials:
#   run e2e fuse2 r40000-b10-pp0-N --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
#   run e2e fuse2 r5000-b1-pp0-N --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
# alternating, N = 1, 2.
