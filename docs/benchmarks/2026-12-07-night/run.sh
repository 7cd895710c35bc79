#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, night": three trials against the head
# (0f8a55d; for the last pairs 8b8ac5c, the same claim path), alternating
# pairs, one server at a time on a fresh database (bench/runlib.sh), none
# kept. The builds:
#   git checkout 0f8a55d && go build -o /tmp/qg-head ./cmd/queengo && go build -o /tmp/bench ./bench
#   git apply docs/benchmarks/2026-12-07-night/async-acks.patch && go build -o /tmp/qg-exp ./cmd/queengo
#   git checkout -- . && git apply docs/benchmarks/2026-12-07-night/round-slack.patch && go build -o /tmp/qg-slack ./cmd/queengo
#   git checkout -- . && git apply docs/benchmarks/2026-12-07-night/ones.patch && go build -o /tmp/qg-ones ./cmd/queengo
# async-acks.patch commits acks (coalesced and handed off) with
# synchronous_commit=off when QG_EXP_ASYNC is set: /tmp/qg-expa sets it.
# The results of the first two head runs of the batch-1 async pairs were
# overwritten by the slack pairs' (now b1p10s); their figures are in
# docs/benchmarks.md as the run printed them.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
printf '#!/bin/sh\nQG_EXP_ASYNC=1 exec /tmp/qg-exp "$@"\n' > /tmp/qg-expa && chmod +x /tmp/qg-expa
pairs() { # A B N KIND NAME args...
  local A=$1 Bn=$2 N=$3 K=$4 NAME=$5 R T; shift 5
  for R in $(seq $N); do for T in $A $Bn; do run $K $T $NAME-$R "$@"; done; done
}
pairs head expa 3 consume b1p10 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
pairs head expa 3 consume b10 --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
for i in 1 2; do for b in 1 10 100; do run push head pb$b-$i --connections 50 --batch $b --partitions 10 --duration 10s; done; done
pairs head slack 3 consume b1p100 --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
pairs head slack 2 consume b1p10s --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
pairs slack head 3 consume b1p100r --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
for i in 1 2; do run e2e head r5k-$i --rate 5000 --batch 1 --pop-partitions 0 --duration 15s; done
pairs head ones 3 consume ob1p10 --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
