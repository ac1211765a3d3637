// Hash routes: `#/` the pipelines, `#/pipelines/<name>` one pipeline,
// `#/functions` the functions. Pure: parsing and building hrefs.

/** The route of `hash` (`location.hash`): `{ page, name? }`. */
export function parseRoute(hash) {
  const path = (hash ?? '').replace(/^#/, '').replace(/^\/+/, '').replace(/\/+$/, '');
  const parts = path.split('/');
  if (parts[0] === 'pipelines' && parts.length === 2 && parts[1] !== '') {
    try {
      return { page: 'pipeline', name: decodeURIComponent(parts[1]) };
    } catch {
      return { page: 'pipelines' };
    }
  }
  if (parts[0] === 'functions' && parts.length === 1) return { page: 'functions' };
  return { page: 'pipelines' };
}

/** The href of a pipeline's page. */
export const pipelineHref = (name) => `#/pipelines/${encodeURIComponent(name)}`;

/** `/v1/pipelines/<name>`, the name URL-encoded, then `rest`. */
export const pipelinePath = (name, rest = '') => `/v1/pipelines/${encodeURIComponent(name)}${rest}`;

/** A query string from `params` (values URL-encoded, null left out). */
export function query(params) {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length > 0 ? `?${parts.join('&')}` : '';
}
