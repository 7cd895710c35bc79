// Streams (#/streams): the stream queries the SDKs' streaming runtimes
// registered, with their source, sink, consumer group, that group's lag and
// their state size; one query's page (#/streams/NAME) shows them per source
// partition and, for an admin, resets its state (docs/api-admin.md
// "Streams").
import { useContext } from 'preact/hooks';
import { api, enc } from '../lib/api.js';
import { fmtInt, fmtTime } from '../lib/format.js';
import { html, usePoll, UI } from '../lib/ui.js';
import { Failure, queueLink } from '../lib/widgets.js';

const streamHref = (name) => '#/streams/' + enc(name);

export function Streams() {
  const [{ data, error }] = usePoll(() => api('/api/v1/streams'), []);
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const qs = data.queries;
  return html`<${Failure} error=${error} />
  ${qs.length === 0 ? html`<p class="muted">No stream query registered yet: the SDKs register one at Stream.run({ queryId }).</p>` : html`
  <div class="table-wrap"><table data-test="streams-table">
    <thead><tr><th>Query</th><th>Source</th><th>Sink</th><th>Consumer group</th><th class="num">Lag (messages)</th>
      <th class="num">State rows</th><th class="num">Partitions with state</th><th>Updated</th></tr></thead>
    <tbody>${qs.map((q) => html`<tr key=${q.id} data-query=${q.name}>
      <td><a href=${streamHref(q.name)}>${q.name}</a></td><td>${queueLink(q.sourceQueue)}</td>
      <td>${q.sinkQueue ? queueLink(q.sinkQueue) : '–'}</td><td>${q.consumerGroup || '–'}</td>
      <td class="num" data-col="lag">${fmtInt(q.lag)}</td><td class="num" data-col="rows">${fmtInt(q.stateRows)}</td>
      <td class="num">${fmtInt(q.statePartitions)}</td><td>${fmtTime(q.updatedAt)}</td></tr>`)}</tbody>
  </table></div>`}`;
}

export function Stream({ name }) {
  const { canAdmin, ask } = useContext(UI);
  const [{ data, error }, reload] = usePoll(() => api('/api/v1/streams/' + enc(name)), [name]);
  if (!data) return html`<${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const q = data;
  const fields = [
    ['Source', queueLink(q.sourceQueue)], ['Sink', q.sinkQueue ? queueLink(q.sinkQueue) : '–'],
    ['Consumer group', q.consumerGroup || '–'], ['Config hash', q.configHash], ['Lag (messages)', fmtInt(q.lag)],
    ['State rows', fmtInt(q.stateRows)], ['Registered', fmtTime(q.createdAt)], ['Updated', fmtTime(q.updatedAt)],
  ];
  return html`<${Failure} error=${error} />
  <h1 data-test="stream-name">${q.name}</h1>
  <dl class="options" data-test="stream-fields">${fields.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>
  ${canAdmin && html`<section class="admin" data-test="stream-admin"><h2>Admin actions</h2><div class="admin-row">
  <button type="button" class="danger" data-test="stream-reset" onClick=${() => ask({
    title: `Reset ${q.name}?`,
    body: `Deletes its ${fmtInt(q.stateRows)} state rows; the query stays registered and its group's cursor stays where it is.`,
    confirm: 'Reset state',
    run: () => api('/api/v1/streams/' + enc(q.name) + '/reset', { method: 'POST' }),
    done: (r) => `${q.name}: ${fmtInt(r.deletedRows)} state rows deleted`,
    after: reload,
  })}>Reset state</button></div></section>`}
  <h2>Source partitions</h2>
  <div class="table-wrap"><table data-test="stream-partitions">
    <thead><tr><th>Partition</th><th class="num">State rows</th><th class="num">Lag (messages)</th><th>Last state write</th></tr></thead>
    <tbody>${q.partitions.map((p) => html`<tr key=${p.partitionId} data-partition=${p.partition}>
      <td>${p.partition}</td><td class="num" data-col="rows">${fmtInt(p.stateRows)}</td>
      <td class="num" data-col="lag">${fmtInt(p.lag)}</td><td>${fmtTime(p.updatedAt)}</td></tr>`)}</tbody>
  </table></div>`;
}
