#!/usr/bin/env python3
"""docs/benchmarks.md, "2026-12-07, later afternoon: what the hour decides".

Reads every queengo run of the aims' scenarios in docs/benchmarks/2026-12-06*
and 2026-12-07* (the files NAME-K-final.json of the "every aim" scripts, and
the reference's NAME-1-ref.json beside them) and prints two tables:

1. per scenario, over all those runs: how busy the two cores were (the three
   processes' CPU seconds over twice the run's seconds), the CPU microseconds
   the three processes (broker, PostgreSQL, load generator) spent per message,
   the load generator's share, and the throughput;
2. per run folder: the load generator's CPU microseconds per message at batch
   10 (the same requests in every run: a gauge of the hour), the queengo
   throughput of every aim's scenario (thousands of msg/s, one per run) and
   the reference's push at batch 1 and consume at batch 1 in the same folder.

Run from the repository's root: python3 docs/benchmarks/2026-12-07-hours/hours.py
"""
import glob
import json
import re
import statistics

SCENARIOS = ['consume-b1-p10', 'consume-b1-p100', 'consume-b10', 'consume-b100',
             'push-b1', 'push-b10', 'push-b100']
NAME = re.compile(r'/(' + '|'.join(SCENARIOS) + r')-\d+-(final|ref)\.json$')


def runs():
    for f in sorted(glob.glob('docs/benchmarks/2026-12-0[67]*/*.json')):
        m = NAME.search(f)
        if not m:
            continue
        r = json.load(open(f))['results'][0]
        res, n = r['resources'], r['messages']
        cpu = res.get('broker_cpu_seconds', 0) + res['pg_cpu_seconds'] + res['client_cpu_seconds']
        yield dict(folder=f.split('/')[2], scenario=m.group(1), target=m.group(2),
                   rate=r['msg_per_sec'], started=r['started_at'][:16],
                   busy=cpu / r['seconds'] / 2 * 100, us=cpu / n * 1e6,
                   client=res['client_cpu_seconds'] / n * 1e6)


def main():
    all_runs = list(runs())
    ours = [r for r in all_runs if r['target'] == 'final']
    print('scenario | runs | cores busy % (median) | CPU µs per message (median) | load generator µs | msg/s')
    for s in SCENARIOS:
        v = [r for r in ours if r['scenario'] == s]
        b, u, c, q = ([r[k] for r in v] for k in ('busy', 'us', 'client', 'rate'))
        print(f'{s} | {len(v)} | {min(b):.0f}-{max(b):.0f} ({statistics.median(b):.0f}) | '
              f'{min(u):.0f}-{max(u):.0f} ({statistics.median(u):.0f}) | {min(c):.1f}-{max(c):.1f} | '
              f'{min(q):,.0f}-{max(q):,.0f}')
    print()
    print('folder | started | load generator µs/msg at batch 10 | ' + ' | '.join(SCENARIOS)
          + ' | reference push-b1 | reference consume-b1-p10')
    folders = {r['folder']: r['started'] for r in ours if r['scenario'] == 'consume-b10'}
    for folder in sorted(folders, key=folders.get):
        b10 = [r for r in ours if r['folder'] == folder and r['scenario'] == 'consume-b10']
        cells = []
        for s in SCENARIOS:
            v = [r['rate'] / 1000 for r in ours if r['folder'] == folder and r['scenario'] == s]
            cells.append('/'.join(f'{x:.1f}' for x in v) or '-')
        ref = {r['scenario']: r['rate'] for r in all_runs if r['folder'] == folder and r['target'] == 'ref'}
        print(f"{folder} | {b10[0]['started']} | {statistics.median(r['client'] for r in b10):.1f} | "
              + ' | '.join(cells)
              + ''.join(f" | {ref[s]:,.0f}" if s in ref else ' | -' for s in ('push-b1', 'consume-b1-p10')))


main()
