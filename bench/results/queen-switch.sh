#!/usr/bin/env bash
# Reproduces the timed switch-over of docs/operations.md ("Switching from
# Queen to queengo") and the real-reference row of "Importing a Queen
# database" in docs/performance.md. The reference Queen server (run.sh, small
# pools) gets the benchmark data set through its HTTP API (bench push: 1M
# messages over 10 partitions; bench consume: two queues part consumed by
# groups and by queue mode; a dead letter, two traces, a durable "new"
# subscription by curl); `queengo import queen` copies it into a fresh
# database under /usr/bin/time -v. Then the runbook, each step timed, with a
# live producer and consumer group on queue "orders" (queen-switch-flow.py)
# moving from the reference to queengo; at the end every seq the servers
# stored must have been consumed. About 10 minutes.
#
#   go build -o /tmp/qg-import ./cmd/queengo && go -C bench build -o /tmp/bench .
#   OUT=/tmp/queen-switch bash bench/results/queen-switch.sh
set -u
OUT=${OUT:-/tmp/queen-switch}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$OUT"; cd "$OUT"
REF=$HERE/../../../shared/reference/run.sh
FLOW="python3 $HERE/queen-switch-flow.py"
PG=postgres://postgres@127.0.0.1:5432
QU=http://127.0.0.1:6747; GU=http://127.0.0.1:6748
QDB=$PG/queen_switch_src
export QUEEN_ENCRYPTION_KEY=${QUEEN_ENCRYPTION_KEY:-$(openssl rand -hex 32)}
for d in queen_switch_src queen_switch_real queen_switch_cut; do
  psql "$PG/postgres" -qc "drop database if exists $d" -c "create database $d"
done
rm -rf refbuf qgbuf stop.* prod.log cons.log rb.log; mkdir -p refbuf qgbuf
SIDECAR_POOL_SIZE=8 DB_POOL_SIZE=5 NUM_WORKERS=2 FILE_BUFFER_DIR=$OUT/refbuf env -u OUT "$REF" 6747 queen_switch_src >ref.log 2>&1 &
RP=$!
for i in $(seq 100); do curl -sf $QU/health >/dev/null && break; sleep 0.2; done
B="--url $QU --label queen-cpp --no-pg --keep --quiet"
/tmp/bench push $B --connections 10 --batch 100 --partitions 10 --messages 1000000 --duration 10m >push.out 2>&1
/tmp/bench consume $B --messages 200000 --groups 2 --consumers 2 --batch 10 --partitions 10 --duration 8s >consume2.out 2>&1
/tmp/bench consume $B --messages 100000 --groups 1 --consumers 2 --batch 10 --partitions 10 --duration 5s >consume1.out 2>&1
Q=$(psql "$QDB" -Atc "select name from queen.queues where name like 'bench-push-%' order by name limit 1")
PID=$(psql "$QDB" -Atc "select p.id from queen.partitions p join queen.queues q on q.id = p.queue_id where q.name = '$Q' and p.name = 'p0'")
j() { curl -s "$QU/api/v1/$1" -H 'Content-Type: application/json' ${2:+-d "$2"}; }
popack() { # GROUP STATUS: pop one message of p0 and ack it with STATUS
  local m; m=$(j "pop/queue/$Q/partition/p0?consumerGroup=$1&batch=1")
  j ack "$(echo "$m" | python3 -c "import json,sys; m=json.load(sys.stdin)['messages'][0]; print(json.dumps({'transactionId': m['transactionId'], 'partitionId': m['partitionId'], 'leaseId': m['leaseId'], 'consumerGroup': '$1', 'status': '$2'}))")" >/dev/null
}
for i in 1 2 3 4; do popack dl failed; done  # retryLimit 3: the fourth failure dead-letters it
popack tr completed
j "pop/queue/$Q?consumerGroup=newsub&subscriptionMode=new" >/dev/null
for tx in $(psql "$QDB" -Atc "select transaction_id from queen.messages where partition_id = '$PID' order by created_at, id limit 2"); do
  j traces "{\"transactionId\":\"$tx\",\"partitionId\":\"$PID\",\"data\":{\"step\":1},\"consumerGroup\":\"tr\",\"traceNames\":[\"real-run\"]}" >/dev/null
done
echo "$(date -u +%T) import of the reference's database, load=$(cut -d' ' -f1 /proc/loadavg)" | tee real.load
DATABASE_URL=$PG/queen_switch_real /usr/bin/time -v /tmp/qg-import import queen --from "$QDB" >real.out 2>real.err
echo "exit $?" >>real.out
grep -E "^imported|Maximum resident|Elapsed" real.out real.err; grep "messages: done" real.err

