#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-05, final: every aim again with the lighter
# harness": every aim of issue 9, three runs of queengo (final) and one of
# the reference Queen server (ref), one server at a time, each on a fresh
# database with track_functions=pl (each run's pg_stat_user_functions and
# transaction count are in the .pgstat beside its JSON). The build was
#   git checkout 17ccd90 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# (the harness reads answers with fastjson; the broker has the key table of 9a25483.)
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
