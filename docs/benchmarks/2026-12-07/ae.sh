#!/usr/bin/env bash
# docs/benchmarks.md, "2026-12-07": where an end-to-end run's statements
# spend their time. One e2e run at 5,000 msg/s (pushes of one, 10 consumers
# popping up to 100 from any partition) against /tmp/qg-new, its database
# with auto_explain: every statement over 1.5 ms, nested ones too, with
# ANALYZE and buffers. The plans go to /tmp/ae.log (the server's log since
# the run began, about 250k lines); a summary per statement (count, total
# and mean ms, rows removed by join filters per call) to standard output.
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
PG=postgres://postgres@127.0.0.1:5432; DB=ae_$RANDOM
psql -h 127.0.0.1 -U postgres -qc "create database $DB" -c "alter database $DB set session_preload_libraries='auto_explain'" \
  -c "alter database $DB set auto_explain.log_min_duration='1.5ms'" -c "alter database $DB set auto_explain.log_nested_statements=on" \
  -c "alter database $DB set auto_explain.log_analyze=on" -c "alter database $DB set auto_explain.log_buffers=on" >/dev/null
L=/var/log/postgresql/postgresql-15-main.log; S=$(stat -c %s $L)
DATABASE_URL="$PG/$DB" PORT=6651 FILE_BUFFER_DIR=off LOG_LEVEL=warn /tmp/qg-new >/dev/null 2>&1 & SP=$!
for i in $(seq 100); do curl -sf http://127.0.0.1:6651/health >/dev/null && break; sleep 0.2; done
/tmp/bench e2e --url http://127.0.0.1:6651 --pg-url $PG/$DB --interval 100s --rate 5000 --batch 1 --pop-partitions 0 --duration 10s >/dev/null 2>&1
kill $SP; wait $SP 2>/dev/null; psql -h 127.0.0.1 -U postgres -qc "drop database $DB"
tail -c +$((S + 1)) $L > /tmp/ae.log
python3 - /tmp/ae.log <<'PY'
import re, sys, collections
ents = re.split(r'\n(?=\S+ \S+ UTC \[\d+\] \S+ LOG:  duration:)', open(sys.argv[1]).read())
agg = collections.defaultdict(lambda: [0, 0.0, 0])
for e in ents:
    m = re.search(r'duration: ([\d.]+) ms\s+plan:\s*\n\s*Query Text: (.*)', e)
    if not m:
        continue
    a = agg[m.group(2).strip()[:80]]
    a[0] += 1; a[1] += float(m.group(1))
    a[2] += sum(int(x) for x in re.findall(r'Rows Removed by Join Filter: (\d+)', e[:e.find('CONTEXT')]))
for q, (n, t, j) in sorted(agg.items(), key=lambda x: -x[1][1])[:15]:
    print(f"{n:6d} {t:9.1f} ms {t / n:6.2f} ms/call join-filter rows/call {j // n:6d}  {q}")
PY
