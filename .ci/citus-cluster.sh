#!/usr/bin/env bash
# citus-cluster.sh: a local Citus cluster for development and the Citus test
# target: a coordinator and two workers, three private PostgreSQL clusters
# under <repo>/.data/citus on 127.0.0.1:55432 (coordinator), 55433 and 55434
# (workers), each with shared_preload_libraries = 'citus'.
#
#     .ci/citus-cluster.sh start   # create on first use, start, register the nodes
#     .ci/citus-cluster.sh url     # print the coordinator's URL (the broker's DATABASE_URL)
#     .ci/citus-cluster.sh status  # the nodes citus knows, and who answers
#     .ci/citus-cluster.sh stop    # stop all three (the data stays)
#     .ci/citus-cluster.sh destroy # stop and delete .data/citus
#
# `start` prints the coordinator's URL as the last (and only) line on stdout,
# everything else goes to stderr, as .ci/ensure-postgres.sh does.
# When Citus is not installed in the machine's PostgreSQL, `start` runs the
# build script first ($QUEENGO_CITUS_BUILD, default ../shared/citus/build.sh
# beside the repository); on other machines install Citus from its packages.
#
# Knobs (environment):
#   QUEENGO_CITUS_DATA   data directory (<repo>/.data/citus)
#   QUEENGO_CITUS_PORT   coordinator port (55432); worker i gets PORT+i
#   QUEENGO_CITUS_WORKERS number of workers (2)
#   QUEENGO_CITUS_BUILD  script that installs Citus when it is missing
#   PG_BINDIR            PostgreSQL binaries (/usr/lib/postgresql/15/bin)
#
# It only ever starts and stops the servers it created: the system PostgreSQL
# is never touched.
set -euo pipefail
exec 3>&1 1>&2

