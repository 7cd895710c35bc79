#!/usr/bin/env bash
# The span path's measurement (docs/benchmarks.md, "2026-12-04, evening"):
# main before it (main, 682505f) and with it (spans), alternating, one server
# at a time, each on a fresh database with track_functions=pl; the reference
# (ref) once at batch 10 and 100. The builds were
#   git checkout 682505f && go build -o /tmp/qg-main ./cmd/queengo
#   git checkout 4e9ef9b && go build -o /tmp/qg-spans ./cmd/queengo
#   go build -o /tmp/bench ./bench
OUT=/work/main/docs/benchmarks/2026-12-04-spans
PG=postgres://postgres@127.0.0.1:5432
B=/tmp/bench
server() { # T DB -> sets URL, SP
  local T=$1 DB=$2
  psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB" -c "create database $DB" \
    -c "alter database $DB set track_functions='pl'" >/dev/null 2>&1
  if [ $T = ref ]; then
    /work/shared/reference/run.sh 6633 $DB >/tmp/ref-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6633
  else
    DATABASE_URL="$PG/$DB" PORT=6640 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$T >/tmp/qg-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6640
  fi
  for i in $(seq 100); do curl -sf $URL/health >/dev/null && break; sleep 0.2; done
  sleep 1
}
stop() { # DB NAME: the per-function figures, then the server and the database go
  psql -h 127.0.0.1 -U postgres -d $1 -Atc "select funcname, calls, round(self_time::numeric, 1)
    from pg_stat_user_functions where funcname in ('claim_take', 'claim_read', 'ack', 'ack_items', 'ack_spans', 'append_segments')" \
    -c "select 'xacts', xact_commit + xact_rollback from pg_stat_database where datname = '$1'" > $OUT/$2.pgstat 2>&1
  kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database if exists $1" >/dev/null 2>&1
}
label() { [ $1 = ref ] && echo queen-cpp || echo queengo-$1; }
run() { # KIND T NAME args...
  local K=$1 T=$2 N=$3; shift 3; local DB=spans_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) $K $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B $K --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --json $OUT/$K-$N-$T.json "$@" >/dev/null 2>&1
  stop $DB $K-$N-$T
}
run consume ref b10-1 --batch 10 --consumers 10 --partitions 10 --messages 150000 --duration 20s
run consume ref b100-1 --batch 100 --consumers 4 --partitions 10 --messages 300000 --duration 20s
for RUN in 1 2 3; do
  for T in main spans; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 500000 --duration 20s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 1200000 --duration 20s
    [ $RUN = 3 ] && continue
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
for T in main spans; do
  run e2e $T r20000-b10-pp0-1 --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
done
echo done $(date -u +%T)
# Then two more pairs at 20,000 msg/s, whose first pair disagreed.
for RUN in 2 3; do
  for T in main spans; do
    run e2e $T r20000-b10-pp0-$RUN --rate 20000 --batch 10 --pop-partitions 0 --duration 15s
  done
done
