// The sign-in form, shown while the broker wants a token (JWT_ENABLED).
import { useState } from 'preact/hooks';
import { html } from '../lib/ui.js';
import { Failure } from '../lib/widgets.js';

export function TokenForm({ onToken, error }) {
  const [value, setValue] = useState('');
  return html`<main class="login">
    <form data-test="token-form" onSubmit=${(e) => { e.preventDefault(); onToken(value.trim()); }}>
      <h1>queengo</h1>
      <p>This broker requires a token (JWT_ENABLED). Paste a bearer token: it stays in this browser and is sent only to this broker.</p>
      <${Failure} error=${error} />
      <input type="password" autocomplete="off" placeholder="eyJ…" aria-label="Token" data-test="token-input"
        value=${value} onInput=${(e) => setValue(e.target.value)} required />
      <button type="submit" data-test="token-submit">Sign in</button>
    </form>
  </main>`;
}
