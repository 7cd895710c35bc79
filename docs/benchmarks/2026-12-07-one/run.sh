#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, early: every aim with the broker on one
# Go processor": every aim of issue 9 on d466d3a run with GOMAXPROCS=1 (the
# setting docs/operations.md recommends for a 2-core machine shared with
# PostgreSQL), three runs of queengo (final) and one of the reference Queen
# server (ref), one server at a time, each on a fresh database. The build was
#   git checkout d466d3a && go build -o /tmp/qg-head ./cmd/queengo && go build -o /tmp/bench ./bench
#   printf '#!/bin/sh\nGOMAXPROCS=1 exec /tmp/qg-head "$@"\n' > /tmp/qg-final && chmod +x /tmp/qg-final
# The scenarios and runs are those of 2026-12-05/run.sh, whose results go here.
OUT=$(cd "$(dirname "$0")" && pwd) exec bash "$(dirname "$0")/../2026-12-05/run.sh"
