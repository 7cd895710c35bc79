#!/bin/bash
# met.sh TAG KIND args: like ../2026-12-04-late/one.sh, plus the broker's metrics after the run into $OUT/TAG-KIND.metrics
# Used for the end-to-end breakdown in docs/benchmarks.md ("2026-12-05, night"):
#   OUT=/tmp/met bash met.sh final e2e --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
T=$1; K=$2; shift 2
PG=postgres://postgres@127.0.0.1:5432; DB=met_$RANDOM
psql -h 127.0.0.1 -U postgres -qc "create database $DB" -c "alter database $DB set track_functions='pl'" >/dev/null
DATABASE_URL="$PG/$DB" PORT=6651 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$T >$OUT/qg.log 2>&1 & SP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6651/health >/dev/null && break; sleep 0.2; done
/tmp/bench $K --url http://127.0.0.1:6651 --pg-url $PG/$DB --interval 100s --json $OUT/$T-$K.json "$@" > $OUT/$T-$K.out 2>&1
curl -s http://127.0.0.1:6651/metrics/prometheus | grep -E "^queengo_(claim|commit|ack_handoff)" > $OUT/$T-$K.metrics
psql -h 127.0.0.1 -U postgres -d $DB -Atc "select funcname, calls, round(self_time::numeric, 1) from pg_stat_user_functions order by self_time desc limit 6" -c "select 'xacts', xact_commit + xact_rollback from pg_stat_database where datname = '$DB'"
kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database $DB"
