// The queengo dashboard: one page, hash-routed (#/, #/queues, #/queues/NAME,
// #/groups, #/message/PARTITION/TXID), that reads only the public HTTP API
// (docs/api.md) with the token the user gives it. Preact renders, htm
// stands in for JSX (no build step), uPlot draws the charts.
import { h, render, createContext } from 'preact';
import { useState, useEffect, useRef, useContext, useMemo, useCallback } from 'preact/hooks';
import htm from 'htm';

const html = htm.bind(h);
const uPlot = window.uPlot;

// REFRESH_MS is how often a page reads its figures again: often enough to
// watch a backlog drain, rare enough that a few open tabs cost the broker
// nothing measurable (a page makes 3 to 6 reads a refresh).
const REFRESH_MS = 5000;
// MESSAGE_PREVIEWS is how many recent messages a queue page opens to show
// their payload and per-group status: one read each, every refresh.
const MESSAGE_PREVIEWS = 12;
// LAG_SAMPLES bounds the per-group lag chart (10 minutes at REFRESH_MS).
const LAG_SAMPLES = 120;
const TOKEN_KEY = 'queengo.token';

// ---------------------------------------------------------------- API

class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let token = localStorage.getItem(TOKEN_KEY) || '';
const unauthorizedListeners = new Set();

// api calls the broker and returns the decoded answer; a refusal throws an
// APIError carrying the API's own {"error"} text. A 401 also tells the app,
// which asks for a token again.
async function api(path, { method = 'GET', body } = {}) {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new APIError(0, 'broker unreachable: ' + e.message);
  }
  let data = null;
  const text = await r.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!r.ok) {
    const err = new APIError(r.status, (data && data.error) || `${r.status} ${r.statusText}`);
    if (r.status === 401) unauthorizedListeners.forEach((f) => f(err));
    throw err;
  }
  return data;
}

const enc = encodeURIComponent;
const qs = (params) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
};

// ---------------------------------------------------------------- formatting

const fmtInt = (n) => (n === null || n === undefined ? '–' : Math.round(Number(n)).toLocaleString('en-US'));
const fmtRate = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 }));
function fmtAge(sec) {
  if (sec === null || sec === undefined) return '–';
  sec = Math.round(sec);
  if (sec < 60) return sec + ' s';
  if (sec < 3600) return Math.floor(sec / 60) + ' min ' + (sec % 60) + ' s';
  if (sec < 86400) return Math.floor(sec / 3600) + ' h ' + Math.floor((sec % 3600) / 60) + ' min';
  return Math.floor(sec / 86400) + ' d ' + Math.floor((sec % 86400) / 3600) + ' h';
}
function fmtTime(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}
const fmtBytes = (n) => (n === null || n === undefined ? '–' : (n / 1048576).toFixed(1) + ' MiB');
function preview(v, max = 120) {
  if (v === undefined) return '';
  const s = JSON.stringify(v);
  return s.length > max ? s.slice(0, max) + '…' : s;
}
// seriesOf turns an analytics series into uPlot's columns: seconds, then
// one column per field.
function seriesOf(points, fields) {
  const cols = [points.map((p) => Date.parse(p.timestamp) / 1000)];
  for (const f of fields) cols.push(points.map((p) => (p[f] === undefined ? null : p[f])));
  return cols;
}

// ---------------------------------------------------------------- app state

// UI is what every page needs from the app: whether admin actions are
// allowed, the confirmation dialog and the notices.
const UI = createContext(null);

// usePoll runs load now and then every REFRESH_MS while live refresh is on,
// skipping the reads while the tab is hidden, and keeps the last data
// through a failed read. reload reads again at once.
function usePoll(load, deps) {
  const { live } = useContext(UI);
  const [state, setState] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    let stopped = false;
    let first = true;
    let timer;
    const run = async () => {
      if (first || !document.hidden) {
        first = false;
        try {
          const data = await load();
          if (!stopped) setState({ data, error: null });
        } catch (e) {
          if (!stopped) setState((s) => ({ data: s.data, error: e }));
        }
      }
      if (!stopped && live) timer = setTimeout(run, REFRESH_MS);
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, n, live]);
  return [state, useCallback(() => setN((x) => x + 1), [])];
}

