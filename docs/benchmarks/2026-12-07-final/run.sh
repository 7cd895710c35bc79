#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, final": every aim of issue 9 on the
# session's final build (94e71cc: dead letters that stop resolving after a
# group delete or a seek back, lost claims' leases ended; the claim path as
# in "2026-12-07, closing"), three runs of queengo (final) and one of the
# reference Queen server (ref), one server at a time, each on a fresh
# database with track_functions=pl. The build was
#   git checkout 94e71cc && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
