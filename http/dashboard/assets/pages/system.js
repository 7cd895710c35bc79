// System (#/system): the broker processes and their pools, the database's
// health and version, the maintenance switches, the push buffer and the
// configuration the answering process runs with (secrets hidden). The
// switches, the buffer's details and the configuration are admin routes;
// a lesser token sees the rest.
import { useContext, useState } from 'preact/hooks';
import { api, qs } from '../lib/api.js';
import { fmtAge, fmtBytes, fmtInt, fmtRate, fmtTime } from '../lib/format.js';
import { html, UI, usePoll } from '../lib/ui.js';
import { Failure, MaintenanceSwitch, Stat } from '../lib/widgets.js';

// PROCESS_WINDOW is how far back the process list looks (seconds): a
// process that has not sampled for this long has stopped.
const PROCESS_WINDOW = 300;

// last is the newest bucket's {avg, min, max, last} figure of a replica of
// the reference-shaped system-metrics answer.
const last = (replica, group, field) => {
  const ts = replica.timeSeries;
  return ts.length ? ts[ts.length - 1].metrics[group][field].last : null;
};

function Configuration({ config }) {
  const [changed, setChanged] = useState(false);
  const rows = config.settings.filter((s) => !changed || s.value !== s.default);
  return html`<h2>Configuration of ${config.instance}</h2>
  <div class="filters">
    <label class="muted"><input type="checkbox" data-test="config-changed" checked=${changed}
      onChange=${(e) => setChanged(e.target.checked)} /> only what differs from the default</label>
    <span class="muted">queengo ${config.version}; every process has its own: this is the one that answered</span>
  </div>
  <div class="table-wrap"><table data-test="config-table">
    <thead><tr><th>Variable</th><th>Value</th><th>Default</th></tr></thead>
    <tbody>${rows.map((s) => html`<tr key=${s.name} data-setting=${s.name} class=${s.value !== s.default && !s.secret ? 'changed' : ''}>
      <td><code>${s.name}</code></td>
      <td data-col="value"><code>${s.value}</code>${s.secret ? html` <span class="badge">secret</span>` : ''}${
        s.value === '' && !s.secret ? html`<span class="muted">(unset)</span>` : ''}</td>
      <td data-col="default"><code>${s.default}</code></td></tr>`)}</tbody>
  </table></div>`;
}

