# runlib.sh: the helpers of the measurement scripts (bench/results/aims.sh;
# the dated ones are in git history, 4404d0b:docs/benchmarks/). Source it after setting OUT,
# the folder the JSON goes to. server T DB starts /tmp/qg-T (a queengo build)
# or, for T=ref, the reference Queen server, on a fresh database with
# track_functions=pl; stop DB NAME writes the run's pg_stat_user_functions and
# transaction count to $OUT/NAME.pgstat, a queengo server's own claim, commit
# and ack figures (its /metrics/prometheus, whole run) to $OUT/NAME.metrics,
# and drops the database; run KIND T
# NAME args... runs one /tmp/bench scenario against a fresh server into
# $OUT/KIND-NAME-T.json. One server at a time, so runs never share the machine.
# /tmp/bench is the harness, built at the repository root with
# `go -C bench build -o /tmp/bench .` (bench/ is a module of its own).
PG=postgres://postgres@127.0.0.1:5432
B=/tmp/bench
# The reference lives beside the repository (../shared/reference, bench/README.md).
REF=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../shared/reference" && pwd)/run.sh
server() { # T DB -> sets URL, SP
  local T=$1 DB=$2 i
  psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB" -c "create database $DB" \
    -c "alter database $DB set track_functions='pl'" >/dev/null 2>&1
  if [ $T = ref ]; then
    # Without OUT: the reference's run.sh reads it as its own folder.
    env -u OUT $REF 6633 $DB >/tmp/ref-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6633
  else
    DATABASE_URL="$PG/$DB" PORT=6640 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-$T >/tmp/qg-$DB.log 2>&1 & SP=$!; URL=http://127.0.0.1:6640
  fi
  for i in $(seq 100); do curl -sf $URL/health >/dev/null && break; sleep 0.2; done
  sleep 1
}
stop() { # DB NAME: the per-function figures, then the server and the database go
  psql -h 127.0.0.1 -U postgres -d $1 -Atc "select funcname, calls, round(self_time::numeric, 1)
    from pg_stat_user_functions where funcname in ('claim_take', 'claim_read', 'ack', 'ack_spans', 'append_segments')" \
    -c "select 'xacts', xact_commit + xact_rollback from pg_stat_database where datname = '$1'" > $OUT/$2.pgstat 2>&1
  if [ $URL = http://127.0.0.1:6640 ]; then
    curl -s $URL/metrics/prometheus | grep -E '^queengo_(claim|commit|ack)_[a-z_]*(_sum|_count|_total) ' > $OUT/$2.metrics
  fi
  kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database if exists $1" >/dev/null 2>&1
}
label() { [ $1 = ref ] && echo queen-cpp || echo queengo-$1; }
run() { # KIND T NAME args...
  local K=$1 T=$2 N=$3; shift 3; local DB=fin_${T}_$RANDOM
  server $T $DB
  echo "$(date -u +%T) $K $N $T load=$(cut -d' ' -f1 /proc/loadavg)"
  # A long --interval keeps progress lines out of the runs, but idle takes
  # its samples (parked polls, /health, connections) at each progress line.
  local IV=100s; [ $K = idle ] && IV=1s
  $B $K --url $URL --label $(label $T) --pg-url $PG/$DB --interval $IV --json $OUT/$K-$N-$T.json "$@" >/dev/null 2>&1
  stop $DB $K-$N-$T
}
