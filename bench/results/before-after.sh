#!/usr/bin/env bash
# Measures a change against the build before it, beside the reference, one
# server at a time (bench/runlib.sh): BASE is the revision before the change
# (built into /tmp/qg-base from a scratch worktree), the checkout's HEAD is
# /tmp/qg-new. Every scenario of the reference table runs ROUNDS times per
# build, the builds alternating, and once for the reference; then consume at
# batch 1 and push at batch 1, the costliest per message, four more times
# each. About 25 minutes. Then:
#
#   python3 bench/results/summarize.py $OUT > before-after.csv
#
#   BASE=0d83222 OUT=/tmp/ba bash bench/results/before-after.sh
set -eu
: "${BASE:?set BASE to the revision before the change}"
OUT=${OUT:-/tmp/before-after}
ROUNDS=${ROUNDS:-2}
ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
WT=$(mktemp -d)
git -C "$ROOT" worktree add -q --detach "$WT/base" "$BASE"
go -C "$WT/base" build -o /tmp/qg-base ./cmd/queengo
git -C "$ROOT" worktree remove --force "$WT/base"
go -C "$ROOT" build -o /tmp/qg-new ./cmd/queengo
go -C "$ROOT/bench" build -o /tmp/bench .
mkdir -p "$OUT"
set +e
. "$ROOT/bench/runlib.sh"
for RUN in $(seq "$ROUNDS"); do
  for T in base new ref; do
    [ "$RUN" -gt 1 ] && [ $T = ref ] && continue
    if [ $T = ref ]; then M1=50000 M10=150000 M100=300000; else M1=100000 M10=500000 M100=1200000; fi
    for b in 1 10 100; do run push $T b$b-$RUN --connections 50 --batch $b --partitions 10 --duration 10s; done
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages $M1 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages $M10 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages $M100 --duration 20s
  done
done
for RUN in 1 2 3 4; do
  for T in base new; do
    run consume $T b1-p10-x$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run push $T b1-x$RUN --connections 50 --batch 1 --partitions 10 --duration 10s
  done
done
echo done "$(date -u +%T)"
