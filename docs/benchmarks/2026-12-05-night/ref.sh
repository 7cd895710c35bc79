#!/usr/bin/env bash
# The reference's runs of run.sh again, right after it: in run.sh the
# reference never started (bench/runlib.sh passed OUT on to the reference's
# run.sh, which reads it as its own folder; fixed in the same commit).
OUT=$(cd "$(dirname "$0")" && pwd)
. $OUT/../../../bench/runlib.sh
T=ref M1=50000 M10=150000 M100=300000
run consume $T b1-p10-1 --batch 1 --consumers 50 --partitions 10 --messages $M1 --duration 20s
run consume $T b1-p100-1 --batch 1 --consumers 50 --partitions 100 --messages $((M1 * 3 / 2)) --duration 20s
run consume $T b10-1 --batch 10 --consumers 10 --partitions 10 --messages $M10 --duration 20s
run consume $T b100-1 --batch 100 --consumers 4 --partitions 10 --messages $M100 --duration 20s
for b in 1 10 100; do run push $T b$b-1 --connections 50 --batch $b --partitions 10 --duration 10s; done
for r in 2000 5000; do run e2e ref r$r-b1-1 --rate $r --batch 1 --duration 15s; done
echo done $(date -u +%T)
