#!/usr/bin/env bash
# one.sh TAG KIND args...: a fresh database with track_functions=pl, the broker /tmp/qg-TAG on port 6651
# (pprof on 6061; PROF=1 takes a 10 s CPU profile), the bench into $OUT/TAG-KIND.json; then the
# functions' calls and self time (ms) and the transactions, and the bench's summary.
T=$1; K=$2; shift 2
PG=postgres://postgres@127.0.0.1:5432; DB=prof_$RANDOM
psql -h 127.0.0.1 -U postgres -qc "create database $DB" -c "alter database $DB set track_functions='pl'" >/dev/null
DATABASE_URL="$PG/$DB" PORT=6651 FILE_BUFFER_DIR=off LOG_LEVEL=warn PPROF_ADDR=127.0.0.1:6061 /tmp/qg-$T >$OUT/qg.log 2>&1 & SP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6651/health >/dev/null && break; sleep 0.2; done
/tmp/bench $K --url http://127.0.0.1:6651 --pg-url $PG/$DB --interval 100s --json $OUT/$T-$K.json "$@" > $OUT/$T-$K.out 2>&1 &
BP=$!
if [ -n "$PROF" ]; then sleep ${PROFDELAY:-8}; curl -s -o $OUT/$T-$K.pprof "http://127.0.0.1:6061/debug/pprof/profile?seconds=10"; fi
wait $BP
psql -h 127.0.0.1 -U postgres -d $DB -Atc "select funcname, calls, round(self_time::numeric, 1) from pg_stat_user_functions order by self_time desc limit 8" -c "select 'xacts', xact_commit + xact_rollback from pg_stat_database where datname = '$DB'"
kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database $DB"
tail -5 $OUT/$T-$K.out
