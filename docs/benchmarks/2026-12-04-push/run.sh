#!/usr/bin/env bash
# Push beside the reference (docs/benchmarks.md, "2026-12-04, late: push"):
# per batch size queengo, the reference, queengo again, one server at a time,
# each on a fresh database. The build was
#   git checkout 7303a8d && go build -o /tmp/qg-cur ./cmd/queengo && go build -o /tmp/bench ./bench
OUT=/work/main/docs/benchmarks/2026-12-04-push
PG=postgres://postgres@127.0.0.1:5432
B=/tmp/bench
server() { # T DB -> sets URL, SP
  local T=$1 DB=$2
  psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB" -c "create database $DB" >/dev/null 2>&1
  if [ $T = ref ]; then
    /work/shared/reference/run.sh 6633 $DB >/tmp/ref-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6633
  else
    DATABASE_URL="$PG/$DB" PORT=6640 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$T >/tmp/qg-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6640
  fi
  for i in $(seq 100); do curl -sf $URL/health >/dev/null && break; sleep 0.2; done
  sleep 1
}
stop() { kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database if exists $1" >/dev/null 2>&1; }
label() { [ $1 = ref ] && echo queen-cpp || echo queengo; }
run() { # T NAME args...
  local T=$1 N=$2; shift 2; local DB=push_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) push $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B push --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --json $OUT/push-$N-$T.json "$@" >/dev/null 2>&1
  stop $DB
}
for BATCH in 1 10 100; do
  run cur b$BATCH-1 --connections 50 --batch $BATCH --partitions 10 --duration 10s
  run ref b$BATCH-1 --connections 50 --batch $BATCH --partitions 10 --duration 10s
  run cur b$BATCH-2 --connections 50 --batch $BATCH --partitions 10 --duration 10s
done
echo done $(date -u +%T)
