#!/usr/bin/env bash
# ensure-postgres.sh: make sure a PostgreSQL server answers, then print an
# admin URL for it as the last (and only) line on stdout. Everything else
# (progress, apt output, server log hints) goes to stderr, so callers can do
#
#     DATABASE_URL="$(.ci/ensure-postgres.sh)"
#
# Which server, in order:
#   1. $DATABASE_URL, if set: used as is, after checking it answers.
#   2. A server on 127.0.0.1:$QUEENGO_PG_PROBE_PORT (default 5432) that lets
#      user postgres in without a password (trust auth).
#   3. A cluster of our own under <repo>/.data/pg on 127.0.0.1:54329
#      (created on first use, started if stopped, reused if running). The
#      PostgreSQL binaries are installed with apt-get when no initdb is found.
#
# This script never stops, restarts or reconfigures a server it did not
# create: the system PostgreSQL on 5432 is only probed.
#
# Knobs (environment):
#   DATABASE_URL              use this server, skip everything else
#   QUEENGO_PG_PROBE_PORT     port probed for an existing server (5432);
#                             QUEENGO_PG_PROBE_PORT=1 forces the local cluster
#   QUEENGO_PG_LOCAL_PORT     port of the local cluster (54329)
#   QUEENGO_PG_DATA           data directory of the local cluster (<repo>/.data/pg)
#   QUEENGO_PG_WAIT_SECONDS   how long to wait for a server to answer (60)
set -euo pipefail

# Keep stdout for the URL only: fd 3 is the real stdout, and everything this
# script and its children print goes to stderr.
exec 3>&1 1>&2

