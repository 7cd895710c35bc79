// One message (#/message/PARTITION/TXID), and the form that opens one.
import { useState } from 'preact/hooks';
import { api, enc } from '../lib/api.js';
import { fmtTime } from '../lib/format.js';
import { html, usePoll } from '../lib/ui.js';
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

export function Message({ pid, tx }) {
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
