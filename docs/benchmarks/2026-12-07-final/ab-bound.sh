#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, final": b08ee77 (/tmp/qg-bound; a timer
# per pop bounds its wait) against 94e71cc (/tmp/qg-final), consume at batch
# 1 with 50 consumers on 100 partitions (the most pops per second), three
# alternating pairs, 20 s each.
#   git checkout b08ee77 && go build -o /tmp/qg-bound ./cmd/queengo
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do for T in final bound; do
  run consume $T pb1p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
done; done