log() { printf 'ensure-postgres: %s\n' "$*"; }
die() { printf 'ensure-postgres: error: %s\n' "$*"; exit 1; }
emit() { printf '%s\n' "$1" >&3; exit 0; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PROBE_PORT="${QUEENGO_PG_PROBE_PORT:-5432}"
LOCAL_PORT="${QUEENGO_PG_LOCAL_PORT:-54329}"
DATA="${QUEENGO_PG_DATA:-$REPO/.data/pg}"
WAIT_SECONDS="${QUEENGO_PG_WAIT_SECONDS:-60}"
PG_USER=postgres

export DEBIAN_FRONTEND=noninteractive
# Never let libpq pick up a password prompt or a stray service file.
export PGCONNECT_TIMEOUT=5
unset PGSERVICE PGSERVICEFILE || true

# --- finding and installing binaries -----------------------------------------

APT_UPDATED=0
apt_install() {
	command -v apt-get >/dev/null || die "no apt-get on this machine; install PostgreSQL yourself or set DATABASE_URL"
	[ "$(id -u)" = 0 ] || die "need root to apt-get install $*; install PostgreSQL yourself or set DATABASE_URL"
	local apt=(apt-get -y -q -o DPkg::Lock::Timeout=300
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	if [ "$APT_UPDATED" = 0 ]; then
		log "apt-get update"
		apt-get -q -o DPkg::Lock::Timeout=300 update </dev/null
		APT_UPDATED=1
	fi
	log "apt-get install $*"
	"${apt[@]}" install --no-install-recommends "$@" </dev/null
}

# Newest /usr/lib/postgresql/<major>/bin that has the given program.
pg_bindir_with() {
	local prog="$1" d best=""
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
		[ -x "$d/$prog" ] && best="$d"
	done
	[ -n "$best" ] && printf '%s\n' "$best"
}

# Sets PSQL and PG_ISREADY, installing the client package if needed.
find_client() {
	local d
	PSQL="$(command -v psql || true)"
	PG_ISREADY="$(command -v pg_isready || true)"
	# /usr/bin/psql may be Debian's pg_wrapper with no client behind it.
	if [ -n "$PSQL" ] && ! "$PSQL" --version >/dev/null 2>&1; then PSQL=""; fi
	if [ -n "$PG_ISREADY" ] && ! "$PG_ISREADY" --version >/dev/null 2>&1; then PG_ISREADY=""; fi
	if [ -z "$PSQL" ] && d="$(pg_bindir_with psql)"; then PSQL="$d/psql"; fi
	if [ -z "$PG_ISREADY" ] && d="$(pg_bindir_with pg_isready)"; then PG_ISREADY="$d/pg_isready"; fi
	if [ -z "$PSQL" ] || [ -z "$PG_ISREADY" ]; then
		apt_install postgresql-client
		hash -r
		PSQL="$(command -v psql || true)"
		PG_ISREADY="$(command -v pg_isready || true)"
		[ -n "$PSQL" ] && [ -n "$PG_ISREADY" ] || die "psql/pg_isready still missing after installing postgresql-client"
	fi
}

# Sets BINDIR to a directory with initdb, pg_ctl and postgres, installing the
# server package if there is none. If the data directory already exists, the
# binaries of its major version are required.
find_server() {
	local want=""
	[ -f "$DATA/PG_VERSION" ] && want="$(cat "$DATA/PG_VERSION")"
	if [ -n "$want" ]; then
		BINDIR="/usr/lib/postgresql/$want/bin"
		if [ ! -x "$BINDIR/pg_ctl" ]; then
			apt_install "postgresql-$want"
		fi
		[ -x "$BINDIR/pg_ctl" ] || die "$DATA is a PostgreSQL $want cluster but $BINDIR/pg_ctl is missing"
		return
	fi
	if BINDIR="$(pg_bindir_with initdb)"; then return; fi
	if command -v initdb >/dev/null; then BINDIR="$(dirname "$(command -v initdb)")"; return; fi
	# Install without letting Debian create and start its own "main" cluster on
	# 5432: we only want the binaries (the same trick as the official Docker
	# image). postgresql-common ships createcluster.conf; flip the switch before
	# the server package's postinst runs. Only done when we install it ourselves.
	if [ ! -f /etc/postgresql-common/createcluster.conf ]; then
		apt_install postgresql-common
		if [ -f /etc/postgresql-common/createcluster.conf ]; then
			sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' \
				/etc/postgresql-common/createcluster.conf
		fi
	fi
	apt_install postgresql
	BINDIR="$(pg_bindir_with initdb)" || die "initdb not found under /usr/lib/postgresql/*/bin after installing postgresql"
}

# --- checks -------------------------------------------------------------------

# answers URL: the server behind URL accepts a connection and runs a query.
answers() {
	"$PSQL" "$1" -X -A -t -q -w -c 'select 1' </dev/null >/dev/null 2>&1
}

# wait_ready URL: pg_isready until it answers or WAIT_SECONDS pass.
wait_ready() {
	local url="$1" deadline=$((SECONDS + WAIT_SECONDS))
	until "$PG_ISREADY" -q -d "$url" -t 2 </dev/null; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 1
	done
}

# --- 1. DATABASE_URL ------------------------------------------------------------

if [ -n "${DATABASE_URL:-}" ]; then
	find_client
	log "using DATABASE_URL from the environment"
	wait_ready "$DATABASE_URL" || die "DATABASE_URL does not answer (pg_isready failed for ${WAIT_SECONDS}s)"
	if ! answers "$DATABASE_URL"; then
		"$PSQL" "$DATABASE_URL" -X -w -c 'select 1' </dev/null >/dev/null || true
		die "DATABASE_URL answers but 'select 1' failed (see psql's error above)"
	fi
	emit "$DATABASE_URL"
fi

# --- 2. an existing server on the probe port -----------------------------------

find_client
PROBE_URL="postgres://$PG_USER@127.0.0.1:$PROBE_PORT/postgres"
if "$PG_ISREADY" -q -h 127.0.0.1 -p "$PROBE_PORT" -t 3 </dev/null; then
	if answers "$PROBE_URL"; then
		log "using the PostgreSQL on 127.0.0.1:$PROBE_PORT"
		emit "$PROBE_URL"
	fi
	log "a server answers on 127.0.0.1:$PROBE_PORT but does not let $PG_USER in without a password; using a local cluster instead"
else
	log "no PostgreSQL on 127.0.0.1:$PROBE_PORT; using a local cluster in $DATA"
fi

# --- 3. our own cluster under .data/pg -----------------------------------------

LOCAL_URL="postgres://$PG_USER@127.0.0.1:$LOCAL_PORT/postgres"
AS_ROOT=0
[ "$(id -u)" = 0 ] && AS_ROOT=1

# as_pg CMD...: run CMD as the postgres system user when we are root
# (PostgreSQL refuses to run as root), from / so that its cwd is readable.
# fds 3 (our real stdout) and 9 (the lock) are closed for CMD: a server started
# by pg_ctl would otherwise keep them open for good, so "$(ensure-postgres.sh)"
# would never return and the lock would never be released.
as_pg() {
	if [ "$AS_ROOT" = 1 ]; then
		if command -v runuser >/dev/null; then
			(cd / && runuser -u "$PG_USER" -- "$@") 3>&- 9>&-
		else
			(cd / && su -s /bin/sh "$PG_USER" -c "$(printf '%q ' "$@")") 3>&- 9>&-
		fi
	else
		(cd / && "$@") 3>&- 9>&-
	fi
}

if [ "$AS_ROOT" = 1 ] && ! id -u "$PG_USER" >/dev/null 2>&1; then
	log "creating system user $PG_USER"
	useradd --system --user-group --home-dir /var/lib/postgresql --no-create-home \
		--shell /bin/bash "$PG_USER"
fi

mkdir -p "$(dirname "$DATA")"

# Serialize concurrent callers (two make targets at once) on the cluster.
if command -v flock >/dev/null; then
	exec 9>"$(dirname "$DATA")/.ensure-postgres.lock"
	flock -w "$((WAIT_SECONDS * 2))" 9 || die "timed out waiting for another ensure-postgres.sh"
fi

find_server
log "PostgreSQL binaries: $BINDIR"

if [ ! -d "$DATA" ]; then
	mkdir -m 0700 "$DATA"
fi
if [ "$AS_ROOT" = 1 ]; then
	chown -R "$PG_USER:" "$DATA"
	if ! as_pg test -r "$DATA" -a -w "$DATA" -a -x "$DATA"; then
		die "user $PG_USER cannot reach $DATA (a parent directory is not searchable by it); set QUEENGO_PG_DATA to a directory it can reach, or set DATABASE_URL"
	fi
fi
chmod 0700 "$DATA"

if [ ! -f "$DATA/PG_VERSION" ]; then
	locale=C
	if locale -a 2>/dev/null | grep -ix 'C\.utf-\?8' >/dev/null; then locale=C.UTF-8; fi
	log "initdb $DATA (locale $locale, encoding UTF8, trust auth)"
	as_pg env TZ=UTC "$BINDIR/initdb" -D "$DATA" --username="$PG_USER" --auth=trust \
		--encoding=UTF8 --locale="$locale" >/dev/null
fi

# Our settings live in their own file, rewritten on every run (so changes here
# apply at the next start) and included once from postgresql.conf.
cat >"$DATA/queengo.conf" <<EOF
# Written by .ci/ensure-postgres.sh on every run: edit that script, not this.
listen_addresses = '127.0.0.1'
port = $LOCAL_PORT
unix_socket_directories = ''   # TCP only: no clash with the system server's sockets
timezone = 'UTC'
log_timezone = 'UTC'

# Sized for a 2-core, 24 GiB box shared with the broker and the benchmarks.
max_connections = 200
shared_buffers = 256MB
effective_cache_size = 2GB
work_mem = 8MB
maintenance_work_mem = 128MB
wal_buffers = 16MB
max_wal_size = 2GB
min_wal_size = 256MB
checkpoint_completion_target = 0.9
random_page_cost = 1.1
max_worker_processes = 4
max_parallel_workers = 2
max_parallel_workers_per_gather = 1

# Durable commits: we benchmark with these on. Do not turn them off.
fsync = on
synchronous_commit = on
full_page_writes = on
EOF
if [ "$AS_ROOT" = 1 ]; then chown "$PG_USER:" "$DATA/queengo.conf"; fi
if ! grep -qx "include = 'queengo.conf'" "$DATA/postgresql.conf"; then
	printf "\ninclude = 'queengo.conf'\n" >>"$DATA/postgresql.conf"
fi

if as_pg "$BINDIR/pg_ctl" status -D "$DATA" >/dev/null 2>&1; then
	log "local cluster already running"
else
	if "$PG_ISREADY" -q -h 127.0.0.1 -p "$LOCAL_PORT" -t 2 </dev/null; then
		die "another server already listens on 127.0.0.1:$LOCAL_PORT (not $DATA); stop it, or set QUEENGO_PG_LOCAL_PORT or DATABASE_URL"
	fi
	log "starting local cluster on 127.0.0.1:$LOCAL_PORT (log: $DATA/server.log)"
	if ! as_pg "$BINDIR/pg_ctl" start -D "$DATA" -l "$DATA/server.log" -w -t "$WAIT_SECONDS" >/dev/null; then
		tail -n 30 "$DATA/server.log" 2>/dev/null || true
		die "pg_ctl start failed for $DATA"
	fi
fi

wait_ready "$LOCAL_URL" || { tail -n 30 "$DATA/server.log" 2>/dev/null || true; die "local cluster does not answer on 127.0.0.1:$LOCAL_PORT after ${WAIT_SECONDS}s"; }
answers "$LOCAL_URL" || die "local cluster answers but 'select 1' as $PG_USER failed"
log "local cluster ready (stop it with: runuser -u $PG_USER -- $BINDIR/pg_ctl stop -D $DATA)"
emit "$LOCAL_URL"
