#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday: wakes that reach only their
# partition's pops": three consumer groups over the same data at batch 1,
# the targeted wakes (`wake`) against 2e91571 (`heap`), alternating; builds
# as in ab.sh.
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
g3() { run consume $1 g3-b1-p10-$2 --groups 3 --batch 1 --consumers 20 --partitions 10 --messages 50000 --duration 20s; }
# (pairs 1-2 ran first; pairs 3-4 were added after them and ran on their own)
g3 wake 1; g3 heap 1; g3 heap 2; g3 wake 2
g3 wake 3; g3 heap 3; g3 heap 4; g3 wake 4
echo done $(date -u +%T)
