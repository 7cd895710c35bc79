#!/usr/bin/env bash
# citus-cost.sh: CPU per message of push and consume at batch 1, 10, 100 on a
# single-node PostgreSQL and on the local Citus cluster (coordinator + 2
# workers, .ci/citus-cluster.sh), in the same run, on this machine
# (docs/scaling.md "Cost on one machine"). Prints a Markdown table and
# writes the inputs of bench/citus_model.py as CSV.
#
#     bash bench/citus-cost.sh [out.csv]        # from the repository root
#
# CPU is read from /proc before and after each bench run: the broker's
# process and every process of each PostgreSQL server (the postmaster and its
# children, found through each data directory's postmaster.pid), so other
# servers on the machine do not count. A backend that exits during a run
# takes its CPU with it (pools keep theirs; Citus keeps up to
# citus.max_cached_conns_per_worker connections to each worker).
# Knobs: DURATION (push seconds, 10), MESSAGES (consume, 20000),
# CONNS (producers/consumers, 10), PARTS (partitions, 10).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
OUT="${1:-$REPO/bench/out/citus-cost.csv}"
DURATION="${DURATION:-10}"; MESSAGES="${MESSAGES:-20000}"; CONNS="${CONNS:-10}"; PARTS="${PARTS:-10}"
BIN=/usr/lib/postgresql/15/bin
DATA="${QUEENGO_CITUS_DATA:-$REPO/.data/citus}"
SINGLE_PORT="${SINGLE_PORT:-55440}"
BROKER_PORT="${BROKER_PORT:-16700}"
TICK="$(getconf CLK_TCK)"
mkdir -p "$(dirname "$OUT")" /tmp/citus-cost
as_pg() { if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else (cd / && "$@"); fi; }

coord_url="$(bash "$REPO/.ci/citus-cluster.sh" start)"
# A database of its own on every node, with the nodes registered in it.
db=qgcost
for p in 55432 55433 55434; do
	"$BIN/psql" -X -q -h 127.0.0.1 -p "$p" -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" 2>/dev/null
	"$BIN/psql" -X -q -h 127.0.0.1 -p "$p" -U postgres -d "$db" -c "CREATE EXTENSION citus" 2>/dev/null
done
"$BIN/psql" -X -q -h 127.0.0.1 -p 55432 -U postgres -d "$db" -c "SELECT citus_set_coordinator_host('127.0.0.1', 55432)" \
	-c "SELECT citus_add_node('127.0.0.1', 55433)" -c "SELECT citus_add_node('127.0.0.1', 55434)" >/dev/null
citus_db="postgres://postgres@127.0.0.1:55432/$db?sslmode=disable"

# The single node: the same settings as the cluster's nodes, without citus.
S="$DATA/single"
if [ ! -f "$S/PG_VERSION" ]; then
	mkdir -p -m 0700 "$S"; [ "$(id -u)" = 0 ] && chown postgres: "$S"
	as_pg env TZ=UTC "$BIN/initdb" -D "$S" --username=postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
	grep -v shared_preload_libraries "$DATA/coordinator/queengo.conf" | sed "s/^port = .*/port = $SINGLE_PORT/" >"$S/queengo.conf"
	[ "$(id -u)" = 0 ] && chown postgres: "$S/queengo.conf"
	printf "\ninclude = 'queengo.conf'\n" >>"$S/postgresql.conf"
fi
as_pg "$BIN/pg_ctl" status -D "$S" >/dev/null 2>&1 || as_pg "$BIN/pg_ctl" start -D "$S" -l "$S/server.log" -w >/dev/null
"$BIN/psql" -X -q -h 127.0.0.1 -p "$SINGLE_PORT" -U postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
single_db="postgres://postgres@127.0.0.1:$SINGLE_PORT/$db?sslmode=disable"

go -C "$REPO" build -o /tmp/citus-cost/queengo ./cmd/queengo
go -C "$REPO/bench" build -o /tmp/citus-cost/bench .

