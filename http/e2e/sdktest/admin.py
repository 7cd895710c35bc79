"""Calls every method of the Python SDK's Admin once against a broker.

The data put in place first and the checks of each answer are admin.mjs's
(the JS SDK's Admin, the same routes): one JSON line per call,
{"method", "ok", "error"?, "answer"?}. A call fails when the SDK raises (an
HTTP error, or an answer it cannot read) or when the answer lacks what the
SDK's users read of it.

    python3 admin.py <the kit's client-py folder> <broker URL>
"""
import asyncio
import json
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone

sys.path.insert(0, sys.argv[1])
from queen import Queen  # noqa: E402

url = sys.argv[2]
run = format(int(time.time() * 1000), "x")
q = "sdkadmin-py-" + run


def http(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


def has(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict) or k not in obj:
            return "missing " + k
    return None


def is_list(v, what):
    return None if isinstance(v, list) else what + " is not an array"


def is_object(a):
    return None if isinstance(a, dict) else "not an object"


def pop_one(partition):
    return http("GET", f"/api/v1/pop/queue/{q}/partition/{partition}?consumerGroup=g&batch=1&wait=false")["messages"][0]


# Data: a queue with two partitions, messages, one consumed by group g, one
# dead-lettered for group g (no retries), a trace.
http("POST", "/api/v1/configure", {"queue": q, "options": {"leaseTime": 30, "retryLimit": 0}})
pushed = http("POST", "/api/v1/push", {"items": [
    {"queue": q, "partition": "p1", "payload": {"n": 1}, "transactionId": run + "-1"},
    {"queue": q, "partition": "p1", "payload": {"n": 2}, "transactionId": run + "-2"},
    {"queue": q, "partition": "p2", "payload": {"n": 3}, "transactionId": run + "-3"},
    {"queue": q, "partition": "p2", "payload": {"n": 4}, "transactionId": run + "-4"},
]})
pid1, pid2 = pushed[0]["partition_id"], pushed[2]["partition_id"]
m = pop_one("p1")
http("POST", "/api/v1/ack", {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                             "leaseId": m["leaseId"], "consumerGroup": "g", "status": "completed"})
http("POST", "/api/v1/traces", {"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                "consumerGroup": "g", "traceName": "t-" + run, "eventType": "info", "data": {"step": 1}})
f = pop_one("p1")
http("POST", "/api/v1/ack", {"transactionId": f["transactionId"], "partitionId": f["partitionId"], "leaseId": f["leaseId"],
                             "consumerGroup": "g", "status": "failed", "error": "sdk admin test"})

now = datetime.now(timezone.utc)
since = (now - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
until = (now + timedelta(minutes=1)).isoformat().replace("+00:00", "Z")


def calls(admin):
    """Each call: the method, how to call it, and what its answer must hold."""
    return [
        ("get_overview", lambda: admin.get_overview(), lambda a: has(a, "queues", "partitions", "messages", "throughput")),
        ("get_namespaces", lambda: admin.get_namespaces(), lambda a: has(a, "namespaces") or is_list(a["namespaces"], "namespaces")),
        ("get_tasks", lambda: admin.get_tasks(), lambda a: has(a, "tasks") or is_list(a["tasks"], "tasks")),
        ("list_queues", lambda: admin.list_queues(limit=10), lambda a: has(a, "queues") or is_list(a["queues"], "queues")),
        ("get_queue", lambda: admin.get_queue(q), lambda a: has(a, "name", "partitions")),
        ("get_partitions", lambda: admin.get_partitions(queue=q), lambda a: has(a, "partitions") or is_list(a["partitions"], "partitions")),
        ("list_messages", lambda: admin.list_messages(queue=q, limit=10), lambda a: has(a, "messages") or is_list(a["messages"], "messages")),
        ("get_message", lambda: admin.get_message(pid2, run + "-3"), lambda a: has(a, "transactionId", "payload", "status", "consumerGroups")),
        ("get_traces_for_message", lambda: admin.get_traces_for_message(m["partitionId"], m["transactionId"]),
         lambda a: has(a, "traces") or is_list(a["traces"], "traces")),
        ("get_traces_by_name", lambda: admin.get_traces_by_name("t-" + run), lambda a: has(a, "traces")),
        ("get_trace_names", lambda: admin.get_trace_names(limit=10), lambda a: has(a, "trace_names")),
        ("get_status", lambda: admin.get_status(), lambda a: has(a, "messages", "queues")),
        ("get_queue_stats", lambda: admin.get_queue_stats(), lambda a: has(a, "queues") or is_list(a["queues"], "queues")),
        ("get_queue_detail", lambda: admin.get_queue_detail(q), lambda a: has(a, "partitions") or is_list(a["partitions"], "partitions")),
        ("get_analytics", lambda: admin.get_analytics(), lambda a: has(a, "dataPoints") or is_list(a["dataPoints"], "dataPoints")),
        ("list_consumer_groups", lambda: admin.list_consumer_groups(), lambda a: is_list(a, "the group list")),
        ("refresh_consumer_stats", lambda: admin.refresh_consumer_stats(), is_object),
        ("get_consumer_group", lambda: admin.get_consumer_group("g"), is_object),
        ("get_lagging_consumers", lambda: admin.get_lagging_consumers(0), lambda a: is_list(a, "the lagging list")),
        ("seek_consumer_group", lambda: admin.seek_consumer_group("g", q, {"toEnd": True}), lambda a: has(a, "success")),
        ("health", lambda: admin.health(), lambda a: has(a, "status", "database")),
        ("metrics", lambda: admin.metrics(), lambda a: has(a, "uptime", "requests", "messages", "database", "memory", "cpu")),
        ("get_maintenance_mode", lambda: admin.get_maintenance_mode(), lambda a: has(a, "maintenanceMode")),
        ("set_maintenance_mode", lambda: admin.set_maintenance_mode(False), lambda a: has(a, "maintenanceMode")),
        ("get_pop_maintenance_mode", lambda: admin.get_pop_maintenance_mode(), lambda a: has(a, "popMaintenanceMode")),
        ("set_pop_maintenance_mode", lambda: admin.set_pop_maintenance_mode(False), lambda a: has(a, "popMaintenanceMode")),
        ("get_system_metrics", lambda: admin.get_system_metrics(**{"from": since, "to": until}), lambda a: has(a, "timeRange", "replicas")),
        ("get_worker_metrics", lambda: admin.get_worker_metrics(**{"from": since, "to": until}), lambda a: has(a, "timeRange", "timeSeries")),
        ("get_postgres_stats", lambda: admin.get_postgres_stats(), is_object),
        ("retry_message", lambda: admin.retry_message(pid1, run + "-2"), is_object),
        ("move_message_to_dlq", lambda: admin.move_message_to_dlq(pid2, run + "-4"), is_object),
        ("delete_message", lambda: admin.delete_message(pid2, run + "-3"), is_object),
        ("delete_consumer_group_for_queue", lambda: admin.delete_consumer_group_for_queue("g", q, True), is_object),
        ("clear_queue", lambda: admin.clear_queue(q), is_object),
    ]


async def main():
    queen = Queen(url=url)
    try:
        for method, call, check in calls(queen.admin):
            try:
                answer = await call()
                problem = check(answer)
                line = {"method": method, "ok": False, "error": problem, "answer": answer} if problem else {"method": method, "ok": True}
            except Exception as e:  # the SDK's error is the finding
                line = {"method": method, "ok": False, "error": repr(e)}
            print(json.dumps(line, default=str), flush=True)
    finally:
        await queen.close()


asyncio.run(main())
