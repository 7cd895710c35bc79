#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, final", the trial not kept: a commit that
# carries a claim round answers its pushers at its own commit. The
# end-to-end aims of issue 9 on the final build (fuse, c09471d: the write and
# the claims in one transaction) and the trial's first form (split: the
# write commits on its own ahead of the claims, in the same round trip, its
# pushers are answered then, and the queue's next commit may start),
# alternating, one server at a time, each on a fresh database. The builds were
#   git checkout c09471d && go build -o /tmp/qg-fuse ./cmd/queengo && go build -o /tmp/bench ./bench
#   git apply split.patch, less its actors/queue.go hunks but the one that passes
#   !m.carried to committed, && go build -o /tmp/qg-split ./cmd/queengo
# The second form (trial2/run.sh) is split.patch whole.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in fuse split; do
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
for T in fuse split; do
  run e2e $T r10000-b1-pp0-1 --rate 10000 --batch 1 --pop-partitions 0 --duration 15s
  run e2e $T r40000-b10-pp0-1 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
done
echo done $(date -u +%T)
