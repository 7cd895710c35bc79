#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07, midday: single-partition rounds without
# claim_read": what one wildcard claim_take call (p_pool NULL) costs inside
# PostgreSQL with claim_take of 0104b62 (wake) and of this commit (direct),
# through pgbench as in 2026-12-07-night/take.sh (its set-up and SQL files),
# the functions swapped by starting each build on the database (which
# applies its sql/functions), alternating, 2,000 transactions each.
# Builds as in ab.sh; take-setup.sh starts /tmp/qg-new.
OUT=$(cd "$(dirname "$0")" && pwd)
NIGHT=$OUT/../2026-12-07-night
DB=ctd
cp /tmp/qg-wake /tmp/qg-new
. "$NIGHT/take-setup.sh"
apply() { # T: start /tmp/qg-T on $DB until it answers, so its functions are in place
  DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB PORT=6653 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$1 >/dev/null 2>&1 & local P=$!
  for i in $(seq 100); do curl -sf http://127.0.0.1:6653/health >/dev/null && break; sleep 0.2; done
  kill $P; wait $P 2>/dev/null
}
for T in wake direct direct wake wake direct; do
  apply $T
  for f in take1 take3; do
    echo "$T $f $(pgbench -h 127.0.0.1 -U postgres -n -M prepared -t 2000 -f $NIGHT/$f.sql $DB 2>&1 | grep 'latency average')"
  done
done | tee $OUT/take.txt
$PSQL -c "drop database $DB"
