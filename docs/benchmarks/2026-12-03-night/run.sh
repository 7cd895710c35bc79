#!/usr/bin/env bash
# The night's measurement (docs/benchmarks.md, "2026-12-03, night"): the
# reference (ref), main at c74cbd6 (base) and main at c4cac4e (final), one
# server at a time, each on a fresh database. The builds were
#   git checkout c74cbd6 && go build -o /tmp/qg-base ./cmd/queengo
#   git checkout c4cac4e && go build -o /tmp/qg-final ./cmd/queengo
#   go build -o /tmp/bench ./bench
OUT=/work/main/docs/benchmarks/2026-12-03-night
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
consume() { # T NAME args...
  local T=$1 N=$2; shift 2; local DB=night_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) consume $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B consume --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --json $OUT/consume-$N-$T-$RUN.json "$@" >/dev/null 2>&1
  stop $DB
}
e2e() { # T NAME args...
  local T=$1 N=$2; shift 2; local DB=night_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) e2e $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B e2e --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --duration 15s --json $OUT/e2e-$N-$T.json "$@" >/dev/null 2>&1
  stop $DB
}
push() {
  local T=$1 N=$2; shift 2; local DB=night_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) push $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  $B push --url $URL --label $(label $T) --pg-url $PG/$DB --interval 100s --json $OUT/push-$N-$T-$RUN.json "$@" >/dev/null 2>&1
  stop $DB
}
for RUN in 1 2 3; do
  for T in final base ref; do
    [ $RUN -gt 1 ] && [ $T = ref ] && continue
    consume $T b1-p10 --batch 1 --consumers 50 --partitions 10 --messages 50000 --duration 20s
    consume $T b1-p100 --batch 1 --consumers 50 --partitions 100 --messages 50000 --duration 20s
    consume $T b10 --batch 10 --consumers 10 --partitions 10 --messages 100000 --duration 30s
    consume $T b100 --batch 100 --consumers 4 --partitions 10 --messages 200000 --duration 30s
  done
done
RUN=1
for T in final base; do for b in 1 10 100; do push $T b$b --connections 50 --batch $b --partitions 10 --duration 10s; done; done
for pp in 1 0; do
  for r in 2000 5000 10000; do e2e final r$r-b1-pp$pp --rate $r --batch 1 --pop-partitions $pp; done
  for r in 20000 40000; do e2e final r$r-b10-pp$pp --rate $r --batch 10 --pop-partitions $pp; done
done
for r in 2000 5000; do e2e ref r$r-b1 --rate $r --batch 1; done
echo done $(date -u +%T)
