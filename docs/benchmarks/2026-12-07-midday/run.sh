#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday, final": every aim of issue 9 on
# the session's final build (the deadline heap, the targeted wakes, the
# single-partition rounds without claim_read), three runs of queengo (final)
# and one of the reference (ref), one server at a time, each on a fresh
# database; then more.sh. The build was
#   git checkout e6fa131 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D bash "$D/../2026-12-05/run.sh"
bash "$D/more.sh"