function Buffer({ buffers, maint }) {
  const b = maint && maint.bufferStats;
  const rows = [
    ['Enabled', buffers.bufferEnabled ? 'yes' : 'no (FILE_BUFFER_DIR off or unusable)'],
    ['Pushes go to it now', buffers.bufferActive ? 'yes' : 'no'],
    ['Healthy', buffers.bufferHealthy ? 'yes' : 'no'],
    ['Waiting for the database', fmtInt(buffers.pending) + (b ? ' messages, ' + fmtBytes(b.pendingBytes) + ' in ' + fmtInt(b.pendingFiles) + ' files' : '')],
    ['Failed on replay', fmtInt(buffers.failed) + (b ? ', ' + fmtBytes(b.failedFiles.totalBytes) : '')],
  ];
  if (b) rows.push(['Oldest waiting', b.oldestAt ? fmtTime(b.oldestAt) : '–'], ['Database outages buffered', fmtInt(b.failedFiles.failoverCount)]);
  return html`<dl class="options" data-test="sys-buffer">${rows.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

export function System() {
  const { canAdmin } = useContext(UI);
  const [{ data, error }, reload] = usePoll(async () => {
    const from = new Date(Date.now() - PROCESS_WINDOW * 1000).toISOString();
    const [health, self, pg, buffers, workers, system, maint, shared, config] = await Promise.all([
      api('/health').catch((e) => ({ status: 'unhealthy', database: e.message })),
      api('/metrics'),
      api('/api/v1/analytics/postgres-stats'),
      api('/api/v1/status/buffers'),
      api('/api/v1/analytics/worker-metrics' + qs({ from, format: 'queengo', bucketSeconds: PROCESS_WINDOW })),
      api('/api/v1/analytics/system-metrics' + qs({ from })),
      canAdmin ? api('/api/v1/system/maintenance') : null,
      canAdmin ? api('/api/v1/system/shared-state') : null,
      canAdmin ? api('/api/v1/system/config') : null,
    ]);
    return { health, self, pg, buffers, workers, system, maint, shared, config };
  }, [canAdmin]);
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const { health, self, pg, buffers, workers, system, maint, shared, config } = data;
  const healthy = health.status === 'healthy';
  const pools = Object.fromEntries(system.replicas.map((r) => [r.workerId, r]));
  // One row per process: its newest point of the window.
  const procs = new Map();
  for (const p of workers.series) if (!procs.has(p.workerId) || procs.get(p.workerId).timestamp < p.timestamp) procs.set(p.workerId, p);
  return html`<${Failure} error=${error} />
  <section class="stats">
    <${Stat} label="Database" value=${healthy ? 'healthy' : 'unhealthy'} test="sys-db" tone=${healthy ? 'ok' : 'bad'} sub=${health.database} />
    <${Stat} label="PostgreSQL" value=${pg.serverVersion.split(' ')[0]} test="sys-pg-version"
      sub=${'database ' + pg.database + ', ' + fmtBytes(pg.databaseSizeBytes)} />
    <${Stat} label="Connections" value=${fmtInt(Object.values(pg.connections).reduce((a, n) => a + n, 0))} test="sys-pg-connections"
      sub=${Object.entries(pg.connections).map(([k, n]) => n + ' ' + k).join(', ')} />
    <${Stat} label="Cache hit ratio" value=${pg.cacheHitRatio === null ? '–' : fmtRate(pg.cacheHitRatio * 100) + ' %'} test="sys-pg-cache" />
    <${Stat} label="queengo" value=${health.version || '–'} test="sys-version" sub=${'this process up ' + fmtAge(self.uptime)} />
    <${Stat} label="Processes" value=${fmtInt(shared ? shared.server_health.servers_alive : procs.size)} test="sys-processes"
      sub="sampling on this database" />
    <${Stat} label="Pop maintenance" test="sys-pop-maintenance" value=${maint ? (maint.popMaintenanceMode ? 'ON' : 'off') : 'admin only'}
      tone=${maint && maint.popMaintenanceMode ? 'bad' : ''}
      sub=${maint && html`<${MaintenanceSwitch} on=${maint.popMaintenanceMode} after=${reload} />`} />
    <${Stat} label="Push maintenance" test="sys-push-maintenance" value=${maint ? (maint.maintenanceMode ? 'ON' : 'off') : 'admin only'}
      tone=${maint && maint.maintenanceMode ? 'warn' : ''}
      sub=${maint && html`<${MaintenanceSwitch} kind="push" on=${maint.maintenanceMode} after=${reload} />`} />
  </section>
  <h2>Broker processes, last ${PROCESS_WINDOW / 60} minutes</h2>
  <div class="table-wrap"><table data-test="sys-processes-table">
    <thead><tr><th>Process</th><th class="num">PID</th><th class="num">CPU %</th><th class="num">Memory</th><th class="num">Goroutines</th>
      <th class="num">Parked</th><th class="num">Pool in use / open (idle)</th><th class="num">Requests (push / pop / ack)</th><th>Last sample</th></tr></thead>
    <tbody>${[...procs.values()].map((p) => {
      const r = pools[p.workerId];
      return html`<tr key=${p.workerId} data-worker=${p.workerId}>
        <td>${p.workerId}${p.workerId === (shared && shared.server_id) ? html` <span class="badge">this one</span>` : ''}</td>
        <td class="num">${p.pid}</td><td class="num">${fmtRate(p.cpuPercent)}</td><td class="num">${fmtBytes(p.rssBytes)}</td>
        <td class="num">${fmtInt(p.goroutines)}</td><td class="num">${fmtInt(p.parked)}</td>
        <td class="num" data-col="pool">${r ? `${fmtInt(last(r, 'database', 'pool_active'))} / ${fmtInt(last(r, 'database', 'pool_size'))} (${fmtInt(last(r, 'database', 'pool_idle'))})` : '–'}</td>
        <td class="num" data-col="requests">${fmtInt(p.pushRequests)} / ${fmtInt(p.popRequests)} / ${fmtInt(p.ackRequests)}</td>
        <td>${fmtTime(p.timestamp)}</td></tr>`;
    })}</tbody>
  </table></div>
  <p class="muted" data-test="sys-self">${`The process that answered: pool ${fmtInt(self.database.activeConnections)} in use of ${fmtInt(self.database.poolSize)} open, ${fmtInt(self.goroutines)} goroutines, ${fmtBytes(self.memory.rss)} resident.`}</p>
  <h2>Push buffer</h2>
  <${Buffer} buffers=${buffers} maint=${maint} />
  ${config ? html`<${Configuration} config=${config} />` : html`<h2>Configuration</h2><p class="muted" data-test="config-admin-only">Admin only.</p>`}
  <h2>Largest tables</h2>
  <div class="table-wrap"><table data-test="sys-tables">
    <thead><tr><th>Table</th><th class="num">Total</th><th class="num">Data</th><th class="num">Indexes</th><th class="num">Rows (estimate)</th></tr></thead>
    <tbody>${pg.tables.slice(0, 8).map((t) => html`<tr key=${t.table}><td>queen.${t.table}</td><td class="num">${fmtBytes(t.totalBytes)}</td>
      <td class="num">${fmtBytes(t.tableBytes)}</td><td class="num">${fmtBytes(t.indexBytes)}</td><td class="num">${fmtInt(t.estimatedRows)}</td></tr>`)}</tbody>
  </table></div>`;
}
