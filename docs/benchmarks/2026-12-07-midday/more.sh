#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday, final": after run.sh, batch 10
# with enough messages that it does not drain in the 20 s (twice), and
# consumers pinned to partitions (`--pin`, the single-partition route) at
# batch 1, three runs of queengo and one of the reference. OUT, when set, is
# the folder the results go to (2026-12-07-midday2/run.sh).
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do run consume final b10-steady-$RUN --batch 10 --consumers 10 --partitions 10 --messages 800000 --duration 20s; done
for RUN in 1 2 3; do run consume final pin-b1-p10-$RUN --pin --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; done
run consume ref pin-b1-p10-1 --pin --batch 1 --consumers 50 --partitions 10 --messages 50000 --duration 20s
echo done $(date -u +%T)
