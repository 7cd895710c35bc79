// Traces (#/traces): the trace names recorded, most recently seen first,
// and a search by name; one name's page (#/traces/NAME) draws its events
// on a timeline, one lane per message, across queues (docs/api.md
// "Traces").
import { useState } from 'preact/hooks';
import { api, enc, qs } from '../lib/api.js';
import { fmtDuration, fmtInt, fmtTime, preview } from '../lib/format.js';
import { html, usePoll } from '../lib/ui.js';
import { Failure, messageHref, queueLink } from '../lib/widgets.js';

// NAMES_SHOWN is how many names the list reads: the most recently seen;
// the search opens any name, listed or not.
const NAMES_SHOWN = 200;
// EVENTS_SHOWN is how many of a name's traces its page reads, the newest
// (the API's largest page).
const EVENTS_SHOWN = 1000;
// Dot colours by event type, in order of first appearance.
const COLORS = ['#2563eb', '#16a34a', '#dc2626', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];

const traceHref = (name) => '#/traces/' + enc(name);

function Search({ name }) {
  const [text, setText] = useState(name || '');
  return html`<form class="filters" onSubmit=${(e) => {
    e.preventDefault();
    if (text.trim()) location.hash = traceHref(text.trim());
  }}>
    <input type="search" placeholder="Trace name, e.g. order-42" aria-label="Trace name" data-test="trace-search"
      value=${text} onInput=${(e) => setText(e.target.value)} required />
    <button type="submit" data-test="trace-open">Open</button>
  </form>`;
}

export function Traces() {
  const [{ data, error }] = usePoll(() => api('/api/v1/traces/names' + qs({ limit: NAMES_SHOWN })), []);
  const [text, setText] = useState('');
  if (!data) return html`<${Search} /><${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  const rows = data.trace_names.filter((n) => n.trace_name.includes(text));
  return html`<${Search} /><${Failure} error=${error} />
  <div class="filters">
    <input type="search" placeholder="Filter the names below" aria-label="Filter names" data-test="trace-filter"
      value=${text} onInput=${(e) => setText(e.target.value)} />
    <span class="muted" data-test="trace-names-count">${rows.length} of ${fmtInt(data.total)} names${data.total > NAMES_SHOWN ? ', the ' + NAMES_SHOWN + ' seen last' : ''}</span>
  </div>
  ${data.total === 0 ? html`<p class="muted">No trace recorded yet: consumers record them with the SDKs' message.trace().</p>` : html`
  <div class="table-wrap"><table data-test="trace-names">
    <thead><tr><th>Name</th><th class="num">Traces</th><th class="num">Messages</th><th>Last seen</th></tr></thead>
    <tbody>${rows.map((n) => html`<tr key=${n.trace_name} data-name=${n.trace_name}>
      <td><a href=${traceHref(n.trace_name)}>${n.trace_name}</a></td>
      <td class="num" data-col="traces">${fmtInt(n.trace_count)}</td><td class="num" data-col="messages">${fmtInt(n.message_count)}</td>
      <td>${fmtTime(n.last_seen)}</td></tr>`)}</tbody>
  </table></div>`}`;
}

// lanesOf groups events (oldest first) by message, in order of each
// message's first event.
function lanesOf(events) {
  const lanes = new Map();
  for (const e of events) {
    const key = e.partition_id + '\u0000' + e.transaction_id;
    if (!lanes.has(key)) lanes.set(key, { key, queue: e.queue_name, partition: e.partition_name, pid: e.partition_id, tx: e.transaction_id, events: [] });
    lanes.get(key).events.push(e);
  }
  return [...lanes.values()];
}

function Timeline({ events, color }) {
  const t0 = Date.parse(events[0].created_at);
  const span = Math.max(Date.parse(events[events.length - 1].created_at) - t0, 1);
  const at = (e) => ((Date.parse(e.created_at) - t0) / span) * 100;
  const lanes = lanesOf(events);
  return html`<div class="timeline" data-test="trace-timeline">
    <div class="lane axis"><span></span><div class="axis-labels"><span>${fmtTime(events[0].created_at)}</span>
      <span>+${fmtDuration(span)}</span></div></div>
    ${lanes.map((l) => html`<div class="lane" key=${l.key} data-tx=${l.tx} data-queue=${l.queue}>
      <div class="lane-label"><span class="muted">${l.queue} / ${l.partition}</span>
        <a href=${messageHref(l.pid, l.tx)}><code>${l.tx}</code></a></div>
      <div class="track">${l.events.map((e) => html`<span class="dot" key=${e.id} data-event=${e.event_type}
        style=${`left:${at(e)}%;background:${color(e.event_type)}`}
        title=${`${e.event_type} · ${fmtTime(e.created_at)} · ${e.consumer_group || 'no group'}`}></span>`)}</div>
    </div>`)}
  </div>`;
}

export function Trace({ name }) {
  const [{ data, error }] = usePoll(() => api(`/api/v1/traces/by-name/${enc(name)}` + qs({ limit: EVENTS_SHOWN })), [name]);
  if (!data) return html`<${Search} name=${name} /><h1>${name}</h1><${Failure} error=${error} />${!error && html`<p class="muted">Loading…</p>`}`;
  // The API answers newest first; a timeline reads oldest first.
  const events = [...data.traces].reverse();
  const types = [...new Set(events.map((e) => e.event_type))];
  const color = (t) => COLORS[types.indexOf(t) % COLORS.length];
  const messages = new Set(events.map((e) => e.partition_id + '\u0000' + e.transaction_id)).size;
  const queues = [...new Set(events.map((e) => e.queue_name))];
  const t0 = events.length ? Date.parse(events[0].created_at) : 0;
  return html`<${Search} name=${name} /><${Failure} error=${error} />
  <h1 data-test="trace-name">${name}</h1>
  <p class="muted" data-test="trace-summary">${fmtInt(data.total)} event${data.total === 1 ? '' : 's'} on ${messages} message${messages === 1 ? '' : 's'} in ${queues.length} queue${queues.length === 1 ? '' : 's'}${
    data.total > events.length ? `; the newest ${events.length} shown` : ''}</p>
  ${events.length === 0 ? html`<p class="muted">No trace carries this name.</p>` : html`
  <div class="legend">${types.map((t) => html`<span><span class="dot inline" style=${'background:' + color(t)}></span>${t}</span>`)}</div>
  <${Timeline} events=${events} color=${color} />
  <h2>Events, oldest first</h2>
  <div class="table-wrap"><table data-test="trace-events">
    <thead><tr><th>Time</th><th class="num">After first</th><th>Event</th><th>Queue</th><th>Partition</th><th>Message</th>
      <th>Group</th><th>Worker</th><th>Data</th></tr></thead>
    <tbody>${events.map((e) => html`<tr key=${e.id} data-event=${e.event_type} data-tx=${e.transaction_id}>
      <td class="nowrap">${fmtTime(e.created_at)}</td><td class="num">+${fmtDuration(Date.parse(e.created_at) - t0)}</td>
      <td data-col="event"><span class="dot inline" style=${'background:' + color(e.event_type)}></span>${e.event_type}</td>
      <td data-col="queue">${queueLink(e.queue_name)}</td><td>${e.partition_name}</td>
      <td><a href=${messageHref(e.partition_id, e.transaction_id)}><code>${e.transaction_id}</code></a></td>
      <td>${e.consumer_group || '–'}</td><td>${e.worker_id}</td><td><code>${preview(e.data, 80)}</code></td></tr>`)}</tbody>
  </table></div>`}`;
}
