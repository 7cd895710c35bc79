#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, closing": consume at batch 1 with 10
# partitions, the final build (bd7d12f, /tmp/qg-final) against 83c9669
# (/tmp/qg-head: git checkout 83c9669 && go build -o /tmp/qg-head ./cmd/queengo),
# three alternating pairs right after run.sh: does the new ack_spans cost the
# hand-off path anything?
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in final head; do
    run consume $T b1p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  done
done
