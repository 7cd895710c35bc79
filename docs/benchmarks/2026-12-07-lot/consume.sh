#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition": consume at batch 1, 50 consumers, 10 partitions, wildcard and
# pinned (--pin), head against lot (builds as in ab.sh), alternating: three
# pairs each head first (consume/ab2), then four pinned pairs lot first
# (consume/ab3). The head runs ran as T=h (label queengo-h), the build of
# 0f1b968 under another name.
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D/consume/ab2; . $D/../../../bench/runlib.sh
for i in 1 2 3; do for T in head lot; do
  run consume $T b1-p10-$i --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
  run consume $T pin-b1-p10-$i --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s --pin
done; done
OUT=$D/consume/ab3
for i in 1 2 3 4; do for T in lot head; do
  run consume $T pin-b1-p10-$i --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s --pin
done; done
