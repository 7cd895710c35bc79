// Analytics (#/analytics): the collector's history over a range the user
// picks (docs/api-admin.md "The analytics routes"): throughput, lag, parked
// consumers and new dead letters of every queue or of one, each queue's
// figures side by side, and the broker processes' CPU, memory, pool and
// requests. The dead letters of the range are counted by the DLQ list
// (docs/api.md "Dead letters"), exact whatever the sampling.
import { useState } from 'preact/hooks';
import { api, qs } from '../lib/api.js';
import { Chart, pivotOf, seriesOf, sumByTime } from '../lib/chart.js';
import { fmtAge, fmtBytes, fmtInt, fmtRate, fmtTime } from '../lib/format.js';
import { html, REFRESH_MS, usePoll } from '../lib/ui.js';
import { Failure, Stat } from '../lib/widgets.js';

// RANGES are the windows offered, in seconds; the API cuts each into about
// 60 buckets of whole minutes (the first ones into minutes).
const RANGES = [['15 min', 900], ['1 h', 3600], ['6 h', 21600], ['24 h', 86400], ['7 d', 604800]];

// refreshOf is how often a range is read again (ms): a read costs the
// samples of the whole range (every busy queue's), and a new bucket comes
// only every range/60, so a longer range is read less often: every 5 s
// at 15 min, 10 s at an hour, 4 min at a day, 28 min at a week.
const refreshOf = (range) => Math.max(REFRESH_MS, (range * 1000) / 360);

// newDeadLetters is, per point of a queue series, the growth of its
// dead-letter count since the point before, per minute: the messages
// dead-lettered, less those requeued or deleted meanwhile (0 when more
// left than came). The first point has no point before it.
function newDeadLetters(series, bucketSeconds) {
  return series.map((p, i) => ({
    timestamp: p.timestamp,
    perMinute: i === 0 ? null : (Math.max(p.deadLetters - series[i - 1].deadLetters, 0) * 60) / bucketSeconds,
  }));
}

// perQueue sums each queue's buckets of the reference-shaped queue-ops
// answer: messages in, handed out and committed, the largest parked count
// and time lag, the last partition count; busiest first.
function perQueue(ops) {
  const by = new Map();
  for (const p of ops.series) {
    const q = by.get(p.queueName) || by.set(p.queueName, { name: p.queueName, push: 0, pop: 0, ack: 0, parked: 0, lag: 0, partitions: null }).get(p.queueName);
    q.push += p.pushMessages;
    q.pop += p.popMessages;
    q.ack += p.ackSuccess;
    q.parked = Math.max(q.parked, p.parkedCount || 0);
    q.lag = Math.max(q.lag, p.maxLagMs || 0);
    if (p.partitionCount !== null) q.partitions = p.partitionCount;
  }
  return [...by.values()].sort((a, b) => b.push - a.push || (a.name < b.name ? -1 : 1));
}

