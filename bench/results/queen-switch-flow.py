# queen-switch-flow.py produce|consume URL QUEUE ARG STOPFILE LOG: the live
# producer and consumer of queen-switch.sh, over any Queen-compatible server.
# produce: pushes batches of 10 messages {"seq": n} (transactionId seq-n) over 10
#   partitions every 20 ms, from seq ARG, until STOPFILE exists; logs each seq the
#   server stored (queued, buffered, duplicate) and prints the next seq.
# consume: pops for group ARG (batch 50, long poll 1 s, 10 partitions a pop) and
#   acks, until STOPFILE exists; logs each seq it received.
import json, sys, time, os, urllib.request, urllib.error
mode, url, queue, arg, stop, logf = sys.argv[1:7]
log = open(logf, "a", buffering=1)
def req(method, path, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=timeout) as resp:
        t = resp.read()
        return resp.status, (json.loads(t) if t else None)
if mode == "produce":
    seq = int(arg)
    while not os.path.exists(stop):
        items = [{"queue": queue, "partition": "p%d" % ((seq + i) % 10), "payload": {"seq": seq + i}, "transactionId": "seq-%d" % (seq + i)} for i in range(10)]
        try:
            st, res = req("POST", "/api/v1/push", {"items": items})
            for it, r in zip(items, res):
                if r.get("status") in ("queued", "buffered", "duplicate"):
                    log.write("%d %s %.3f\n" % (it["payload"]["seq"], r["status"], time.time()))
            seq += 10
        except Exception as e:
            log.write("# error %s %.3f\n" % (e, time.time()))
            time.sleep(0.1)
        time.sleep(0.02)
    print(seq)
else:
    group = arg
    while not os.path.exists(stop):
        try:
            st, res = req("GET", "/api/v1/pop/queue/%s?consumerGroup=%s&batch=50&wait=true&timeout=1000&partitions=10" % (queue, group), timeout=15)
        except Exception as e:
            log.write("# error %s\n" % e); time.sleep(0.2); continue
        msgs = (res or {}).get("messages") or []
        if not msgs:
            continue
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "completed"} for m in msgs]
        req("POST", "/api/v1/ack/batch", {"consumerGroup": group, "acknowledgments": acks})
        for m in msgs:
            log.write("%d %.3f\n" % (m["data"]["seq"], time.time()))