# The runbook, each step timed.
export DATABASE_URL=$PG/queen_switch_cut
t() { date +%s.%N; }
step() { echo "$(date -u +%T.%3N) $*" | tee -a rb.log; }
took() { echo "  took $(echo "$(t) - $1" | bc | cut -c1-6) s" | tee -a rb.log; }
step "0. live: producer and consumer on Queen"
$FLOW produce $QU orders 0 stop.prodq prod.log >prodq.out &
PQ=$!
$FLOW consume $QU orders billing stop.consq cons.log &
CQ=$!
sleep 20
step "1. first pass, Queen live"; s=$(t)
/tmp/qg-import import queen --from $QDB --no-progress >pass1.out 2>&1; echo "  exit $?" | tee -a rb.log; took $s
step "2. start queengo, push and pop maintenance on"; s=$(t)
PORT=6748 FILE_BUFFER_DIR=$OUT/qgbuf LOG_LEVEL=warn /tmp/qg-import >qg.log 2>&1 &
QG=$!
until curl -sf $GU/health >/dev/null; do sleep 0.05; done
curl -s -XPOST $GU/api/v1/system/maintenance -H 'Content-Type: application/json' -d '{"enabled":true}' >/dev/null
curl -s -XPOST $GU/api/v1/system/maintenance/pop -H 'Content-Type: application/json' -d '{"enabled":true}' >/dev/null
took $s
step "3. Queen: pop maintenance on, push maintenance on"; s=$(t)
curl -s -XPOST $QU/api/v1/system/maintenance/pop -H 'Content-Type: application/json' -d '{"enabled":true}' >/dev/null
curl -s -XPOST $QU/api/v1/system/maintenance -H 'Content-Type: application/json' -d '{"enabled":true}' >/dev/null
took $s
step "4. stop Queen's consumers (they ack what they hold)"; s=$(t)
touch stop.consq; wait $CQ; took $s
step "5. producers to queengo"; s=$(t)
touch stop.prodq; wait $PQ; NEXT=$(cat prodq.out)
$FLOW produce $GU orders $NEXT stop.prodg prod.log >prodg.out &
PG_=$!
took $s
step "6. Queen: push maintenance off (no producer left), its buffer replayed into its database"; s=$(t)
curl -s -XPOST $QU/api/v1/system/maintenance -H 'Content-Type: application/json' -d '{"enabled":false}' >/dev/null
until curl -s $QU/api/v1/system/maintenance | python3 -c 'import json,sys; r=json.load(sys.stdin); b=r.get("bufferStats",{}); sys.exit(0 if r.get("bufferedMessages",0)==0 and b.get("pendingCount",0)==0 else 1)'; do sleep 0.1; done
took $s
step "7. final pass"; s=$(t)
/tmp/qg-import import queen --from $QDB --no-progress >pass2.out 2>&1; E=$?; echo "  exit $E" | tee -a rb.log; took $s
if [ $E != 0 ]; then step "the final pass did not verify clean: stopping"; touch stop.prodg; kill $QG $RP; exit 1; fi
step "8. queengo's buffer replayed (the final pass set its push maintenance off, as Queen's)"; s=$(t)
until curl -s $GU/api/v1/system/maintenance | python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if r["bufferedMessages"]==0 and not r["bufferStats"]["active"] and not r["maintenanceMode"] else 1)'; do sleep 0.05; done
took $s
step "9. consumers to queengo, pop maintenance off"; s=$(t)
$FLOW consume $GU orders billing stop.consg cons.log &
CG=$!
curl -s -XPOST $GU/api/v1/system/maintenance/pop -H 'Content-Type: application/json' -d '{"enabled":false}' >/dev/null
took $s
sleep 15
step "10. stop the producer, drain"
touch stop.prodg; wait $PG_
LAST=$(cat prodg.out)
for i in $(seq 120); do [ "$(awk '$1 !~ /#/ {print $1}' cons.log | sort -n | uniq | wc -l)" -ge "$LAST" ] && break; sleep 0.5; done
touch stop.consg; wait $CG
kill $QG $RP; wait $QG $RP
python3 - <<'PY' | tee -a rb.log
prod = {int(l.split()[0]) for l in open("prod.log") if not l.startswith("#")}
cons = [int(l.split()[0]) for l in open("cons.log") if not l.startswith("#")]
lost = sorted(prod - set(cons))
print(f"stored {len(prod)}, consumed {len(set(cons))} distinct ({len(cons) - len(set(cons))} again), lost {len(lost)} {lost[:10]}")
PY
for d in queen_switch_src queen_switch_real queen_switch_cut; do psql "$PG/postgres" -qc "drop database $d"; done
