# setup.sh: sourced by append.sh and ack.sh. A database $DB migrated by
# /tmp/qg-new, with one queue "q" of 100 partitions (one message each).
PSQL="psql -h 127.0.0.1 -U postgres -q"
$PSQL -c "drop database if exists $DB" -c "create database $DB" >/dev/null
# The broker migrates the database; one push per partition creates them.
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB PORT=6653 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-new >/dev/null 2>&1 & SP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6653/health >/dev/null && break; sleep 0.2; done
for p in $(seq 0 99); do
  curl -sf -XPOST http://127.0.0.1:6653/api/v1/push -H 'content-type: application/json' \
    -d "{\"items\":[{\"queue\":\"q\",\"partition\":\"p$p\",\"payload\":{\"a\":1}}]}" >/dev/null
done
kill $SP; wait $SP 2>/dev/null
