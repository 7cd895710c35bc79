// The queengo dashboard: one page, hash-routed (#/, #/queues, #/queues/NAME,
// #/groups, #/message/PARTITION/TXID, #/traces, #/traces/NAME, #/streams, #/streams/NAME, #/analytics,
// #/system), that reads only the public HTTP API
// (docs/api.md) with the token the user gives it. Preact renders, htm
// stands in for JSX (no build step), uPlot draws the charts. This module is
// the shell: the access check, the header and the router. pages/ holds one
// module per page, lib/ what they share.
import { render } from 'preact';
import { useState, useEffect, useCallback } from 'preact/hooks';
import { hasToken, onUnauthorized, probeAccess, setToken } from './lib/api.js';
import { html, REFRESH_MS, UI } from './lib/ui.js';
import { ConfirmDialog, Failure } from './lib/widgets.js';
import { Analytics } from './pages/analytics.js';
import { Groups } from './pages/groups.js';
import { Message, MessageLookup } from './pages/message.js';
import { Overview } from './pages/overview.js';
import { Queue } from './pages/queue.js';
import { Queues } from './pages/queues.js';
import { Stream, Streams } from './pages/streams.js';
import { System } from './pages/system.js';
import { TokenForm } from './pages/token.js';
import { Trace, Traces } from './pages/traces.js';

function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const f = () => setHash(location.hash);
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  const parts = hash.replace(/^#\/?/, '').split('?')[0].split('/').filter(Boolean).map(decodeURIComponent);
  return parts;
}

const NAV = [['', 'Overview'], ['queues', 'Queues'], ['groups', 'Consumer groups'], ['message', 'Message'], ['traces', 'Traces'], ['streams', 'Streams'], ['analytics', 'Analytics'], ['system', 'System']];

function App() {
  const route = useRoute();
  // auth is probeAccess's answer, 'checking' while it is awaited.
  const [auth, setAuth] = useState({ access: 'checking' });
  const [live, setLive] = useState(true);
  const [asking, setAsking] = useState(null);
  const [notice, setNotice] = useState(null);
  const check = useCallback(() => probeAccess().then(setAuth), []);
  useEffect(() => {
    check();
    // A token that expires while the page is open: ask again, with the
    // API's reason.
    return onUnauthorized((err) => setAuth((a) => (a.access === 'token' ? a : { access: 'token', error: hasToken() ? err : null })));
  }, []);
  useEffect(() => {
    if (!notice) return;
    const t = setTimeout(() => setNotice(null), 4000);
    return () => clearTimeout(t);
  }, [notice]);
  const signIn = (t) => {
    setToken(t);
    setAuth({ access: 'checking' });
    check();
  };
  if (auth.access === 'checking') return html`<p class="boot">Connecting…</p>`;
  if (auth.access === 'token') return html`<${TokenForm} onToken=${signIn} error=${auth.error} />`;
  const ui = {
    canAdmin: auth.access === 'open' || auth.access === 'admin',
    live,
    ask: setAsking,
    notify: setNotice,
  };
  const [page, ...args] = route;
  let body;
  if (!page) body = html`<${Overview} />`;
  else if (page === 'queues' && args[0]) body = html`<${Queue} key=${args[0]} name=${args[0]} />`;
  else if (page === 'queues') body = html`<${Queues} />`;
  else if (page === 'groups') body = html`<${Groups} />`;
  else if (page === 'message' && args.length === 2) body = html`<${Message} key=${args.join('/')} pid=${args[0]} tx=${args[1]} />`;
  else if (page === 'message') body = html`<${MessageLookup} />`;
  else if (page === 'traces' && args[0]) body = html`<${Trace} key=${args[0]} name=${args[0]} />`;
  else if (page === 'traces') body = html`<${Traces} />`;
  else if (page === 'streams' && args[0]) body = html`<${Stream} key=${args[0]} name=${args[0]} />`;
  else if (page === 'streams') body = html`<${Streams} />`;
  else if (page === 'analytics') body = html`<${Analytics} />`;
  else if (page === 'system') body = html`<${System} />`;
  else body = html`<p class="error">No such page. <a href="#/">Overview</a></p>`;
  const badge = { open: 'no auth', admin: 'admin', limited: 'read-only / read-write', unknown: 'broker unreachable' }[auth.access];
  return html`<${UI.Provider} value=${ui}>
    <header class="top">
      <a class="brand" href="#/">queengo</a>
      <nav>${NAV.map(([p, label]) => html`<a href=${'#/' + p} class=${(page || '') === p ? 'active' : ''}
        aria-current=${(page || '') === p ? 'page' : undefined}>${label}</a>`)}</nav>
      <div class="session">
        <label class="live" title=${'Refresh every ' + REFRESH_MS / 1000 + ' s'}><input type="checkbox" checked=${live}
          onChange=${(e) => setLive(e.target.checked)} /> live</label>
        <span class="badge" data-test="access">${badge}</span>
        ${hasToken() && html`<button type="button" data-test="sign-out" onClick=${() => signIn('')}>Sign out</button>`}
      </div>
    </header>
    <main data-page=${page || 'overview'}>${body}</main>
    ${auth.error && html`<${Failure} error=${auth.error} />`}
    ${notice && html`<div class="notice" role="status" data-test="notice">${notice}</div>`}
    ${asking && html`<${ConfirmDialog} req=${asking} close=${() => setAsking(null)} />`}
  <//>`;
}

render(html`<${App} />`, document.getElementById('app'));