// useSort sorts rows by the column the user picks (a header click; again
// to reverse), text columns ascending first, numbers descending first.
function useSort(rows, initial) {
  const [sort, setSort] = useState({ col: initial, dir: 1 });
  const sorted = useMemo(() => {
    if (!rows) return [];
    const out = [...rows];
    out.sort((a, b) => {
      const x = a[sort.col];
      const y = b[sort.col];
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
    return out;
  }, [rows, sort]);
  const Th = ({ col, children, num }) => html`<th class=${num ? 'num sortable' : 'sortable'} data-sort=${col}
      aria-sort=${sort.col === col ? (sort.dir > 0 ? 'ascending' : 'descending') : 'none'}
      onClick=${() => setSort((s) => ({ col, dir: s.col === col ? -s.dir : num ? -1 : 1 }))}>${children}${
    sort.col === col ? (sort.dir > 0 ? ' ▲' : ' ▼') : ''
  }</th>`;
  return [sorted, Th];
}

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const f = () => setHash(location.hash);
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  const parts = hash.replace(/^#\/?/, '').split('?')[0].split('/').filter(Boolean).map(decodeURIComponent);
  return parts;
}

// ---------------------------------------------------------------- widgets

function Stat({ label, value, test, sub, tone }) {
  return html`<div class=${'stat ' + (tone || '')}>
    <div class="stat-label">${label}</div>
    <div class="stat-value" data-test=${test}>${value}</div>
    ${sub && html`<div class="stat-sub">${sub}</div>`}
  </div>`;
}

function Failure({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.status ? error.status + ': ' : ''}${error.message}</p>`;
}

const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

// Chart draws time series with uPlot: data is [seconds[], ...values[]],
// one labels entry per value column. The x axis always spans the last
// `span` seconds up to now, however few points there are.
function Chart({ title, labels, data, span = 3600, height = 200, test }) {
  const el = useRef(null);
  const plot = useRef(null);
  const key = labels.join('\u0000');
  useEffect(() => {
    const node = el.current;
    const ink = getComputedStyle(node).color;
    const opts = {
      width: Math.max(node.clientWidth, 200),
      height,
      series: [{}, ...labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
      axes: [{ stroke: ink }, { size: 56, stroke: ink }],
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: () => [Date.now() / 1000 - span, Date.now() / 1000] } },
    };
    const u = new uPlot(opts, data, node);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(node.clientWidth, 200), height }));
    ro.observe(node);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [key, height, span]);
  useEffect(() => {
    if (plot.current) plot.current.setData(data);
  }, [data]);
  return html`<figure class="chart" data-test=${test}>
    <figcaption>${title}</figcaption>
    <div class="chart-area" ref=${el}></div>
  </figure>`;
}

function StatusBadge({ status }) {
  return html`<span class=${'badge ' + String(status).toLowerCase()}>${status}</span>`;
}

const queueLink = (name) => html`<a href=${'#/queues/' + enc(name)}>${name}</a>`;
const messageHref = (pid, tx) => '#/message/' + enc(pid) + '/' + enc(tx);

// ConfirmDialog runs req.run once the user confirms; it stays open with the
// API's error text when the action fails.
function ConfirmDialog({ req, close }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const { notify } = useContext(UI);
  const ok = useRef(null);
  useEffect(() => {
    ok.current.focus();
    const esc = (e) => e.key === 'Escape' && close();
    addEventListener('keydown', esc);
    return () => removeEventListener('keydown', esc);
  }, []);
  async function go() {
    setBusy(true);
    try {
      const res = await req.run();
      close();
      notify(req.done ? req.done(res) : 'Done');
      if (req.after) req.after();
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  }
  return html`<div class="backdrop" onClick=${(e) => e.target === e.currentTarget && close()}>
    <div class="modal" role="dialog" aria-modal="true" aria-labelledby="confirm-title" data-test="confirm">
      <h3 id="confirm-title">${req.title}</h3>
      <p>${req.body}</p>
      <${Failure} error=${error} />
      <div class="actions">
        <button type="button" onClick=${close}>Cancel</button>
        <button type="button" class="danger" ref=${ok} data-test="confirm-ok" disabled=${busy} onClick=${go}>
          ${busy ? 'Working…' : req.confirm || 'Confirm'}
        </button>
      </div>
    </div>
  </div>`;
}

// ---------------------------------------------------------------- pages

// The two maintenance switches (docs/api.md, "Maintenance"): what each
// route is, which field of its answer holds the switch, and what the
// confirmation says.
const SWITCHES = {
  pop: {
    path: '/api/v1/system/maintenance/pop', field: 'popMaintenanceMode', test: 'maintenance-toggle',
    onLabel: 'Pause pops', offLabel: 'Resume pops', onTitle: 'Pause every pop?', offTitle: 'Resume pops?',
    onBody: 'Pop maintenance makes every broker answer pops with nothing until it is switched off. Pushes keep working.',
    offBody: 'Consumers will receive messages again.',
  },
  push: {
    path: '/api/v1/system/maintenance', field: 'maintenanceMode', test: 'push-maintenance-toggle',
    onLabel: 'Buffer pushes', offLabel: 'Replay buffer', onTitle: 'Send every push to the file buffer?',
    offTitle: 'Write pushes to PostgreSQL again?',
    onBody: 'Push maintenance makes every broker write pushes to its local file buffer (answered "buffered") ' +
      'until it is switched off, for example during a database migration. Pops and acks keep working.',
    offBody: 'Each broker replays its buffered pushes into PostgreSQL, in order, and writes new pushes there again.',
  },
};

function MaintenanceSwitch({ kind = 'pop', on, after }) {
  const { ask } = useContext(UI);
  const sw = SWITCHES[kind];
  const turn = !on;
  return html`<button type="button" class=${turn ? 'danger' : ''} data-test=${sw.test}
    onClick=${() =>
      ask({
        title: turn ? sw.onTitle : sw.offTitle,
        body: turn ? sw.onBody : sw.offBody,
        confirm: turn ? sw.onLabel : sw.offLabel,
        run: () => api(sw.path, { method: 'POST', body: { enabled: turn } }),
        done: (r) => r.message,
        after,
      })}>${turn ? sw.onLabel : sw.offLabel}</button>`;
}

function Overview() {
  const { canAdmin } = useContext(UI);
  const [{ data, error }, reload] = usePoll(async () => {
    const [ov, st, dlq, health, ops, groups, maint] = await Promise.all([
      api('/api/v1/resources/overview'),
      api('/api/v1/status'),
      api('/api/v1/dlq?limit=1'),
      api('/health').catch((e) => ({ status: 'unhealthy', database: e.message })),
      api('/api/v1/analytics/queue-ops'),
      api('/api/v1/consumer-groups?limit=10000'),
      canAdmin ? api('/api/v1/system/maintenance') : null,
    ]);
    return { ov, st, dlq, health, ops, groups, maint };
  }, [canAdmin]);
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const { ov, st, dlq, health, ops, groups, maint } = data;
  const last = ops.series.length ? ops.series[ops.series.length - 1] : {};
  const totalLag = groups.reduce((a, g) => a + g.totalLag, 0);
  const parked = (st.workers || []).reduce((a, w) => a + (w.parked || 0), 0);
  const lagging = groups.filter((g) => g.state === 'Lagging').length;
  const healthy = health.status === 'healthy';
  return html`<${Failure} error=${error} />
  <section class="stats">
    <${Stat} label="Queues" value=${fmtInt(ov.queues)} test="ov-queues" sub=${fmtInt(ov.partitions) + ' partitions'} />
    <${Stat} label="Messages" value=${fmtInt(ov.messages.total)} test="ov-messages"
      sub=${fmtInt(ov.messages.pending) + ' pending, ' + fmtInt(ov.messages.processing) + ' processing'} />
    <${Stat} label="In / s" value=${fmtRate(last.ingestedPerSecond)} test="ov-in" sub="last minute" />
    <${Stat} label="Out / s" value=${fmtRate(last.processedPerSecond)} test="ov-out" sub="last minute" />
    <${Stat} label="Total lag" value=${fmtInt(totalLag)} test="ov-lag" tone=${lagging ? 'warn' : ''}
      sub=${lagging + ' lagging group' + (lagging === 1 ? '' : 's')} />
    <${Stat} label="Dead letters" value=${fmtInt(dlq.total)} test="ov-dlq" tone=${dlq.total ? 'warn' : ''} />
    <${Stat} label="Parked consumers" value=${fmtInt(parked)} test="ov-parked" sub="long polls waiting" />
    <${Stat} label="Database" value=${healthy ? 'healthy' : 'unhealthy'} test="ov-db" tone=${healthy ? 'ok' : 'bad'}
      sub=${health.database} />
    <${Stat} label="Pop maintenance" test="ov-maintenance"
      value=${maint ? (maint.popMaintenanceMode ? 'ON' : 'off') : 'admin only'}
      tone=${maint && maint.popMaintenanceMode ? 'bad' : ''}
      sub=${maint && html`<${MaintenanceSwitch} on=${maint.popMaintenanceMode} after=${reload} />`} />
    <${Stat} label="Push maintenance" test="ov-push-maintenance"
      value=${maint ? (maint.maintenanceMode ? 'ON' : 'off') : 'admin only'}
      tone=${maint && maint.maintenanceMode ? 'warn' : ''}
      sub=${maint && html`${fmtInt(maint.bufferedMessages)} buffered${maint.bufferHealthy ? '' : ', buffer unhealthy'}
        <${MaintenanceSwitch} kind="push" on=${maint.maintenanceMode} after=${reload} />`} />
  </section>
  <section class="charts">
    <${Chart} title="Messages per second, last hour" test="ov-chart-throughput"
      labels=${['in', 'out (acked)', 'popped']}
      data=${seriesOf(ops.series, ['ingestedPerSecond', 'processedPerSecond', 'popPerSecond'])} />
    <${Chart} title="Messages behind and pending, last hour" test="ov-chart-lag" labels=${['behind (all groups)', 'pending']}
      data=${seriesOf(ops.series, ['offsetLag', 'pending'])} />
  </section>
  <h2>Broker processes</h2>
  <div class="table-wrap"><table data-test="ov-workers">
    <thead><tr><th>Instance</th><th class="num">CPU %</th><th class="num">Memory</th><th class="num">Goroutines</th>
      <th class="num">Parked</th><th class="num">Pool in use</th><th>Sampled</th></tr></thead>
    <tbody>${(st.workers || []).map((w) => html`<tr key=${w.workerId}>
      <td>${w.workerId}</td><td class="num">${fmtRate(w.cpuPercent)}</td><td class="num">${fmtBytes(w.rssBytes)}</td>
      <td class="num">${fmtInt(w.goroutines)}</td><td class="num">${fmtInt(w.parked)}</td>
      <td class="num">${fmtInt(w.poolAcquired)}</td><td>${fmtTime(w.timestamp)}</td></tr>`)}</tbody>
  </table></div>`;
}

function Queues() {
  const [{ data, error }] = usePoll(async () => {
    const [qs, groups] = await Promise.all([api('/api/v1/resources/queues?limit=1000'), api('/api/v1/consumer-groups?limit=10000')]);
    const byQueue = {};
    for (const g of groups) {
      const b = (byQueue[g.queueName] ||= { groups: 0, lag: 0, timeLag: 0 });
      b.groups++;
      b.lag = Math.max(b.lag, g.totalLag);
      b.timeLag = Math.max(b.timeLag, g.maxTimeLag);
    }
    return {
      total: qs.total,
      rows: qs.queues.map((q) => ({ ...q, pending: q.messages.pending, processing: q.messages.processing,
        total: q.messages.total, ...(byQueue[q.name] || { groups: 0, lag: 0, timeLag: 0 }) })),
    };
  }, []);
  const [text, setText] = useState('');
  const [ns, setNs] = useState('');
  const [task, setTask] = useState('');
  const rows = data ? data.rows : null;
  const filtered = useMemo(
    () => rows && rows.filter((q) => q.name.includes(text) && (!ns || q.namespace === ns) && (!task || q.task === task)),
    [rows, text, ns, task],
  );
  const [sorted, Th] = useSort(filtered, 'name');
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const namespaces = [...new Set(rows.map((q) => q.namespace).filter(Boolean))].sort();
  const tasks = [...new Set(rows.map((q) => q.task).filter(Boolean))].sort();
  return html`<${Failure} error=${error} />
  <div class="filters">
    <input type="search" placeholder="Filter by name" aria-label="Filter by name" data-test="queues-filter"
      value=${text} onInput=${(e) => setText(e.target.value)} />
    <select aria-label="Namespace" data-test="queues-ns" value=${ns} onChange=${(e) => setNs(e.target.value)}>
      <option value="">All namespaces</option>${namespaces.map((n) => html`<option value=${n}>${n}</option>`)}
    </select>
    <select aria-label="Task" data-test="queues-task" value=${task} onChange=${(e) => setTask(e.target.value)}>
      <option value="">All tasks</option>${tasks.map((n) => html`<option value=${n}>${n}</option>`)}
    </select>
    <span class="muted" data-test="queues-count">${sorted.length} of ${data.total} queues</span>
  </div>
  <div class="table-wrap"><table data-test="queues-table">
    <thead><tr><${Th} col="name">Queue<//><${Th} col="namespace">Namespace<//><${Th} col="task">Task<//>
      <${Th} col="partitions" num>Partitions<//><${Th} col="total" num>Messages<//><${Th} col="pending" num>Pending<//>
      <${Th} col="processing" num>Processing<//><${Th} col="groups" num>Groups<//><${Th} col="lag" num>Max group lag<//>
      <${Th} col="timeLag" num>Oldest waiting<//></tr></thead>
    <tbody>${sorted.map((q) => html`<tr key=${q.id} data-queue=${q.name}>
      <td>${queueLink(q.name)}</td><td>${q.namespace}</td><td>${q.task}</td>
      <td class="num" data-col="partitions">${fmtInt(q.partitions)}</td><td class="num" data-col="total">${fmtInt(q.total)}</td>
      <td class="num" data-col="pending">${fmtInt(q.pending)}</td><td class="num" data-col="processing">${fmtInt(q.processing)}</td>
      <td class="num" data-col="groups">${fmtInt(q.groups)}</td><td class="num" data-col="lag">${fmtInt(q.lag)}</td>
      <td class="num">${fmtAge(q.timeLag)}</td></tr>`)}</tbody>
  </table></div>`;
}

// localInput is d as a datetime-local value (local time, to the minute).
function localInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function QueueAdmin({ queue, groups, maintenance, after }) {
  const { ask } = useContext(UI);
  const [group, setGroup] = useState(groups[0] || '');
  const [when, setWhen] = useState(() => localInput(new Date(Date.now() - 3600e3)));
  useEffect(() => {
    if (!groups.includes(group)) setGroup(groups[0] || '');
  }, [groups.join('\u0000')]);
  const seek = (toEnd) =>
    ask({
      title: `Seek ${group} on ${queue}?`,
      body: toEnd
        ? `Every cursor of ${group} on ${queue} moves to its partition's head: what is not consumed yet is skipped.`
        : `Every cursor of ${group} on ${queue} moves back to ${new Date(when).toLocaleString()}: the group receives again what was written since.`,
      confirm: 'Seek',
      run: () => api(`/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/seek`, {
        method: 'POST', body: toEnd ? { toEnd: true } : { timestamp: new Date(when).toISOString() } }),
      done: (r) => `Seek done: ${r.partitionsUpdated} partition(s) moved`,
      after,
    });
  return html`<section class="admin" data-test="queue-admin">
    <h2>Admin actions</h2>
    <div class="admin-row">
      <label>Group <select data-test="admin-group" value=${group} onChange=${(e) => setGroup(e.target.value)}>
        ${groups.map((g) => html`<option value=${g}>${g}</option>`)}</select></label>
      <label>Time <input type="datetime-local" data-test="admin-when" value=${when} onInput=${(e) => setWhen(e.target.value)} /></label>
      <button type="button" data-test="admin-seek" disabled=${!group || !when} onClick=${() => seek(false)}>Seek to time</button>
      <button type="button" data-test="admin-seek-end" disabled=${!group} onClick=${() => seek(true)}>Seek to end</button>
      <button type="button" class="danger" data-test="admin-delete-group" disabled=${!group}
        onClick=${() => ask({
          title: `Delete ${group} on ${queue}?`,
          body: `Its cursors and subscription on ${queue} go; its next pop starts as a new group.`,
          confirm: 'Delete group',
          run: () => api(`/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}`, { method: 'DELETE' }),
          done: (r) => `Deleted ${r.deletedPartitions} cursor(s)`,
          after,
        })}>Delete group</button>
    </div>
    <div class="admin-row">
      <span class="muted">Pops on every queue: ${maintenance.popMaintenanceMode ? 'paused' : 'served'}</span>
      <${MaintenanceSwitch} on=${maintenance.popMaintenanceMode} after=${after} />
      <button type="button" class="danger" data-test="admin-clear"
        onClick=${() => ask({
          title: `Clear ${queue}?`,
          body: `Every retained message of ${queue} is dropped, for every group. This cannot be undone.`,
          confirm: 'Clear queue',
          run: () => api(`/api/v1/queues/${enc(queue)}/clear`, { method: 'DELETE' }),
          done: () => `${queue} cleared`,
          after,
        })}>Clear queue</button>
    </div>
  </section>`;
}