# cpu PID...: CPU seconds of the processes.
cpu() { local t=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
# server_pids DIR: the postmaster of DIR and its children.
server_pids() { local pm; pm="$(head -1 "$1/postmaster.pid")"; echo "$pm" $(pgrep -P "$pm" || true); }
snap() { # snap BROKERPID DIR...: ticks of the broker, then of each server
	local b="$1"; shift; printf '%s' "$(cpu "$b")"; local d; for d in "$@"; do printf ' %s' "$(cpu $(server_pids "$d"))"; done; echo
}

echo "target,scenario,batch,messages,seconds,broker_us,coordinator_us,workers_us,db_us" >"$OUT"
run_target() { # run_target NAME URL DIR...
	local name="$1" url="$2"; shift 2
	DATABASE_URL="$url" PORT="$BROKER_PORT" DB_POOL_SIZE=20 LOG_LEVEL=warn /tmp/citus-cost/queengo >"/tmp/citus-cost/broker-$name.log" 2>&1 &
	local bpid=$!
	for _ in $(seq 60); do curl -fs "http://127.0.0.1:$BROKER_PORT/health" >/dev/null 2>&1 && break; sleep 0.5; done
	local scen batch before after j
	# Warm-up, not measured: every new connection's first calls compile the
	# PL/pgSQL functions and load Citus's metadata (half a second on a
	# worker's fresh backend); the broker's and the coordinator's connections
	# are kept after it.
	/tmp/citus-cost/bench push --url "http://127.0.0.1:$BROKER_PORT" --no-pg --batch 10 --connections "$CONNS" \
		--partitions "$PARTS" --duration 5s >/dev/null 2>&1
	/tmp/citus-cost/bench consume --url "http://127.0.0.1:$BROKER_PORT" --no-pg --batch 10 --consumers "$CONNS" \
		--partitions "$PARTS" --messages 2000 >/dev/null 2>&1
	for scen in push consume; do
		for batch in 1 10 100; do
			j="/tmp/citus-cost/$name-$scen-$batch.json"
			before="$(snap "$bpid" "$@")"
			if [ "$scen" = push ]; then
				/tmp/citus-cost/bench push --url "http://127.0.0.1:$BROKER_PORT" --no-pg --batch "$batch" --connections "$CONNS" \
					--partitions "$PARTS" --duration "${DURATION}s" --json "$j" >/dev/null 2>&1
			else
				/tmp/citus-cost/bench consume --url "http://127.0.0.1:$BROKER_PORT" --no-pg --batch "$batch" --consumers "$CONNS" \
					--partitions "$PARTS" --messages "$MESSAGES" --json "$j" >/dev/null 2>&1
			fi
			after="$(snap "$bpid" "$@")"
			python3 - "$name" "$scen" "$batch" "$j" "$before" "$after" "$TICK" "$#" >>"$OUT" <<'PY'
import json, sys
name, scen, batch, j, before, after, tick, nserv = sys.argv[1:]
r = json.load(open(j))
res = r[0] if isinstance(r, list) else r
if "results" in res: res = res["results"][0]
n = res["messages"]; secs = res["seconds"]
b = [int(x) for x in before.split()]; a = [int(x) for x in after.split()]
d = [(a[i] - b[i]) / int(tick) for i in range(len(a))]
us = lambda s: 1e6 * s / n if n else 0
if int(nserv) == 1:
    coord, workers = d[1], 0.0
else:
    coord, workers = d[1], sum(d[2:])
print(f"{name},{scen},{batch},{n},{secs:.1f},{us(d[0]):.1f},{us(coord):.1f},{us(workers):.1f},{us(coord + workers):.1f}")
PY
		done
	done
	kill "$bpid"; wait "$bpid" 2>/dev/null || true
}
run_target single "$single_db" "$S"
run_target citus "$citus_db" "$DATA/coordinator" "$DATA/worker1" "$DATA/worker2"
as_pg "$BIN/pg_ctl" stop -D "$S" -m fast >/dev/null
python3 "$REPO/bench/citus_model.py" --table "$OUT"
