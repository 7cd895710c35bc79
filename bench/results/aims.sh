#!/usr/bin/env bash
# Reproduces the tables "queengo beside the reference" and "Producers and
# consumers at once" of docs/performance.md (bench/results/2026-12-07-aims.csv
# was made by this script, then summarize.py):
#
#   go build -o /tmp/qg-final ./cmd/queengo && go -C bench build -o /tmp/bench .
#   OUT=/tmp/aims bash bench/results/aims.sh
#   python3 bench/results/summarize.py /tmp/aims > aims.csv
#
# Three runs of queengo (T=final, /tmp/qg-final) and one of the reference Queen
# server (T=ref, ../shared/reference/run.sh) per scenario, one server at a time,
# each on a fresh database (bench/runlib.sh). Takes about 20 minutes. Beside
# each JSON, a .pgstat holds the run's PostgreSQL function figures and a
# .metrics the broker's own claim, commit and ack counters.
OUT=${OUT:-/tmp/aims}
mkdir -p "$OUT"
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../runlib.sh"
for RUN in 1 2 3; do
  for T in final ref; do
    [ $RUN -gt 1 ] && [ $T = ref ] && continue
    # The reference is ten times slower: fewer messages keep its runs as long.
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
# Batch 10 with more messages than 20 s drain, and consumers pinned to partitions.
for RUN in 1 2; do run consume final b10-steady-$RUN --batch 10 --consumers 10 --partitions 10 --messages 800000 --duration 20s; done
for RUN in 1 2 3; do run consume final pin-b1-p10-$RUN --pin --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s; done
run consume ref pin-b1-p10-1 --pin --batch 1 --consumers 50 --partitions 10 --messages 50000 --duration 20s
echo done $(date -u +%T)