function DeadLetters({ queue }) {
  const { ask } = useContext(UI);
  const [{ data, error }, reload] = usePoll(() => api('/api/v1/dlq' + qs({ queue, limit: 100 })), [queue]);
  if (!data) return html`<${Failure} error=${error} />`;
  const act = (d, requeue) =>
    ask({
      title: requeue ? 'Requeue this dead letter?' : 'Delete this dead letter?',
      body: requeue
        ? `Message ${d.transactionId} goes back to ${d.consumerGroup} on ${d.partition}.`
        : `The copy of ${d.transactionId} kept for ${d.consumerGroup} is deleted.`,
      confirm: requeue ? 'Requeue' : 'Delete',
      run: () => api(`/api/v1/dlq/${enc(d.id)}` + (requeue ? '/requeue' : ''), { method: requeue ? 'POST' : 'DELETE' }),
      done: () => (requeue ? 'Requeued' : 'Deleted'),
      after: reload,
    });
  return html`<${Failure} error=${error} />
  <p class="muted" data-test="dlq-total">${data.total} dead letter${data.total === 1 ? '' : 's'}</p>
  ${data.messages.length > 0 && html`<div class="table-wrap"><table data-test="dlq-table">
    <thead><tr><th>Failed</th><th>Partition</th><th>Group</th><th>Error</th><th class="num">Retries</th><th>Payload</th><th></th></tr></thead>
    <tbody>${data.messages.map((d) => html`<tr key=${d.id}>
      <td>${fmtTime(d.failedAt)}</td><td>${d.partition}</td><td>${d.consumerGroup}</td><td>${d.errorMessage}</td>
      <td class="num">${d.retryCount}</td>
      <td><a href=${messageHref(d.partitionId, d.transactionId)}><code>${preview(d.data, 60)}</code></a></td>
      <td class="nowrap"><button type="button" data-test="dlq-requeue" onClick=${() => act(d, true)}>Requeue</button>
        <button type="button" class="danger" data-test="dlq-delete" onClick=${() => act(d, false)}>Delete</button></td>
    </tr>`)}</tbody></table></div>`}`;
}

