#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, late midday": every aim of issue 9 once
# more on the session's final code (2205bc8: the build of "midday, final"
# plus a wake's bound on the partitions it matches), half an hour later on a
# faster hour, as in ../2026-12-07-midday (the scenarios of
# 2026-12-05/run.sh, then more.sh there). The build was
#   git checkout 2205bc8 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D bash "$D/../2026-12-05/run.sh"
OUT=$D bash "$D/../2026-12-07-midday/more.sh"
