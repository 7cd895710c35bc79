#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, night": every aim of issue 9 again on the
# session's final head (154b6bd: the build of "evening, final" plus the cap on
# an actor's waiting pops), three runs of queengo (final) and one of the
# reference Queen server (ref), one server at a time, each on a fresh
# database with track_functions=pl. The build was
#   git checkout 154b6bd && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
