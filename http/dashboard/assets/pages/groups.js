// The consumer groups (#/groups), lagging first, and the partitions that
// have waited over a minute.
import { useState } from 'preact/hooks';
import { api } from '../lib/api.js';
import { fmtAge, fmtInt, fmtTime } from '../lib/format.js';
import { html, usePoll } from '../lib/ui.js';
import { Failure, StatusBadge, queueLink } from '../lib/widgets.js';

// groupOrder puts lagging groups first, then the longest waiting, then the
// most messages behind, then by name and queue.
function groupOrder(a, b) {
  const lag = (g) => (g.state === 'Lagging' ? 1 : 0);
  const str = (x, y) => (x < y ? -1 : x > y ? 1 : 0);
  return lag(b) - lag(a) || b.maxTimeLag - a.maxTimeLag || b.totalLag - a.totalLag || str(a.name, b.name) || str(a.queueName, b.queueName);
}

export function Groups() {
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
