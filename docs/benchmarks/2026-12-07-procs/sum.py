#!/usr/bin/env python3
# Summarizes the runs beside it, or in the folder given: msg/s, latency
# p50/p99, CPU per million.
import glob, json, os, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    r = json.load(open(f))['results'][0]
    res = r.get('resources', {})
    lat = r.get('latencies', {}).get('delivery') or r.get('latency') or {}
    print(f"{os.path.basename(f):28s} {r['msg_per_sec']:9.0f} p50 {lat.get('p50_ms', 0):6.1f} p99 {lat.get('p99_ms', 0):6.1f}"
          f"  broker {res.get('broker_cpu_seconds_per_million', 0):6.1f} pg {res.get('pg_cpu_seconds_per_million', 0):6.1f}"
          f" client {res.get('client_cpu_seconds', 0):5.1f}")
