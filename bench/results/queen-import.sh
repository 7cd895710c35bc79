#!/usr/bin/env bash
# Reproduces the 1M and 10M rows of "Importing a Queen database" in
# docs/performance.md: a Queen database in the reference server's own schema
# (its run.sh creates it on a fresh database), filled with SQL (queue
# bench.small: 10 partitions of 100,000 messages; bench.big: 10 of 900,000;
# pushes of 100 messages sharing created_at, 100-byte payloads like bench's;
# per partition a group half way with a live lease, queue mode a quarter of
# the way, a group never moved; 100 dead letters, 10,000 traces, push
# maintenance on), then `queengo import queen` of bench.small alone (1M) and
# of everything (10M) into fresh databases, each under /usr/bin/time -v (peak
# RSS). Filling takes about 8 minutes, the 10M import about 6, and 15 GB of
# disk; the databases are dropped at the end.
#
#   go build -o /tmp/qg-import ./cmd/queengo
#   OUT=/tmp/queen-import bash bench/results/queen-import.sh
#
# SMALL and BIG (100000 and 900000) are the messages per partition of the
# two queues.
set -eu
OUT=${OUT:-/tmp/queen-import}
mkdir -p "$OUT"
PG=postgres://postgres@127.0.0.1:5432
REF=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../shared/reference" && pwd)/run.sh
SRC=queen_import_src
psql "$PG/postgres" -qc "drop database if exists $SRC" -c "create database $SRC"
# The reference creates its schema at start; small pools, then stop it.
SIDECAR_POOL_SIZE=2 DB_POOL_SIZE=3 NUM_WORKERS=1 FILE_BUFFER_DIR=$OUT/refbuf env -u OUT "$REF" 6749 $SRC >"$OUT/ref.log" 2>&1 &
RP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6749/health >/dev/null && break; sleep 0.2; done
kill $RP; wait $RP || true
S="psql $PG/$SRC -q -v ON_ERROR_STOP=1"
fill() { # QUEUE PER-PARTITION
  $S -v q="$1" <<'SQL'
INSERT INTO queen.queues (name) VALUES (:'q');
INSERT INTO queen.partitions (queue_id, name)
SELECT q.id, 'p' || g FROM queen.queues q, generate_series(0, 9) g WHERE q.name = :'q';
SQL
  for p in 0 1 2 3 4 5 6 7 8 9; do
    $S -v q="$1" -v part=p$p -v per="$2" <<'SQL'
SET synchronous_commit = off;
INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload, created_at)
SELECT gen_random_uuid(), :'q' || '-' || p.name || '-' || i, NULL, p.id,
       jsonb_build_object('ts', 1733150000000000000 + i, 'seq', i, 'pad', repeat('x', 48)),
       timestamptz '2026-12-01 00:00:00+00' + (i / 100) * interval '1 millisecond'
  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id, generate_series(1, :per) i
 WHERE q.name = :'q' AND p.name = :'part';
SQL
  done
}
fill bench.small "${SMALL:-100000}"
fill bench.big "${BIG:-900000}"
$S <<'SQL'
INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id, last_consumed_created_at,
    total_messages_consumed, last_consumed_at, worker_id, lease_expires_at, lease_acquired_at, batch_size)
SELECT p.id, g.name, m.id, m.created_at, g.n, now(),
       CASE WHEN g.name = 'half' THEN 'lease-' || p.name END,
       CASE WHEN g.name = 'half' THEN now() + interval '1 hour' END,
       CASE WHEN g.name = 'half' THEN now() END, CASE WHEN g.name = 'half' THEN 100 ELSE 0 END
  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
  CROSS JOIN LATERAL (SELECT count(*) AS total FROM queen.messages x WHERE x.partition_id = p.id) c
  CROSS JOIN LATERAL (VALUES ('half', c.total / 2), ('__QUEUE_MODE__', c.total / 4)) AS g(name, n)
  JOIN queen.messages m ON m.partition_id = p.id AND m.transaction_id = q.name || '-' || p.name || '-' || g.n;
INSERT INTO queen.partition_consumers (partition_id, consumer_group) SELECT p.id, 'fresh' FROM queen.partitions p;
INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message, retry_count, original_created_at)
SELECT m.id, m.partition_id, 'half', 'failed ' || i, 3, m.created_at
  FROM generate_series(10, 109) i
  JOIN queen.partitions p ON p.name = 'p0' JOIN queen.queues q ON q.id = p.queue_id AND q.name = 'bench.big'
  JOIN queen.messages m ON m.partition_id = p.id AND m.transaction_id = 'bench.big-p0-' || i;
WITH t AS (
  INSERT INTO queen.message_traces (message_id, partition_id, transaction_id, consumer_group, event_type, data, worker_id)
  SELECT m.id, m.partition_id, m.transaction_id, 'half', 'processing', jsonb_build_object('step', i), '0'
    FROM generate_series(1, 10000) i
    JOIN queen.partitions p ON p.name = 'p1' JOIN queen.queues q ON q.id = p.queue_id AND q.name = 'bench.big'
    JOIN queen.messages m ON m.partition_id = p.id AND m.transaction_id = 'bench.big-p1-' || i
  RETURNING id, (data->>'step')::int AS i)
INSERT INTO queen.message_trace_names (trace_id, trace_name) SELECT id, 'name-' || (i % 100) FROM t;
INSERT INTO queen.system_state (key, value) VALUES ('maintenance_mode', '{"enabled": true}')
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
ANALYZE;
SQL
imp() { # NAME ARGS...: an import into a fresh database, timed
  local N=$1; shift
  psql "$PG/postgres" -qc "drop database if exists queen_import_$N" -c "create database queen_import_$N"
  echo "$(date -u +%T) import $N load=$(cut -d' ' -f1 /proc/loadavg)" | tee "$OUT/$N.load"
  DATABASE_URL=$PG/queen_import_$N /usr/bin/time -v /tmp/qg-import import queen --from "$PG/$SRC" "$@" \
    >"$OUT/$N.out" 2>"$OUT/$N.err" || echo "exit $?" >>"$OUT/$N.out"
  grep -E "^imported|Maximum resident|Elapsed" "$OUT/$N.out" "$OUT/$N.err"
  grep "messages: done" "$OUT/$N.err"
  psql "$PG/postgres" -qc "drop database queen_import_$N"
}
imp 1m --queues bench.small
imp 10m
psql "$PG/postgres" -qc "drop database $SRC"
