#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-06, last": the broker reaching PostgreSQL over
# its Unix socket (sock) against TCP on 127.0.0.1 (head, as every other run
# here), the same build: cp /tmp/qg-head /tmp/qg-sock. Alternating pairs, one
# server at a time, each on a fresh database; the harness's own probes stay
# on TCP.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
. $OUT/../../../bench/runlib.sh
server() { # T DB -> sets URL, SP (runlib's, with sock's DATABASE_URL on the socket)
  local T=$1 DB=$2 U=$PG/$2
  psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB" -c "create database $DB" \
    -c "alter database $DB set track_functions='pl'" >/dev/null 2>&1
  [ $T = sock ] && U="postgres://postgres@/$DB?host=/var/run/postgresql"
  DATABASE_URL="$U" PORT=6640 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$T >/tmp/qg-$DB.log 2>&1 & SP=$!
  URL=http://127.0.0.1:6640
  for i in $(seq 100); do curl -sf $URL/health >/dev/null && break; sleep 0.2; done
  sleep 1
}
for RUN in 1 2 3; do
  for T in head sock; do
    run consume $T b1-p10-$RUN --batch 1 --consumers 50 --partitions 10 --messages 100000 --duration 20s
    run consume $T b1-p100-$RUN --batch 1 --consumers 50 --partitions 100 --messages 150000 --duration 20s
    run push $T b1-$RUN --connections 50 --batch 1 --partitions 10 --duration 10s
    run e2e $T r5000-b1-pp0-$RUN --rate 5000 --batch 1 --pop-partitions 0 --duration 15s
  done
done
echo done $(date -u +%T)
