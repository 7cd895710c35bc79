// A queue's page (#/queues/NAME): its figures, consumer groups, partitions,
// recent messages, dead letters and options, and the admin actions on it.
import { useState, useEffect, useRef, useContext } from 'preact/hooks';
import { api, enc, qs } from '../lib/api.js';
import { Chart, seriesOf } from '../lib/chart.js';
import { fmtAge, fmtInt, fmtTime, preview } from '../lib/format.js';
import { html, REFRESH_MS, UI, usePoll } from '../lib/ui.js';
import { Failure, MaintenanceSwitch, Stat, StatusBadge, messageHref } from '../lib/widgets.js';

// MESSAGE_PREVIEWS is how many recent messages a queue page opens to show
// their payload and per-group status: one read each, every refresh.
const MESSAGE_PREVIEWS = 12;
// LAG_SAMPLES bounds the per-group lag chart (10 minutes at REFRESH_MS).
const LAG_SAMPLES = 120;

// localInput is d as a datetime-local value (local time, to the minute).
function localInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

function QueueAdmin({ queue, groups, partitions, maintenance, after }) {
  const { ask } = useContext(UI);
  const [group, setGroup] = useState(groups[0] || '');
  const [partition, setPartition] = useState(partitions[0] || '');
  const [when, setWhen] = useState(() => localInput(new Date(Date.now() - 3600e3)));
  useEffect(() => {
    if (!groups.includes(group)) setGroup(groups[0] || '');
  }, [groups.join('\u0000')]);
  useEffect(() => {
    if (!partitions.includes(partition)) setPartition(partitions[0] || '');
  }, [partitions.join('\u0000')]);
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
      <label>Partition <select data-test="admin-partition" value=${partition} onChange=${(e) => setPartition(e.target.value)}>
        ${partitions.map((p) => html`<option value=${p}>${p}</option>`)}</select></label>
      <button type="button" data-test="admin-seek-partition" disabled=${!group || !partition}
        onClick=${() => ask({
          title: `Seek ${group} on ${partition} to its end?`,
          body: `The cursor of ${group} on partition ${partition} of ${queue} moves to the partition's head and its lease is released: what it has not consumed there is skipped. Its other partitions stay.`,
          confirm: 'Seek partition',
          run: () => api(`/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/partitions/${enc(partition)}/seek`, { method: 'POST' }),
          done: (r) => (r.updated ? `${group} moved to the head of ${partition}` : `${group} has no cursor on ${partition}: nothing moved`),
          after,
        })}>Seek partition to end</button>
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
      <button type="button" class="danger" data-test="admin-delete-queue"
        onClick=${() => ask({
          title: `Delete ${queue}?`,
          body: `The queue goes with everything under it: its partitions, messages, cursors, subscriptions, dead letters and traces. A later push recreates it empty. This cannot be undone.`,
          confirm: 'Delete queue',
          run: () => api(`/api/v1/resources/queues/${enc(queue)}`, { method: 'DELETE' }),
          done: () => `${queue} deleted`,
          after: () => (location.hash = '#/queues'),
        })}>Delete queue</button>
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

export function Queue({ name }) {
  const { canAdmin } = useContext(UI);
  const samples = useRef([]);
  const [{ data, error }, reload] = usePoll(async () => {
    const [res, status, allGroups, lag, maintenance] = await Promise.all([
      api('/api/v1/resources/queues/' + enc(name)),
      api('/api/v1/status/queues/' + enc(name) + '?limit=1000'),
      api('/api/v1/consumer-groups?limit=10000'),
      api('/api/v1/analytics/queue-lag' + qs({ queue: name, format: 'queengo' })),
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
  ${maintenance && html`<${QueueAdmin} queue=${name} groups=${groupNames} partitions=${status.partitions.map((p) => p.name)}
    maintenance=${maintenance} after=${reload} />`}
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
