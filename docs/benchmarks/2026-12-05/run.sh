#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-05: the final build of issue 9 beside the
# reference": every aim of issue 9, three runs of queengo (final) and one of
# the reference Queen server (ref), one server at a time, each on a fresh
# database with track_functions=pl (each run's pg_stat_user_functions and
# transaction count are in the .pgstat beside its JSON). The build was
#   git checkout 657b5d9 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# (657b5d9 changes only bench/ against bfe9d11, the broker of 2026-12-04.)
# OUT, when set, is the folder the results go to (2026-12-05-final/run.sh).
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
for RUN in 1 2 3; do
  for T in final ref; do
    [ $RUN -gt 1 ] && [ $T = ref ] && continue
    if [ $T = ref ]; then M1=50000 M10=150000 M100=300000; else M1=100000 M10=500000 M100=1200000; fi
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages $M1 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages $((M1 * 3 / 2)) --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages $M10 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages $M100 --duration 20s
    for b in 1 10 100; do run push $T b$b-$RUN --connections 50 --batch $b --partitions 10 --duration 10s; done
  done
  run e2e final r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  run e2e final r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done
for r in 2000 10000; do run e2e final r$r-b1-pp0-1 --rate $r --batch 1 --pop-partitions 0 --duration 15s; done
run e2e final r40000-b10-pp0-1 --rate 40000 --batch 10 --pop-partitions 0 --duration 15s
for r in 2000 5000; do run e2e ref r$r-b1-1 --rate $r --batch 1 --duration 15s; done
echo done $(date -u +%T)
