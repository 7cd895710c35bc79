#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, closing": every aim of issue 9 on the
# session's final build (be2ba83: "late" plus abandoned pops' leases ended
# and no registry message for a queue outside every scope), three runs of
# queengo (final) and one of the reference Queen server (ref), one server at
# a time, each on a fresh database with track_functions=pl. The build was
#   git checkout be2ba83 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