export function Analytics() {
  const [range, setRange] = useState(3600);
  const [queue, setQueue] = useState('');
  const [{ data, error }] = usePoll(async () => {
    const from = new Date(Date.now() - range * 1000).toISOString();
    const mine = { from, format: 'queengo' };
    const [queues, ops, parked, dlq, refOps, system, workers] = await Promise.all([
      api('/api/v1/resources/queues?limit=1000'),
      api('/api/v1/analytics/queue-ops' + qs({ ...mine, queue })),
      api('/api/v1/analytics/queue-parked-replicas' + qs({ ...mine, queue })),
      api('/api/v1/dlq' + qs({ queue, from, limit: 1 })),
      api('/api/v1/analytics/queue-ops' + qs({ from })),
      api('/api/v1/analytics/system-metrics' + qs(mine)),
      api('/api/v1/analytics/worker-metrics' + qs(mine)),
    ]);
    return { queues, ops, parked, dlq, rows: perQueue(refOps), system, workers };
  }, [range, queue], refreshOf(range));
  const controls = html`<div class="filters" data-test="an-controls">
    <div class="segmented" role="group" aria-label="Range">${RANGES.map(([label, sec]) => html`<button type="button"
      class=${sec === range ? 'active' : ''} aria-pressed=${sec === range} data-range=${sec} onClick=${() => setRange(sec)}>${label}</button>`)}</div>
    <select aria-label="Queue" data-test="an-queue" value=${queue} onChange=${(e) => setQueue(e.target.value)}>
      <option value="">All queues</option>
      ${data && data.queues.queues.map((q) => html`<option value=${q.name}>${q.name}</option>`)}
    </select>
  </div>`;
  if (!data) return html`${controls}<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const { ops, parked, dlq, rows, system, workers } = data;
  const s = ops.series;
  const sum = (f) => s.reduce((a, p) => a + (p[f] || 0), 0);
  const peak = (f) => s.reduce((a, p) => Math.max(a, p[f] || 0), 0);
  const parkedSum = sumByTime(parked.series, ['parked']);
  const requests = sumByTime(workers.series, ['pushRequests', 'popRequests', 'ackRequests'])
    .map((p) => ({ ...p, push: p.pushRequests / workers.bucketSeconds, pop: p.popRequests / workers.bucketSeconds, ack: p.ackRequests / workers.bucketSeconds }));
  const cpu = pivotOf(workers.series, (p) => p.workerId, (p) => p.cpuPercent);
  const rss = pivotOf(workers.series, (p) => p.workerId, (p) => p.rssBytes / 1048576);
  const who = queue || 'all queues';
  const instances = new Map();
  for (const p of workers.series) {
    const w = instances.get(p.workerId) || instances.set(p.workerId, { id: p.workerId, hostname: p.hostname, pid: p.pid, cpu: 0, n: 0, rss: 0, push: 0, pop: 0, ack: 0, last: '' }).get(p.workerId);
    w.cpu += p.cpuPercent;
    w.n++;
    w.rss = Math.max(w.rss, p.rssBytes);
    w.push += p.pushRequests;
    w.pop += p.popRequests;
    w.ack += p.ackRequests;
    if (p.timestamp > w.last) w.last = p.timestamp;
  }
  return html`${controls}<${Failure} error=${error} />
  <section class="stats" data-range=${range} data-queue=${queue}>
    <${Stat} label="Messages in" value=${fmtInt(sum('ingested'))} test="an-in" sub=${who} />
    <${Stat} label="Messages out" value=${fmtInt(sum('processed'))} test="an-out" sub="committed by a group" />
    <${Stat} label="Peak lag" value=${fmtInt(peak('offsetLag'))} test="an-lag" sub="messages behind, all groups" />
    <${Stat} label="Oldest waiting" value=${fmtAge(peak('maxLagMs') / 1000)} test="an-time-lag" sub="largest time lag" />
    <${Stat} label="Peak parked" value=${fmtInt(parkedSum.reduce((a, p) => Math.max(a, p.parked), 0))} test="an-parked" sub="long polls waiting" />
    <${Stat} label="Dead-lettered" value=${fmtInt(dlq.total)} test="an-dlq" tone=${dlq.total ? 'warn' : ''}
      sub="in the range, still listed" />
  </section>
  <section class="charts">
    <${Chart} title=${'Messages per second, ' + who} test="an-chart-throughput" span=${range}
      labels=${['in', 'out (committed)', 'popped']} data=${seriesOf(s, ['ingestedPerSecond', 'processedPerSecond', 'popPerSecond'])} />
    <${Chart} title=${'Messages behind, ' + who} test="an-chart-lag" span=${range}
      labels=${['behind (all groups)', 'pending']} data=${seriesOf(s, ['offsetLag', 'pending'])} />
    <${Chart} title=${'Oldest unconsumed message (s), ' + who} test="an-chart-time-lag" span=${range}
      labels=${['largest', 'average']} data=${seriesOf(s.map((p) => ({ timestamp: p.timestamp, max: p.maxLagMs / 1000, avg: p.avgLagMs / 1000 })), ['max', 'avg'])} />
    <${Chart} title=${'Parked consumers, ' + who} test="an-chart-parked" span=${range}
      labels=${['parked long polls']} data=${seriesOf(parkedSum, ['parked'])} />
    <${Chart} title=${'New dead letters per minute, ' + who} test="an-chart-dlq" span=${range}
      labels=${['dead-lettered']} data=${seriesOf(newDeadLetters(s, ops.bucketSeconds), ['perMinute'])} />
  </section>
  <h2>Per queue</h2>
  ${rows.length === 0 ? html`<p class="muted">No queue sampled in this range.</p>` : html`<div class="table-wrap"><table data-test="an-queues">
    <thead><tr><th>Queue</th><th class="num">In</th><th class="num">Handed out</th><th class="num">Committed</th>
      <th class="num">Peak parked</th><th class="num">Oldest waiting</th><th class="num">Partitions</th></tr></thead>
    <tbody>${rows.map((q) => html`<tr key=${q.name} data-queue=${q.name} class=${q.name === queue ? 'selected' : ''}>
      <td><a href="#/analytics" onClick=${(e) => { e.preventDefault(); setQueue(q.name === queue ? '' : q.name); }}>${q.name}</a></td>
      <td class="num" data-col="push">${fmtInt(q.push)}</td><td class="num" data-col="pop">${fmtInt(q.pop)}</td>
      <td class="num" data-col="ack">${fmtInt(q.ack)}</td><td class="num">${fmtRate(q.parked)}</td>
      <td class="num">${fmtAge(q.lag / 1000)}</td><td class="num">${fmtInt(q.partitions)}</td></tr>`)}</tbody>
  </table></div>`}
  <h2>Broker processes</h2>
  <section class="charts">
    <${Chart} title="CPU % per process" test="an-chart-cpu" span=${range} labels=${cpu.labels} data=${cpu.data} />
    <${Chart} title="Memory per process (MiB, resident)" test="an-chart-memory" span=${range} labels=${rss.labels} data=${rss.data} />
    <${Chart} title="Database pool, all processes" test="an-chart-pool" span=${range}
      labels=${['open', 'in use', 'idle']} data=${seriesOf(system.series, ['poolTotal', 'poolAcquired', 'poolIdle'])} />
    <${Chart} title="Requests per second, all processes" test="an-chart-requests" span=${range}
      labels=${['push', 'pop', 'ack']} data=${seriesOf(requests, ['push', 'pop', 'ack'])} />
  </section>
  <div class="table-wrap"><table data-test="an-workers">
    <thead><tr><th>Process</th><th>Host</th><th class="num">PID</th><th class="num">Average CPU %</th><th class="num">Peak memory</th>
      <th class="num">Push requests</th><th class="num">Pop requests</th><th class="num">Ack requests</th><th>Last sample</th></tr></thead>
    <tbody>${[...instances.values()].map((w) => html`<tr key=${w.id} data-worker=${w.id}>
      <td>${w.id}</td><td>${w.hostname}</td><td class="num">${w.pid}</td><td class="num">${fmtRate(w.cpu / w.n)}</td>
      <td class="num">${fmtBytes(w.rss)}</td><td class="num" data-col="push">${fmtInt(w.push)}</td>
      <td class="num" data-col="pop">${fmtInt(w.pop)}</td><td class="num" data-col="ack">${fmtInt(w.ack)}</td>
      <td>${fmtTime(w.last)}</td></tr>`)}</tbody>
  </table></div>`;
}
