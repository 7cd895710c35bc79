// The queue list (#/queues), sorted and filtered by the user.
import { useState, useMemo } from 'preact/hooks';
import { api } from '../lib/api.js';
import { fmtAge, fmtInt } from '../lib/format.js';
import { html, usePoll, useSort } from '../lib/ui.js';
import { Failure, queueLink } from '../lib/widgets.js';

export function Queues() {
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
