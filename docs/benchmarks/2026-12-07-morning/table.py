#!/usr/bin/env python3
# Prints the figures of docs/benchmarks.md "2026-12-07, morning" from the
# JSON beside it, or of "morning, final" from the folder given
# (2026-12-07-warm-aims): per run msg/s, PostgreSQL and broker CPU per
# million, the share of the two cores the three processes kept busy, and the
# e2e latencies.
import glob, json, os, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(d, '*.json'))):
    r = json.load(open(f))['results'][0]
    res, lat, m = r.get('resources', {}), r.get('latencies', {}), r.get('metrics', {})
    busy = (res.get('broker_cpu_seconds', 0) + res.get('pg_cpu_seconds', 0) + res.get('client_cpu_seconds', 0)) / (2 * r['seconds'])
    line = (f"{os.path.basename(f)[:-5]:30s} {r['msg_per_sec']:9.0f} msg/s  pg {res.get('pg_cpu_seconds_per_million', 0):6.1f}"
            f"  broker {res.get('broker_cpu_seconds_per_million', 0):6.1f}  busy {busy:4.0%}")
    if 'delivery' in lat:
        p = lambda k, q: lat.get(k, {}).get(q, 0)
        line += (f"  sent {m.get('sent_per_sec', 0):7.0f}/s lost {m.get('lost', 0)}  delivery {p('delivery', 'p50_ms'):.1f} / {p('delivery', 'p99_ms'):.1f}"
                 f"  push {p('push', 'p50_ms'):.1f} / {p('push', 'p99_ms'):.1f}  pop p50 {p('pop', 'p50_ms'):.1f}  ack p50 {p('ack', 'p50_ms'):.1f}")
    print(line)