function RecentMessages({ queue }) {
  const [{ data, error }] = usePoll(async () => {
    // A week back: the list's default window is the last hour, and a quiet
    // queue's last messages are worth showing too.
    const from = new Date(Date.now() - 7 * 86400e3).toISOString();
    const list = await api('/api/v1/messages' + qs({ queue, limit: MESSAGE_PREVIEWS, from }));
    const details = await Promise.all(
      list.messages.map((m) => api(`/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`).catch(() => null)),
    );
    return list.messages.map((m, i) => ({ ...m, detail: details[i] }));
  }, [queue]);
  if (!data) return html`<${Failure} error=${error} />`;
  if (!data.length) return html`<p class="muted">No message written in the last week.</p>`;
  return html`<${Failure} error=${error} /><div class="table-wrap"><table data-test="messages-table">
    <thead><tr><th>Written</th><th>Partition</th><th>Payload</th><th>Per group</th></tr></thead>
    <tbody>${data.map((m) => html`<tr key=${m.partitionId + m.transactionId}>
      <td class="nowrap"><a href=${messageHref(m.partitionId, m.transactionId)}>${fmtTime(m.createdAt)}</a></td>
      <td>${m.partition}</td>
      <td><code>${m.detail ? preview(m.detail.payload) : '–'}</code></td>
      <td>${m.detail && m.detail.consumerGroups.length
        ? m.detail.consumerGroups.map((g) => html`<span class="group-status">${g.name} <${StatusBadge} status=${g.status} /></span>`)
        : html`<${StatusBadge} status=${m.status} />`}</td>
    </tr>`)}</tbody></table></div>`;
}

