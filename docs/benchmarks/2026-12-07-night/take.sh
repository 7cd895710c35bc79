#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, night": what one claim_take call costs
# inside PostgreSQL, through pgbench: a take of one pop (take1.sql) and of
# three (take3.sql), batch 10 each, out of 10 partitions of segments of 40,
# in a transaction that rolls back, against the same transaction without
# the take (nop.sql); 2,000 transactions each, twice.
#   git checkout 0f8a55d && go build -o /tmp/qg-new ./cmd/queengo
# While it ran: perf record -a -g -- sleep 5, then
#   perf report --comm postgres --children --sort symbol -g none
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
DB=ct
. "$OUT/take-setup.sh"
for f in nop take1 take3 take1 take3; do
  echo "$f $(pgbench -h 127.0.0.1 -U postgres -n -M prepared -t 2000 -f $OUT/$f.sql $DB 2>&1 | grep 'latency average')"
done | tee $OUT/take.txt
$PSQL -c "drop database $DB"
