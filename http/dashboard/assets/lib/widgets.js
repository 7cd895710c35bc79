// Widgets the pages share: figures, errors, status badges, links, the
// confirmation dialog every admin action goes through, and the
// maintenance switches.
import { useState, useEffect, useRef, useContext } from 'preact/hooks';
import { api, enc } from './api.js';
import { html, UI } from './ui.js';

export function Stat({ label, value, test, sub, tone }) {
  return html`<div class=${'stat ' + (tone || '')}>
    <div class="stat-label">${label}</div>
    <div class="stat-value" data-test=${test}>${value}</div>
    ${sub && html`<div class="stat-sub">${sub}</div>`}
  </div>`;
}

export function Failure({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.status ? error.status + ': ' : ''}${error.message}</p>`;
}

export function StatusBadge({ status }) {
  return html`<span class=${'badge ' + String(status).toLowerCase()}>${status}</span>`;
}

export const queueLink = (name) => html`<a href=${'#/queues/' + enc(name)}>${name}</a>`;
export const messageHref = (pid, tx) => '#/message/' + enc(pid) + '/' + enc(tx);

// ConfirmDialog runs req.run once the user confirms; it stays open with the
// API's error text when the action fails.
export function ConfirmDialog({ req, close }) {
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

export function MaintenanceSwitch({ kind = 'pop', on, after }) {
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