function Queue({ name }) {
  const { canAdmin } = useContext(UI);
  const samples = useRef([]);
  const [{ data, error }, reload] = usePoll(async () => {
    const [res, status, allGroups, lag, maintenance] = await Promise.all([
      api('/api/v1/resources/queues/' + enc(name)),
      api('/api/v1/status/queues/' + enc(name) + '?limit=1000'),
      api('/api/v1/consumer-groups?limit=10000'),
      api('/api/v1/analytics/queue-lag' + qs({ queue: name })),
      canAdmin ? api('/api/v1/system/maintenance/pop') : null,
    ]);
    const groups = allGroups.filter((g) => g.queueName === name);
    const cursors = {};
    await Promise.all(
      groups.map(async (g) => {
        const d = await api('/api/v1/consumer-groups/' + enc(g.name) + '?limit=10000');
        for (const p of (d[name] && d[name].partitions) || []) (cursors[p.partitionId] ||= {})[g.name] = p;
      }),
    );
    const now = Date.now() / 1000;
    samples.current = [...samples.current, { t: now, lags: Object.fromEntries(groups.map((g) => [g.name, g.totalLag])) }].slice(-LAG_SAMPLES);
    return { res, status, groups, cursors, lag, maintenance };
  }, [name, canAdmin]);
  if (!data) return html`<h1>${name}</h1><${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const { res, status, groups, cursors, lag, maintenance } = data;
  const groupNames = groups.map((g) => g.name);
  const oldest = Object.fromEntries(res.partitions.map((p) => [p.id, p.oldestMessage]));
  const lagData = [samples.current.map((s) => s.t), ...groupNames.map((g) => samples.current.map((s) => s.lags[g] ?? null))];
  return html`<h1>${name} <span class="muted small">${res.namespace && 'namespace ' + res.namespace} ${res.task && 'task ' + res.task}</span></h1>
  <${Failure} error=${error} />
  <section class="stats">
    <${Stat} label="Partitions" value=${fmtInt(status.totals.partitions)} test="q-partitions" />
    <${Stat} label="Messages" value=${fmtInt(status.totals.total)} test="q-messages" />
    <${Stat} label="Pending" value=${fmtInt(status.totals.pending)} test="q-pending" />
    <${Stat} label="Processing" value=${fmtInt(status.totals.processing)} test="q-processing" />
    <${Stat} label="Dead letters" value=${fmtInt(status.totals.deadLetter)} test="q-dead" />
  </section>
  <h2>Consumer groups</h2>
  ${groups.length === 0 ? html`<p class="muted">No group has consumed from this queue yet.</p>` : html`
  <div class="table-wrap"><table data-test="q-groups">
    <thead><tr><th>Group</th><th>State</th><th class="num">Lag</th><th class="num">Oldest waiting</th>
      <th class="num">Partitions</th><th class="num">Live leases</th><th>Last activity</th></tr></thead>
    <tbody>${groups.map((g) => html`<tr key=${g.name} data-group=${g.name}>
      <td>${g.name}</td><td><${StatusBadge} status=${g.state} /></td><td class="num" data-col="lag">${fmtInt(g.totalLag)}</td>
      <td class="num">${fmtAge(g.maxTimeLag)}</td><td class="num">${fmtInt(g.partitions)}</td><td class="num">${fmtInt(g.members)}</td>
      <td>${fmtTime(g.lastActivity)}</td></tr>`)}</tbody></table></div>
  <section class="charts">
    <${Chart} title="Lag per group since this page opened (messages)" test="q-chart-groups" labels=${groupNames} data=${lagData}
      span=${(LAG_SAMPLES * REFRESH_MS) / 1000} />
    <${Chart} title="Queue lag, last hour (messages)" test="q-chart-lag" labels=${['messages behind', 'pending']}
      data=${seriesOf(lag.series, ['offsetLag', 'pending'])} />
  </section>`}
  ${maintenance && html`<${QueueAdmin} queue=${name} groups=${groupNames} maintenance=${maintenance} after=${reload} />`}
  <h2>Partitions</h2>
  <div class="table-wrap"><table data-test="q-partitions-table">
    <thead><tr><th>Partition</th><th class="num">Head</th><th>Oldest retained</th><th class="num">Pending</th>
      <th class="num">Live leases</th>${groupNames.map((g) => html`<th class="num" title="committed offset / lag">${g}</th>`)}</tr></thead>
    <tbody>${status.partitions.map((p) => html`<tr key=${p.id} data-partition=${p.name}>
      <td>${p.name}</td><td class="num" data-col="head">${fmtInt(p.stats.head)}</td><td>${fmtTime(oldest[p.id] || p.oldestMessage)}</td>
      <td class="num">${fmtInt(p.stats.pending)}</td><td class="num">${fmtInt(p.stats.activeLeases)}</td>
      ${groupNames.map((g) => {
        const c = (cursors[p.id] || {})[g];
        return html`<td class="num" data-group=${g}>${c ? html`${fmtInt(p.stats.head - c.offsetLag)} <span class="muted">/ ${fmtInt(c.offsetLag)}</span>${c.leaseActive ? ' ●' : ''}` : '–'}</td>`;
      })}
    </tr>`)}</tbody></table></div>
  <h2>Recent messages</h2>
  <${RecentMessages} queue=${name} />
  <h2>Dead letters</h2>
  <${DeadLetters} queue=${name} />
  <h2>Options</h2>
  <dl class="options" data-test="q-options">${Object.entries(res.options).map(([k, v]) => html`<div><dt>${k}</dt><dd data-option=${k}>${String(v)}</dd></div>`)}</dl>`;
}

// groupOrder puts lagging groups first, then the longest waiting, then the
// most messages behind, then by name and queue.
function groupOrder(a, b) {
  const lag = (g) => (g.state === 'Lagging' ? 1 : 0);
  const str = (x, y) => (x < y ? -1 : x > y ? 1 : 0);
  return lag(b) - lag(a) || b.maxTimeLag - a.maxTimeLag || b.totalLag - a.totalLag || str(a.name, b.name) || str(a.queueName, b.queueName);
}

function Groups() {
  const [{ data, error }] = usePoll(async () => {
    const [groups, lagging] = await Promise.all([
      api('/api/v1/consumer-groups?limit=10000'),
      api('/api/v1/consumer-groups/lagging?minLagSeconds=60&limit=50'),
    ]);
    return { groups: groups.sort(groupOrder), lagging };
  }, []);
  const [text, setText] = useState('');
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const rows = data.groups.filter((g) => g.name.includes(text) || g.queueName.includes(text));
  return html`<${Failure} error=${error} />
  <div class="filters">
    <input type="search" placeholder="Filter by group or queue" aria-label="Filter" value=${text} onInput=${(e) => setText(e.target.value)} />
    <span class="muted">${rows.length} of ${data.groups.length}, lagging first</span>
  </div>
  <div class="table-wrap"><table data-test="groups-table">
    <thead><tr><th>Group</th><th>Queue</th><th>State</th><th class="num">Lag (messages)</th><th class="num">Lag (time)</th>
      <th class="num">Partitions behind</th><th class="num">Live leases</th><th>Last activity</th><th>Subscription</th></tr></thead>
    <tbody>${rows.map((g) => html`<tr key=${g.name + '\u0000' + g.queueName} data-group=${g.name} data-queue=${g.queueName}>
      <td>${g.name}</td><td>${queueLink(g.queueName)}</td><td><${StatusBadge} status=${g.state} /></td>
      <td class="num" data-col="lag">${fmtInt(g.totalLag)}</td><td class="num" data-col="time">${fmtAge(g.maxTimeLag)}</td>
      <td class="num">${fmtInt(g.partitionsWithLag)} / ${fmtInt(g.partitions)}</td><td class="num">${fmtInt(g.members)}</td>
      <td>${fmtTime(g.lastActivity)}</td><td>${g.subscriptionMode || '–'}</td></tr>`)}</tbody>
  </table></div>
  <h2>Partitions waiting over a minute</h2>
  ${data.lagging.length === 0 ? html`<p class="muted">None.</p>` : html`<div class="table-wrap"><table data-test="lagging-table">
    <thead><tr><th>Group</th><th>Queue</th><th>Partition</th><th class="num">Lag</th><th class="num">Waiting</th><th>Oldest unconsumed</th></tr></thead>
    <tbody>${data.lagging.map((c) => html`<tr key=${c.consumer_group + c.partition_id}>
      <td>${c.consumer_group}</td><td>${queueLink(c.queue_name)}</td><td>${c.partition_name}</td>
      <td class="num">${fmtInt(c.offset_lag)}</td><td class="num">${fmtAge(c.time_lag_seconds)}</td><td>${fmtTime(c.oldest_unconsumed_at)}</td></tr>`)}
    </tbody></table></div>`}`;
}

function MessageLookup({ pid, tx }) {
  const [p, setP] = useState(pid || '');
  const [t, setT] = useState(tx || '');
  return html`<form class="filters" onSubmit=${(e) => {
    e.preventDefault();
    location.hash = messageHref(p.trim(), t.trim());
  }}>
    <input placeholder="Partition id" aria-label="Partition id" value=${p} onInput=${(e) => setP(e.target.value)} required />
    <input placeholder="Transaction id" aria-label="Transaction id" value=${t} onInput=${(e) => setT(e.target.value)} required />
    <button type="submit">Open</button>
  </form>`;
}

function Message({ pid, tx }) {
  const [{ data, error }] = usePoll(async () => {
    const [m, traces] = await Promise.all([
      api(`/api/v1/messages/${enc(pid)}/${enc(tx)}`),
      api(`/api/v1/traces/${enc(pid)}/${enc(tx)}`),
    ]);
    return { m, traces: traces.traces };
  }, [pid, tx]);
  if (!data) return html`<${MessageLookup} pid=${pid} tx=${tx} /><${Failure} error=${error} />`;
  const { m, traces } = data;
  const fields = [
    ['Queue', queueLink(m.queue)], ['Partition', m.partition], ['Transaction id', m.transactionId], ['Message id', m.id],
    ['Written', fmtTime(m.createdAt)], ['Status (queue mode)', html`<${StatusBadge} status=${m.status} />`],
    ['Retries', m.retryCount], ['Encrypted', m.isEncrypted ? 'yes' : 'no'], ['Trace id', m.traceId || '–'],
    ['Producer', m.producerSub || '–'], ['Lease expires', fmtTime(m.leaseExpiresAt)],
  ];
  return html`<${MessageLookup} pid=${pid} tx=${tx} /><${Failure} error=${error} />
  <h1 data-test="msg-tx">${m.transactionId}</h1>
  <dl class="options" data-test="msg-fields">${fields.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>
  <h2>Payload</h2>
  <pre class="payload" data-test="msg-payload">${JSON.stringify(m.payload, null, 2)}</pre>
  <h2>Consumer groups</h2>
  <div class="table-wrap"><table data-test="msg-groups">
    <thead><tr><th>Group</th><th>Status</th><th class="num">Failed attempts</th><th>Lease expires</th></tr></thead>
    <tbody>${m.consumerGroups.map((g) => html`<tr key=${g.name} data-group=${g.name}><td>${g.name}</td>
      <td data-col="status"><${StatusBadge} status=${g.status} /></td><td class="num">${g.attempts}</td><td>${fmtTime(g.leaseExpiresAt)}</td></tr>`)}</tbody>
  </table></div>
  <h2>Traces</h2>
  ${traces.length === 0 ? html`<p class="muted">No trace recorded for this message.</p>` : html`<ol class="traces" data-test="msg-traces">
    ${traces.map((tr) => html`<li key=${tr.id}>
      <div><strong data-col="event">${tr.event_type}</strong> <span class="muted">${fmtTime(tr.created_at)} · ${tr.consumer_group || 'no group'} · ${tr.worker_id}</span></div>
      ${tr.trace_names.length > 0 && html`<div class="muted">names: ${tr.trace_names.join(', ')}</div>`}
      <pre class="payload">${JSON.stringify(tr.data, null, 2)}</pre></li>`)}</ol>`}`;
}

// ---------------------------------------------------------------- shell

function TokenForm({ onToken, error }) {
  const [value, setValue] = useState('');
  return html`<main class="login">
    <form data-test="token-form" onSubmit=${(e) => { e.preventDefault(); onToken(value.trim()); }}>
      <h1>queengo</h1>
      <p>This broker requires a token (JWT_ENABLED). Paste a bearer token: it stays in this browser and is sent only to this broker.</p>
      <${Failure} error=${error} />
      <input type="password" autocomplete="off" placeholder="eyJ…" aria-label="Token" data-test="token-input"
        value=${value} onInput=${(e) => setValue(e.target.value)} required />
      <button type="submit" data-test="token-submit">Sign in</button>
    </form>
  </main>`;
}

// access is what the broker told us about the token: 'checking', 'open'
// (no authentication), 'admin', 'limited' (a token below admin), 'token'
// (a token is needed) or 'unknown' (the broker did not answer). The
// admin-only maintenance route tells them apart.
async function probeAccess() {
  try {
    await api('/api/v1/system/maintenance/pop');
    return { access: token ? 'admin' : 'open' };
  } catch (e) {
    if (e.status === 403) return { access: 'limited' };
    if (e.status === 401) return { access: 'token', error: token ? e : null };
    return { access: 'unknown', error: e };
  }
}

const NAV = [['', 'Overview'], ['queues', 'Queues'], ['groups', 'Consumer groups'], ['message', 'Message']];

function App() {
  const route = useRoute();
  const [auth, setAuth] = useState({ access: 'checking' });
  const [live, setLive] = useState(true);
  const [asking, setAsking] = useState(null);
  const [notice, setNotice] = useState(null);
  const check = useCallback(() => probeAccess().then(setAuth), []);
  useEffect(() => {
    check();
    // A token that expires while the page is open: ask again, with the
    // API's reason.
    const f = (err) => setAuth((a) => (a.access === 'token' ? a : { access: 'token', error: token ? err : null }));
    unauthorizedListeners.add(f);
    return () => unauthorizedListeners.delete(f);
  }, []);
  useEffect(() => {
    if (!notice) return;
    const t = setTimeout(() => setNotice(null), 4000);
    return () => clearTimeout(t);
  }, [notice]);
  const setToken = (t) => {
    token = t;
    if (t) localStorage.setItem(TOKEN_KEY, t);
    else localStorage.removeItem(TOKEN_KEY);
    setAuth({ access: 'checking' });
    check();
  };
  if (auth.access === 'checking') return html`<p class="boot">Connecting…</p>`;
  if (auth.access === 'token') return html`<${TokenForm} onToken=${setToken} error=${auth.error} />`;
  const ui = {
    canAdmin: auth.access === 'open' || auth.access === 'admin',
    live,
    ask: setAsking,
    notify: setNotice,
  };
  const [page, ...args] = route;
  let body;
  if (!page) body = html`<${Overview} />`;
  else if (page === 'queues' && args[0]) body = html`<${Queue} key=${args[0]} name=${args[0]} />`;
  else if (page === 'queues') body = html`<${Queues} />`;
  else if (page === 'groups') body = html`<${Groups} />`;
  else if (page === 'message' && args.length === 2) body = html`<${Message} key=${args.join('/')} pid=${args[0]} tx=${args[1]} />`;
  else if (page === 'message') body = html`<${MessageLookup} />`;
  else body = html`<p class="error">No such page. <a href="#/">Overview</a></p>`;
  const badge = { open: 'no auth', admin: 'admin', limited: 'read-only / read-write', unknown: 'broker unreachable' }[auth.access];
  return html`<${UI.Provider} value=${ui}>
    <header class="top">
      <a class="brand" href="#/">queengo</a>
      <nav>${NAV.map(([p, label]) => html`<a href=${'#/' + p} class=${(page || '') === p ? 'active' : ''}
        aria-current=${(page || '') === p ? 'page' : undefined}>${label}</a>`)}</nav>
      <div class="session">
        <label class="live" title=${'Refresh every ' + REFRESH_MS / 1000 + ' s'}><input type="checkbox" checked=${live}
          onChange=${(e) => setLive(e.target.checked)} /> live</label>
        <span class="badge" data-test="access">${badge}</span>
        ${token && html`<button type="button" data-test="sign-out" onClick=${() => setToken('')}>Sign out</button>`}
      </div>
    </header>
    <main data-page=${page || 'overview'}>${body}</main>
    ${auth.error && html`<${Failure} error=${auth.error} />`}
    ${notice && html`<div class="notice" role="status" data-test="notice">${notice}</div>`}
    ${asking && html`<${ConfirmDialog} req=${asking} close=${() => setAsking(null)} />`}
  <//>`;
}

render(html`<${App} />`, document.getElementById('app'));
