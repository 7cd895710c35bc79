// Calls to the public HTTP API (docs/api.md), and the token they carry: the
// one the user gave, kept in the browser's local storage.

const TOKEN_KEY = 'queengo.token';

class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let token = localStorage.getItem(TOKEN_KEY) || '';
const unauthorizedListeners = new Set();

export const hasToken = () => token !== '';

// setToken makes t the token of every call from now on ('' for none) and
// keeps it for the next visit.
export function setToken(t) {
  token = t;
  if (t) localStorage.setItem(TOKEN_KEY, t);
  else localStorage.removeItem(TOKEN_KEY);
}

// onUnauthorized calls f with the error of every call the broker answers
// 401, until the function it returns is called.
export function onUnauthorized(f) {
  unauthorizedListeners.add(f);
  return () => unauthorizedListeners.delete(f);
}

// api calls the broker and returns the decoded answer; a refusal throws an
// APIError carrying the API's own {"error"} text. A 401 also tells the app,
// which asks for a token again.
export async function api(path, { method = 'GET', body } = {}) {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new APIError(0, 'broker unreachable: ' + e.message);
  }
  let data = null;
  const text = await r.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!r.ok) {
    const err = new APIError(r.status, (data && data.error) || `${r.status} ${r.statusText}`);
    if (r.status === 401) unauthorizedListeners.forEach((f) => f(err));
    throw err;
  }
  return data;
}

export const enc = encodeURIComponent;
export const qs = (params) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
};

// probeAccess finds out what the broker allows the token, by calling the
// admin-only maintenance route. access is 'open' (no authentication),
// 'admin', 'limited' (a token below admin), 'token' (a token is needed) or
// 'unknown' (the broker did not answer).
export async function probeAccess() {
  try {
    await api('/api/v1/system/maintenance/pop');
    return { access: token ? 'admin' : 'open' };
  } catch (e) {
    if (e.status === 403) return { access: 'limited' };
    if (e.status === 401) return { access: 'token', error: token ? e : null };
    return { access: 'unknown', error: e };
  }
}
