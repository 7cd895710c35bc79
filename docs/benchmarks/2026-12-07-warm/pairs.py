#!/usr/bin/env python3
# Prints the pairs of ab.sh beside it: msg/s (consume) or delivery p50/p99
# (e2e), broker and PostgreSQL CPU per million, head against warm.
import glob, json, os, re
d = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in glob.glob(os.path.join(d, '*.json')):
    m = re.match(r'(.*)-(\d)-(head|warm2?)\.json', os.path.basename(f))
    r = json.load(open(f))['results'][0]
    res, lat = r.get('resources', {}), r.get('latencies', {}).get('delivery')
    fig = f"{lat['p50_ms']:.1f}/{lat['p99_ms']:.1f} ms" if lat else f"{r['msg_per_sec']:.0f}"
    rows.setdefault(m[1], {}).setdefault(m[3], {})[m[2]] = (fig, res.get('broker_cpu_seconds_per_million', 0), res.get('pg_cpu_seconds_per_million', 0))
for k in sorted(rows):
    for t in ("head", "warm", "warm2"):
        runs = rows[k].get(t, {})
        print(f"{k:22s} {t}: " + "  ".join(f"{n}: {v[0]:>13s} broker {v[1]:5.1f} pg {v[2]:5.1f}" for n, v in sorted(runs.items())))
