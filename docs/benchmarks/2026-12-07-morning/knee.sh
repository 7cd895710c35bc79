#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning": where the end-to-end pipeline
# stops keeping up on that hour, right after run.sh, with the same build: one
# run per offered rate past the ones run.sh measures.
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for r in 15000 20000; do run e2e final r$r-b1-pp0-1 --rate $r --batch 1 --pop-partitions 0 --duration 15s; done
for r in 60000 80000; do run e2e final r$r-b10-pp0-1 --rate $r --batch 10 --pop-partitions 0 --duration 15s; done
echo done $(date -u +%T)
