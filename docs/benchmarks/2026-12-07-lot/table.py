#!/usr/bin/env python3
# Prints the idle runs of ab.sh, then of slack.sh (in slack/)
# (docs/benchmarks.md, "2026-12-07, afternoon: a parking lot indexed by
# partition"): broker and PostgreSQL CPU over the run, the pops the claim
# rounds carried and the rounds (the broker's own figures), the polls
# parked, messages pushed and delivered, /health's p99.
import glob, json, os
d = os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(d, 'idle-*.json'))) + sorted(glob.glob(os.path.join(d, 'slack', 'idle-*.json'))):
    r = json.load(open(f))['results'][0]
    res, m = r['resources'], r.get('metrics', {})
    met = dict(l.split() for l in open(f[:-5] + '.metrics') if l.strip())
    print(f"{os.path.basename(f)[:-5]:28s} broker CPU {res['broker_cpu_seconds']:5.2f} s  PG CPU {res['pg_cpu_seconds']:5.2f} s"
          f"  claimed pops {int(float(met['queengo_claim_round_pops_sum'])):7d} in {int(float(met['queengo_claim_round_pops_count'])):6d} rounds"
          f"  parked {m.get('parked_min', 0):.0f}-{m.get('parked_max', 0):.0f}  pushed {m.get('pushed', 0):.0f}"
          f"  delivered {m.get('delivered', 0):.0f}  errors {r.get('errors', 0)}  /health p99 {r['latencies']['health']['p99_ms']:.1f} ms")
