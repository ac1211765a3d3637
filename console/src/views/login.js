// The login screen: asks for the API token, tries it on `GET
// /v1/pipelines`, and hands it to the app when the server takes it.

import { html, useState } from '../html.js';
import { ErrorLine } from './common.js';

/** `tryToken(token)` resolves when the server takes it, else throws. */
export function Login({ error: initialError, tryToken }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(initialError ?? null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    if (token.trim() === '') {
      setError('Enter the token weir serve was started with (--token or WEIR_API_TOKEN).');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await tryToken(token.trim());
    } catch (e) {
      setError(e.status === 401 ? `The server refused this token: ${e.message}` : e.message);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="login">
    <form class="card" onSubmit=${submit}>
      <h1>Weir console</h1>
      <p class="muted">This server needs an API token. It is kept in this tab only (session storage) and sent as
        <code>Authorization: Bearer</code> with each request.</p>
      <label>API token
        <input type="password" name="token" autocomplete="off" autofocus value=${token}
          onInput=${(e) => setToken(e.currentTarget.value)} />
      </label>
      <${ErrorLine} error=${error} />
      <div class="buttons"><button class="primary" type="submit" disabled=${busy}>Sign in</button></div>
    </form>
  </main>`;
}
