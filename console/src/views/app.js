// The app: finds out whether the server needs a token, shows the login
// screen or the page of the current hash route, and returns to the login
// screen (with the server's message) when any request answers 401.

import { createApi } from '../api.js';
import { html, useEffect, useMemo, useRef, useState } from '../html.js';
import { parseRoute } from '../router.js';
import { Functions } from './functions.js';
import { Login } from './login.js';
import { PipelinePage } from './pipeline.js';
import { Pipelines } from './pipelines.js';

/** Where the token is kept: this tab's session storage only. */
const TOKEN_KEY = 'weir.console.token';

const stored = () => {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
};

const store = (token) => {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: the token lives in memory until the tab closes
  }
};

export function App() {
  const token = useRef(stored());
  // checking | login | ready | unreachable
  const [auth, setAuth] = useState({ phase: 'checking', error: null, open: false });
  const [route, setRoute] = useState(parseRoute(location.hash));
  const api = useMemo(
    () =>
      createApi({
        token: () => token.current,
        onUnauthorized: (error) => {
          token.current = null;
          store(null);
          setAuth({ phase: 'login', error: `Signed out: ${error.message}`, open: false });
        },
      }),
    [],
  );

  const probe = async () => {
    setAuth((a) => ({ ...a, phase: 'checking' }));
    try {
      await api.request('GET', '/v1/pipelines', { tokenOverride: token.current });
      setAuth({ phase: 'ready', error: null, open: !token.current });
    } catch (e) {
      if (e.status === 401) {
        const had = token.current;
        token.current = null;
        store(null);
        setAuth({ phase: 'login', error: had ? `The stored token was refused: ${e.message}` : null, open: false });
      } else {
        setAuth({ phase: 'unreachable', error: e.message, open: false });
      }
    }
  };

  useEffect(() => {
    probe();
    const onHash = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  const tryToken = async (candidate) => {
    await api.request('GET', '/v1/pipelines', { tokenOverride: candidate });
    token.current = candidate;
    store(candidate);
    setAuth({ phase: 'ready', error: null, open: false });
  };

  const signOut = () => {
    token.current = null;
    store(null);
    setAuth({ phase: 'login', error: null, open: false });
  };

  if (auth.phase === 'checking') return html`<main class="page"><p class="muted">Connecting…</p></main>`;
  if (auth.phase === 'login') return html`<${Login} error=${auth.error} tryToken=${tryToken} />`;
  if (auth.phase === 'unreachable') {
    return html`<main class="page"><div class="card">
      <h1>Weir console</h1>
      <p class="error" role="alert">${auth.error}</p>
      <div class="buttons"><button class="primary" onClick=${probe}>Retry</button></div>
    </div></main>`;
  }
  let page;
  if (route.page === 'pipeline') page = html`<${PipelinePage} api=${api} name=${route.name} key=${route.name} />`;
  else if (route.page === 'functions') page = html`<${Functions} api=${api} />`;
  else page = html`<${Pipelines} api=${api} />`;
  return html`<header class="top">
      <a class="brand" href="#/">Weir</a>
      <nav>
        <a href="#/" class=${route.page !== 'functions' ? 'active' : ''}>Pipelines</a>
        <a href="#/functions" class=${route.page === 'functions' ? 'active' : ''}>Functions</a>
      </nav>
      <span class="spacer"></span>
      ${auth.open
        ? html`<span class="muted small" title="GET /v1/pipelines answered without a token">open server (no token)</span>`
        : html`<button type="button" class="link" onClick=${signOut}>Sign out</button>`}
    </header>
    <main class="page">${page}</main>`;
}
