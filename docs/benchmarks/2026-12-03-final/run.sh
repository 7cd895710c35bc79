#!/usr/bin/env bash
# The final build's measurement (docs/benchmarks.md, "2026-12-03, late"):
# the reference (ref) and main with the ack offsets (final), one server at a
# time, each on a fresh database, the night run's commands. The builds were
#   go build -o /tmp/qg-final ./cmd/queengo
#   go build -o /tmp/bench ./bench
OUT=/work/main/docs/benchmarks/2026-12-03-final
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
label() { [ $1 = ref ] && echo queen-cpp || echo queengo-$1; }
run() { # KIND T NAME args...
  local K=$1 T=$2 N=$3; shift 3; local DB=final_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) $K $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B $K --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --json $OUT/$K-$N-$T.json "$@" >/dev/null 2>&1
  stop $DB
}
for RUN in 1 2 3; do
  for T in final ref; do
    [ $RUN -gt 1 ] && [ $T = ref ] && continue
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 50000 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 50000 --duration 20s
    run consume $T b10-$RUN --batch 10 --consumers 10 --partitions 10 --messages 100000 --duration 30s
    run consume $T b100-$RUN --batch 100 --consumers 4 --partitions 10 --messages 200000 --duration 30s
    for b in 1 10 100; do run push $T b$b-$RUN --connections 50 --batch $b --partitions 10 --duration 10s; done
  done
done
for r in 2000 5000 10000; do run e2e final r$r-b1-pp0 --rate $r --batch 1 --pop-partitions 0 --duration 15s; done
for r in 20000 40000; do run e2e final r$r-b10-pp0 --rate $r --batch 10 --pop-partitions 0 --duration 15s; done
for r in 2000 5000; do run e2e ref r$r-b1 --rate $r --batch 1 --duration 15s; done
echo done $(date -u +%T)
