#!/usr/bin/env bash
# The script of ../run.sh as it ran on 1e1bb1f (the parking lot indexed by
# partition, re-checks that ride together; 11:17-11:35, a slow hour), from
# docs/benchmarks/2026-12-07-afternoon; its results were moved here when
# the final build became e3be762 (the next event trimmed of superseded
# entries). The build was
#   git checkout 1e1bb1f && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D bash "$D/../2026-12-05/run.sh"
OUT=$D bash "$D/../2026-12-07-midday/more.sh"
