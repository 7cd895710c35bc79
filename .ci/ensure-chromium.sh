#!/usr/bin/env bash
# ensure-chromium.sh: make sure a Chromium the dashboard's browser test
# (http/e2e/dashboardtest) can drive is installed, then print its path as
# the last (and only) line on stdout; progress goes to stderr, so callers can do
#
#     QUEENGO_CHROMIUM="$(.ci/ensure-chromium.sh)"
#
# Which browser, in order:
#   1. $QUEENGO_CHROMIUM, if set: used as is, after checking it runs.
#   2. chromium on PATH (Debian's package installs /usr/bin/chromium).
#   3. Debian's chromium package, installed with apt-get (needs root).
set -euo pipefail

exec 3>&1 1>&2

log() { printf 'ensure-chromium: %s\n' "$*"; }
die() { printf 'ensure-chromium: error: %s\n' "$*"; exit 1; }

# runs BIN: the binary starts and reports its version (a wrapper script with
# no browser behind it does not).
runs() { "$1" --version </dev/null >/dev/null 2>&1; }

if [ -n "${QUEENGO_CHROMIUM:-}" ]; then
	runs "$QUEENGO_CHROMIUM" || die "QUEENGO_CHROMIUM=$QUEENGO_CHROMIUM does not run"
	printf '%s\n' "$QUEENGO_CHROMIUM" >&3
	exit 0
fi

bin="$(command -v chromium || true)"
if [ -z "$bin" ] || ! runs "$bin"; then
	command -v apt-get >/dev/null || die "no chromium and no apt-get; install Chromium or set QUEENGO_CHROMIUM"
	[ "$(id -u)" = 0 ] || die "need root to apt-get install chromium; install it or set QUEENGO_CHROMIUM"
	export DEBIAN_FRONTEND=noninteractive
	log "apt-get update"
	apt-get -q -o DPkg::Lock::Timeout=300 update </dev/null
	log "apt-get install chromium"
	apt-get -y -q -o DPkg::Lock::Timeout=300 install --no-install-recommends chromium </dev/null
	hash -r
	bin="$(command -v chromium || true)"
	[ -n "$bin" ] && runs "$bin" || die "chromium still missing or broken after apt-get install"
fi
log "using $("$bin" --version 2>/dev/null) at $bin"
printf '%s\n' "$bin" >&3
