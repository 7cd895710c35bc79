#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning, final": where the end-to-end
# pipeline stops keeping up on the session's final build, one run per
# offered rate around the knee. The build was
#   git checkout <the commit that added this script> && go build -o /tmp/qg-final2 ./cmd/queengo
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
for r in 15000 20000; do run e2e final2 r$r-b1-pp0-1 --rate $r --batch 1 --pop-partitions 0 --duration 15s; done
for r in 40000 60000; do run e2e final2 r$r-b10-pp0-1 --rate $r --batch 10 --pop-partitions 0 --duration 15s; done
echo done $(date -u +%T)
