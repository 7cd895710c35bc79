#!/usr/bin/env python3
"""Prints one CSV row per result of the `bench --json` files given (or of
every *.json in the folders given): the figures docs/performance.md quotes.

    python3 bench/results/summarize.py OUT/ > aims.csv

busy_pct is the share of the machine's cores that the broker, PostgreSQL and
the load generator kept busy together; on a 2-core box it tells how close a
run came to the CPU the machine had.
"""
import csv, glob, json, os, sys

COLUMNS = ["file", "label", "scenario", "batch", "partitions", "workers", "pin",
           "rate", "seconds", "msg_per_sec", "req_p50_ms", "req_p99_ms", "pg_cpu_s_per_M",
           "broker_cpu_s_per_M", "peak_rss_mb", "busy_pct", "sent_per_sec", "lost", "delivery_p50_ms", "delivery_p99_ms",
           "push_p50_ms", "push_p99_ms", "errors"]


def files(args):
    for a in args:
        if os.path.isdir(a):
            yield from sorted(glob.glob(os.path.join(a, "*.json")))
        else:
            yield a


def one(x):
    return round(x, 1) if x else ""


def rows(path):
    doc = json.load(open(path))
    cpus = doc.get("host", {}).get("cpus", 2) or 2
    for r in doc["results"]:
        p, res = r.get("params", {}), r.get("resources", {})
        lat, m = r.get("latencies", {}), r.get("metrics", {})
        busy = (res.get("broker_cpu_seconds", 0) + res.get("pg_cpu_seconds", 0)
                + res.get("client_cpu_seconds", 0)) / (cpus * r["seconds"]) if r["seconds"] else 0
        q = lambda k, f: round(lat[k][f], 1) if k in lat else ""
        yield {
            "file": os.path.basename(path), "label": r["target"], "scenario": r["scenario"],
            "batch": p.get("batch", ""), "partitions": p.get("partitions", ""),
            "workers": p.get("consumers", p.get("connections", "")),
            "pin": "yes" if p.get("pin") else "", "rate": p.get("rate", ""),
            "seconds": round(r["seconds"], 1), "msg_per_sec": round(r["msg_per_sec"]),
            "req_p50_ms": round(r["latency"]["p50_ms"], 1) if "latency" in r else "",
            "req_p99_ms": round(r["latency"]["p99_ms"], 1) if "latency" in r else "",
            "pg_cpu_s_per_M": one(res.get("pg_cpu_seconds_per_million")),
            "broker_cpu_s_per_M": one(res.get("broker_cpu_seconds_per_million")),
            "peak_rss_mb": one(res["broker_peak_rss_bytes"] / 2**20) if res.get("broker_peak_rss_bytes") else "",
            "busy_pct": round(100 * busy),
            "sent_per_sec": round(m["sent_per_sec"]) if "sent_per_sec" in m else "",
            "lost": m.get("lost", ""),
            "delivery_p50_ms": q("delivery", "p50_ms"), "delivery_p99_ms": q("delivery", "p99_ms"),
            "push_p50_ms": q("push", "p50_ms"), "push_p99_ms": q("push", "p99_ms"),
            "errors": r.get("errors", 0),
        }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    w = csv.DictWriter(sys.stdout, COLUMNS, lineterminator="\n")
    w.writeheader()
    for f in files(sys.argv[1:]):
        for row in rows(f):
            w.writerow(row)
