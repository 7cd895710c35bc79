// The overview (#/): the broker's figures at a glance, its maintenance
// switches, the last hour's charts and the broker processes.
import { useContext } from 'preact/hooks';
import { api } from '../lib/api.js';
import { Chart, seriesOf } from '../lib/chart.js';
import { fmtBytes, fmtInt, fmtRate, fmtTime } from '../lib/format.js';
import { html, UI, usePoll } from '../lib/ui.js';
import { Failure, MaintenanceSwitch, Stat } from '../lib/widgets.js';

export function Overview() {
  const { canAdmin } = useContext(UI);
  const [{ data, error }, reload] = usePoll(async () => {
    const [ov, st, dlq, health, ops, groups, maint] = await Promise.all([
      api('/api/v1/resources/overview'),
      api('/api/v1/status'),
      api('/api/v1/dlq?limit=1'),
      api('/health').catch((e) => ({ status: 'unhealthy', database: e.message })),
      api('/api/v1/analytics/queue-ops?format=queengo'),
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
