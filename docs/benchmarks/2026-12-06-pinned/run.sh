#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, evening: the single-partition route's
# pops share one claim_take": base = 3c038fa (one claim_take per such pop),
# pinned = 87706e8 (one per group and round), alternating, two pairs per
# scenario, one server at a time, each on a fresh database with
# track_functions=pl (pg_stat_user_functions and transactions in the .pgstat
# beside each JSON); then the reference Queen server (ref) once per pinned
# scenario. The builds:
#   git checkout 3c038fa && go build -o /tmp/qg-base ./cmd/queengo
#   git checkout 87706e8 && go build -o /tmp/qg-pinned ./cmd/queengo
#   git checkout 1ae7b1b && go build -o /tmp/bench ./bench   (consume --pin)
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2; do
  for T in base pinned; do
    run consume $T pin-b1-p10-$RUN --pin --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T pin-b1-p100-$RUN --pin --batch 1 --consumers 100 --partitions 100 --messages 150000 --duration 20s
    run consume $T pin-b10-p10-$RUN --pin --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  done
done
run consume ref pin-b1-p10-1 --pin --batch 1 --consumers 50 --partitions 10 --messages 50000 --duration 20s
run consume ref pin-b1-p100-1 --pin --batch 1 --consumers 100 --partitions 100 --messages 75000 --duration 20s
run consume ref pin-b10-p10-1 --pin --batch 10 --consumers 10 --partitions 10 --messages 150000 --duration 20s
echo done $(date -u +%T)
