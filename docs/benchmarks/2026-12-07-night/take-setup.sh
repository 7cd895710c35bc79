# take-setup.sh: sourced by take.sh. A database $DB migrated by /tmp/qg-new: queue q, 10 partitions of 2,000 messages in segments of 40, queue-mode cursors at 0.
PSQL="psql -h 127.0.0.1 -U postgres -q"
$PSQL -c "drop database if exists $DB" -c "create database $DB" >/dev/null
DATABASE_URL=postgres://postgres@127.0.0.1:5432/$DB PORT=6653 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-new >/dev/null 2>&1 & SP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6653/health >/dev/null && break; sleep 0.2; done
python3 - <<'PY'
import json, urllib.request
for k in range(50):
    for p in range(10):
        items=[{"queue":"q","partition":f"p{p}","payload":{"orderId":k*40+i,"pad":"x"*60}} for i in range(40)]
        r=urllib.request.Request("http://127.0.0.1:6653/api/v1/push",data=json.dumps({"items":items}).encode(),headers={"content-type":"application/json"})
        urllib.request.urlopen(r).read()
PY
kill $SP; wait $SP 2>/dev/null
$PSQL -d $DB -c "insert into queen.cursors (partition_id, consumer_group, committed) select id, '__QUEUE_MODE__', 0 from queen.partitions on conflict do nothing" -c "vacuum analyze"
