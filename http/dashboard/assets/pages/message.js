// One message (#/message/PARTITION/TXID), the admin actions on it, and the
// form that opens one.
import { useState, useContext } from 'preact/hooks';
import { api, enc } from '../lib/api.js';
import { fmtTime } from '../lib/format.js';
import { html, UI, usePoll } from '../lib/ui.js';
import { Failure, StatusBadge, messageHref, queueLink } from '../lib/widgets.js';

export function MessageLookup({ pid, tx }) {
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

// MessageAdmin offers retry, move to the DLQ and delete
// (docs/api-admin.md "Messages"). The last two take the message off its
// queue for every group, so the page goes back to the queue after them.
function MessageAdmin({ m, after }) {
  const { ask } = useContext(UI);
  const path = `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`;
  const toQueue = () => (location.hash = '#/queues/' + enc(m.queue));
  return html`<section class="admin" data-test="msg-admin">
    <h2>Admin actions</h2>
    <div class="admin-row">
      <button type="button" data-test="msg-retry" onClick=${() => ask({
        title: `Retry ${m.transactionId}?`,
        body: 'Its dead letters, if any, are pushed again to the same partition as one new message, which every group receives; ' +
          'a group that failed it but still has it pending gets its full retry budget back and no retry delay.',
        confirm: 'Retry',
        run: () => api(path + '/retry', { method: 'POST' }),
        done: (r) => (r.requeued ? `Pushed again as ${r.requeued.transactionId}` : '') +
          (r.requeued && r.reset.length ? '; ' : '') + (r.reset.length ? `Retry budget reset for ${r.reset.join(', ')}` : ''),
        after,
      })}>Retry</button>
      <button type="button" class="danger" data-test="msg-dlq" onClick=${() => ask({
        title: `Move ${m.transactionId} to the dead-letter queue?`,
        body: `Every group that has not consumed it gets a dead letter with a copy of it ("moved to DLQ by operator"); then it leaves ${m.queue} for every group.`,
        confirm: 'Move to DLQ',
        run: () => api(path + '/dlq', { method: 'POST' }),
        done: (r) => `Moved to the dead-letter queue of ${r.consumerGroups.join(', ')}`,
        after: toQueue,
      })}>Move to DLQ</button>
      <button type="button" class="danger" data-test="msg-delete" onClick=${() => ask({
        title: `Delete ${m.transactionId}?`,
        body: `No group, present or future, receives it again; a live lease holding it has it resolved as if acked. Its transaction id stays taken. This cannot be undone.`,
        confirm: 'Delete message',
        run: () => api(path, { method: 'DELETE' }),
        done: () => `Deleted ${m.transactionId}`,
        after: toQueue,
      })}>Delete</button>
    </div>
  </section>`;
}

export function Message({ pid, tx }) {
  const { canAdmin } = useContext(UI);
  const [{ data, error }, reload] = usePoll(async () => {
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
  ${canAdmin && html`<${MessageAdmin} m=${m} after=${reload} />`}
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
