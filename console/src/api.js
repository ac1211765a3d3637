// The client of the HTTP API: every request carries the bearer token (in
// the `Authorization` header, never in the URL), state-changing requests
// say their body's type, and an error answer becomes an `ApiError` with
// the server's message. A 401 also tells the app, which returns to the
// login screen.

/** An error answer (`{"error":{"code","message"}}`), or a network failure. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** The `ApiError` of a non-2xx `response`. */
export async function errorOf(response) {
  let code = 'http_' + response.status;
  let message = `${response.status} ${response.statusText || 'error'}`.trim();
  try {
    const text = await response.text();
    try {
      const body = JSON.parse(text);
      if (body?.error?.message) {
        message = body.error.message;
        code = body.error.code ?? code;
      }
    } catch {
      if (text.trim() !== '') message = text.trim().slice(0, 500);
    }
  } catch {
    // keep the status line
  }
  return new ApiError(response.status, code, message);
}

/**
 * A client. `token()` gives the current token (or null), `onUnauthorized`
 * is called with the error of any 401.
 */
export function createApi({ token, onUnauthorized, fetch: fetchImpl = globalThis.fetch.bind(globalThis) }) {
  /**
   * `method path`; `body` with `type` (its Content-Type; objects are sent as
   * JSON); `raw: true` answers the Response itself (for streams).
   */
  async function request(method, path, { body, type, signal, raw = false, tokenOverride } = {}) {
    const headers = { Accept: 'application/json' };
    const bearer = tokenOverride !== undefined ? tokenOverride : token();
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    let payload = body;
    if (body !== undefined) {
      const isBytes = body instanceof ArrayBuffer || ArrayBuffer.isView(body) || body instanceof Blob;
      if (typeof body !== 'string' && !isBytes) payload = JSON.stringify(body);
      headers['Content-Type'] = type ?? 'application/json';
    }
    let response;
    try {
      response = await fetchImpl(path, {
        method,
        headers,
        body: payload,
        signal,
        credentials: 'omit',
        cache: 'no-store',
      });
    } catch (e) {
      if (e?.name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `cannot reach the server: ${e?.message ?? e}`);
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401 && tokenOverride === undefined) onUnauthorized?.(error);
      throw error;
    }
    if (raw) return response;
    if (response.status === 204) return null;
    const text = await response.text();
    return text === '' ? null : JSON.parse(text);
  }
  return {
    request,
    get: (path, options) => request('GET', path, options),
    post: (path, body, options) => request('POST', path, { ...options, body }),
    put: (path, body, options) => request('PUT', path, { ...options, body }),
    del: (path, options) => request('DELETE', path, options),
  };
}
