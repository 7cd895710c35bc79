#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, afternoon: every aim on the final build":
# every aim of issue 9 on the session's final build (e3be762: the parking
# lot indexed by partition, re-checks that ride together, the next event
# trimmed of superseded entries), as in
# ../2026-12-07-midday2 (the scenarios of 2026-12-05/run.sh, then
# 2026-12-07-midday/more.sh). The build was
#   git checkout e3be762 && go build -o /tmp/qg-final ./cmd/queengo && go build -o /tmp/bench ./bench
D=$(cd "$(dirname "$0")" && pwd)
OUT=$D bash "$D/../2026-12-05/run.sh"
OUT=$D bash "$D/../2026-12-07-midday/more.sh"
