#!/usr/bin/env python3
"""Concurrent large pushes to one partition (issue 41, defect 4).

Sends N pushes of one item with a SIZE-MiB payload each, all at once, to one
partition of a broker at URL, and prints how many answered 201 and 503 and
each push's latency. Run against a broker on a scratch database:

    python3 bench/results/big-pushes.py http://127.0.0.1:6632 20 15
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

url, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
payload = "x" * (size << 20)
queue = "big-%d" % time.time()
res = [None] * n


def push(i):
    body = json.dumps({"items": [{"queue": queue, "partition": "p", "transactionId": "t%d" % i,
                                  "payload": {"d": payload}}]}).encode()
    req = urllib.request.Request(url + "/api/v1/push", data=body, headers={"Content-Type": "application/json"})
    t = time.time()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            res[i] = (r.status, time.time() - t)
    except urllib.error.HTTPError as e:
        res[i] = (e.code, time.time() - t)


threads = [threading.Thread(target=push, args=(i,)) for i in range(n)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
print("queue %s: %d pushes of %d MiB in %.1f s: %s" % (queue, n, size, time.time() - t0,
                                                     dict(Counter(r[0] for r in res))))
print("latencies (s):", " ".join("%.1f" % r[1] for r in sorted(res, key=lambda r: r[1])))
