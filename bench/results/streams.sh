#!/usr/bin/env bash
# streams.sh: the streams scenario (issue 42) against queengo and the
# reference Queen server in one run, each on a fresh database; the reference
# is ../shared/reference/run.sh beside the repository. Run from the
# repository root after
#   go build -o /tmp/qg-streams ./cmd/queengo && go -C bench build -o /tmp/bench .
# Prints the table and the ratio line; N (3) runs, OUT (/tmp/streams) gets the JSON.
set -euo pipefail
N=${N:-3}; OUT=${OUT:-/tmp/streams}; mkdir -p "$OUT"
PG=postgres://postgres@127.0.0.1:5432
REF=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../shared/reference" && pwd)/run.sh
psql -h 127.0.0.1 -U postgres -qc "drop database if exists streams_qg" -c "create database streams_qg" \
  -c "drop database if exists streams_ref" -c "create database streams_ref" >/dev/null
DATABASE_URL=$PG/streams_qg PORT=6640 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-streams >"$OUT/qg.log" 2>&1 & QP=$!
env -u OUT "$REF" 6633 streams_ref >"$OUT/ref.log" 2>&1 & RP=$!
trap 'kill $QP $RP 2>/dev/null; wait $QP $RP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database if exists streams_qg" -c "drop database if exists streams_ref" >/dev/null' EXIT
for u in 6640 6633; do for i in $(seq 100); do curl -sf http://127.0.0.1:$u/health >/dev/null && break; sleep 0.2; done; done
for i in $(seq "$N"); do
  /tmp/bench streams --events 10000 --partitions 10 --batch 100 --url http://127.0.0.1:6640 \
    --ref-url http://127.0.0.1:6633 --no-pg --interval 100s --json "$OUT/streams-$i.json" | tail -6
done
