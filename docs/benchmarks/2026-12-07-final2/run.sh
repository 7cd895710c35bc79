#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, morning, final": every aim of issue 9 once
# more on the session's final broker code (cc9325a; the hot path as in
# e89d0ab), an hour later, three runs of queengo (final) and one of the
# reference (ref), one server at a time, each on a fresh database. The build was
#   git checkout cc9325a && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
