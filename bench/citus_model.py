#!/usr/bin/env python3
"""citus_model.py: throughput against Citus workers, from measured CPU per message.

Reads the CSV bench/citus-cost.sh writes (CPU microseconds per message of the
broker, the coordinator, all workers together, per scenario and batch) and
prints, per scenario and batch:

  * the measured table (single node against the cluster);
  * the modelled throughput of one PostgreSQL and of a Citus cluster with N
    workers, each node with --cores cores used up to --util, and which part
    binds: the coordinator (its CPU per message does not spread), or the
    workers (their CPU per message spreads over N, since each message touches
    one partition and so one worker);
  * the hot-partition bound: a partition's writes serialise on its row (one
    commit at a time), so one partition takes at most batch-per-commit /
    --commit-ms messages a second however many workers there are.

Consume runs include their pre-fill (pushes at --prefill-batch, 100 by
default); the model subtracts the push cost at that batch measured in the
same run, so consume figures are pop + ack only.

    python3 bench/citus_model.py bench/out/citus-cost.csv [--cores 16] [--util 0.7]
    python3 bench/citus_model.py --table bench/out/citus-cost.csv   # the measured table only
"""
import argparse
import csv
import sys

WORKERS = [1, 2, 4, 8, 16, 32]


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["target"], r["scenario"], int(r["batch"]))
            rows[key] = {k: float(r[k]) for k in ("messages", "seconds", "broker_us", "coordinator_us", "workers_us", "db_us")}
    return rows


def consume_only(rows, prefill_batch):
    """Subtract the pre-fill's push cost from the consume rows."""
    out = dict(rows)
    for (target, scen, batch), r in rows.items():
        if scen != "consume":
            continue
        p = rows.get((target, "push", prefill_batch))
        if not p:
            continue
        q = dict(r)
        for k in ("broker_us", "coordinator_us", "workers_us", "db_us"):
            q[k] = max(r[k] - p[k], 0.0)
        out[(target, scen, batch)] = q
    return out


def table(rows):
    print("| scenario | batch | single: msg/s | single: broker µs/msg | single: PostgreSQL µs/msg "
          "| Citus: msg/s | Citus: broker µs/msg | coordinator µs/msg | workers µs/msg | Citus PostgreSQL / single |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scen in ("push", "consume"):
        for batch in (1, 10, 100):
            s, c = rows.get(("single", scen, batch)), rows.get(("citus", scen, batch))
            if not s or not c:
                continue
            rate = lambda r: r["messages"] / r["seconds"] if r["seconds"] else 0
            ratio = f"{c['db_us'] / s['db_us']:.1f}×" if s["db_us"] > 0 else "n/a"
            print(f"| {scen} | {batch} | {rate(s):,.0f} | {s['broker_us']:.0f} | {s['db_us']:.0f} "
                  f"| {rate(c):,.0f} | {c['broker_us']:.0f} | {c['coordinator_us']:.0f} | {c['workers_us']:.0f} | {ratio} |")


def model(rows, cores, util, commit_ms):
    cap = cores * util * 1e6  # CPU microseconds a node spends per second
    print(f"\nModel: {cores} cores a node, used up to {util:.0%}; brokers added as needed (their CPU is not a limit);"
          f" a partition commits once per {commit_ms} ms.\n")
    head = " | ".join(f"{n} workers" for n in WORKERS)
    print(f"| scenario | batch | one PostgreSQL | {head} | bound at {WORKERS[-1]} | one hot partition |")
    print("|---|---:|---:|" + "---:|" * len(WORKERS) + "---|---:|")
    for scen in ("push", "consume"):
        for batch in (1, 10, 100):
            s, c = rows.get(("single", scen, batch)), rows.get(("citus", scen, batch))
            if not s or not c:
                continue
            single = f"{cap / s['db_us']:,.0f}" if s["db_us"] > 0 else "n/a (too short to read)"
            coord = cap / c["coordinator_us"] if c["coordinator_us"] else float("inf")
            cells, bound = [], ""
            for n in WORKERS:
                work = n * cap / c["workers_us"] if c["workers_us"] else float("inf")
                x = min(coord, work)
                bound = "coordinator" if coord <= work else "workers"
                cells.append(f"{x:,.0f}")
            hot = batch * 1000.0 / commit_ms
            print(f"| {scen} | {batch} | {single} | " + " | ".join(cells) + f" | {bound} | {hot:,.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--table", action="store_true", help="print the measured table only")
    ap.add_argument("--cores", type=float, default=16, help="cores of each node (16)")
    ap.add_argument("--util", type=float, default=0.7, help="share of a node's CPU to plan for (0.7)")
    ap.add_argument("--commit-ms", type=float, default=2.0, help="one commit of a partition, in ms (2)")
    ap.add_argument("--prefill-batch", type=int, default=100, help="consume's pre-fill batch (100)")
    a = ap.parse_args()
    rows = consume_only(load(a.csv), a.prefill_batch)
    table(rows)
    if not a.table:
        model(rows, a.cores, a.util, a.commit_ms)


if __name__ == "__main__":
    sys.exit(main())