log() { printf 'citus-cluster: %s\n' "$*"; }
die() { printf 'citus-cluster: error: %s\n' "$*"; exit 1; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
DATA="${QUEENGO_CITUS_DATA:-$REPO/.data/citus}"
PORT="${QUEENGO_CITUS_PORT:-55432}"
WORKERS="${QUEENGO_CITUS_WORKERS:-2}"
BINDIR="${PG_BINDIR:-/usr/lib/postgresql/15/bin}"
BUILD="${QUEENGO_CITUS_BUILD:-}"
if [ -z "$BUILD" ]; then
	for b in "$REPO/../shared/citus/build.sh" /work/shared/citus/build.sh; do
		[ -f "$b" ] && { BUILD="$b"; break; }
	done
fi
PG_USER=postgres
export PGCONNECT_TIMEOUT=5
export PGOPTIONS="-c client_min_messages=warning"
unset PGSERVICE PGSERVICEFILE || true

url() { printf 'postgres://%s@127.0.0.1:%s/postgres?sslmode=disable' "$PG_USER" "$1"; }
nodes() { local i; echo coordinator; for ((i = 1; i <= WORKERS; i++)); do echo "worker$i"; done; }
port_of() { if [ "$1" = coordinator ]; then echo "$PORT"; else echo "$((PORT + ${1#worker}))"; fi; }

as_pg() {
	if [ "$(id -u)" = 0 ]; then (cd / && runuser -u "$PG_USER" -- "$@") 3>&- 9>&-; else (cd / && "$@") 3>&- 9>&-; fi
}
psql_at() { local p="$1"; shift; "$BINDIR/psql" "$(url "$p")" -X -A -t -q -v ON_ERROR_STOP=1 "$@" </dev/null; }

citus_installed() {
	local lib share
	lib="$("$BINDIR/pg_config" --pkglibdir)"
	share="$("$BINDIR/pg_config" --sharedir)"
	[ -f "$lib/citus.so" ] && [ -f "$share/extension/citus.control" ]
}

start() {
	[ -x "$BINDIR/initdb" ] || die "no PostgreSQL binaries in $BINDIR (set PG_BINDIR)"
	if ! citus_installed; then
		[ -n "$BUILD" ] && [ -f "$BUILD" ] || die "Citus is not installed and no build script was found (set QUEENGO_CITUS_BUILD)"
		log "Citus is not installed: running $BUILD (about 5 minutes)"
		bash "$BUILD"
	fi
	mkdir -p "$DATA"
	exec 9>"$DATA/.lock"
	flock -w 120 9 || die "timed out waiting for another citus-cluster.sh"
	[ "$(id -u)" = 0 ] && chown "$PG_USER:" "$DATA"
	local n p d
	for n in $(nodes); do
		p="$(port_of "$n")"
		d="$DATA/$n"
		if [ ! -f "$d/PG_VERSION" ]; then
			log "initdb $d"
			mkdir -p -m 0700 "$d"
			[ "$(id -u)" = 0 ] && chown "$PG_USER:" "$d"
			as_pg env TZ=UTC "$BINDIR/initdb" -D "$d" --username="$PG_USER" --auth=trust \
				--encoding=UTF8 --locale=C.UTF-8 >/dev/null
		fi
		cat >"$d/queengo.conf" <<EOF
# Written by .ci/citus-cluster.sh on every start: edit that script, not this.
listen_addresses = '127.0.0.1'
port = $p
unix_socket_directories = ''
timezone = 'UTC'
log_timezone = 'UTC'
shared_preload_libraries = 'citus'
max_connections = 400
shared_buffers = 128MB
# The broker's statements are routed to one node; a multi-shard read (a
# discovery pop, the figures) then uses one connection per worker, not up to
# 16: with many broker connections the workers would run out of theirs.
citus.max_adaptive_executor_pool_size = 1
# Keep the coordinator's connections to the workers between transactions.
citus.max_cached_conns_per_worker = 4
work_mem = 8MB
max_wal_size = 1GB
max_worker_processes = 8
max_prepared_transactions = 100
# Shard moves without blocking writes (citus_rebalance_start's default
# transfer mode) use logical replication.
wal_level = logical
# Durable commits, as on the single-node server the figures compare with.
fsync = on
synchronous_commit = on
EOF
		[ "$(id -u)" = 0 ] && chown "$PG_USER:" "$d/queengo.conf"
		grep -qx "include = 'queengo.conf'" "$d/postgresql.conf" || printf "\ninclude = 'queengo.conf'\n" >>"$d/postgresql.conf"
		if as_pg "$BINDIR/pg_ctl" status -D "$d" >/dev/null 2>&1; then
			log "$n already running on $p"
		else
			"$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$p" -t 1 && die "another server listens on 127.0.0.1:$p"
			log "starting $n on 127.0.0.1:$p (log: $d/server.log)"
			as_pg "$BINDIR/pg_ctl" start -D "$d" -l "$d/server.log" -w -t 60 >/dev/null ||
				{ tail -n 30 "$d/server.log"; die "pg_ctl start failed for $d"; }
		fi
		psql_at "$p" -c "CREATE EXTENSION IF NOT EXISTS citus"
	done
	psql_at "$PORT" -c "SELECT citus_set_coordinator_host('127.0.0.1', $PORT)" >/dev/null
	for n in $(nodes); do
		[ "$n" = coordinator ] && continue
		p="$(port_of "$n")"
		if [ "$(psql_at "$PORT" -c "SELECT count(*) FROM pg_dist_node WHERE nodeport = $p")" = 0 ]; then
			log "adding $n (127.0.0.1:$p) to the cluster"
			psql_at "$PORT" -c "SELECT citus_add_node('127.0.0.1', $p)" >/dev/null
		fi
	done
	log "cluster ready: $(psql_at "$PORT" -c "SELECT string_agg(nodename || ':' || nodeport || CASE WHEN groupid = 0 THEN ' (coordinator)' ELSE '' END, ', ' ORDER BY nodeport) FROM pg_dist_node")"
	printf '%s\n' "$(url "$PORT")" >&3
}

stop() {
	local n d
	for n in $(nodes); do
		d="$DATA/$n"
		[ -f "$d/PG_VERSION" ] || continue
		if as_pg "$BINDIR/pg_ctl" status -D "$d" >/dev/null 2>&1; then
			log "stopping $n"
			as_pg "$BINDIR/pg_ctl" stop -D "$d" -m fast -w >/dev/null
		fi
	done
}

status() {
	local n
	for n in $(nodes); do
		if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$(port_of "$n")" -t 1; then log "$n: up on $(port_of "$n")"; else log "$n: down"; fi
	done
	psql_at "$PORT" -c "SELECT nodeid, nodename, nodeport, groupid, isactive FROM pg_dist_node ORDER BY nodeid" >&3 || true
}

case "${1:-}" in
start) start ;;
stop) stop ;;
url) printf '%s\n' "$(url "$PORT")" >&3 ;;
status) status ;;
destroy) stop; log "deleting $DATA"; rm -rf "$DATA" ;;
*) die "usage: $0 start|stop|url|status|destroy" ;;
esac
