// The functions page: every stored function's versions (digest, worlds,
// size, upload time) and the upload form (PUT /v1/functions/{name}, the
// file's bytes as application/wasm).

import { formatBytes, formatTime } from '../format.js';
import { html, useEffect, useState } from '../html.js';
import { ErrorLine, Short } from './common.js';

const world = (w) => w.replace(/^weir:function\//, '').replace(/@.*$/, '');

export function Functions({ api }) {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const load = async () => {
    try {
      setList((await api.get('/v1/functions'))?.functions ?? []);
      setError(null);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    load();
  }, []);
  return html`<section>
    <div class="title-row"><h1>Functions</h1></div>
    <${Upload} api=${api} onUploaded=${load} />
    <${ErrorLine} error=${error} />
    ${list === null
      ? html`<p class="muted">Loading…</p>`
      : list.length === 0
        ? html`<p class="muted">No functions uploaded yet.</p>`
        : html`<table class="grid" aria-label="Functions">
            <thead><tr><th>Name</th><th class="num">Version</th><th>Digest</th><th>Worlds</th>
              <th class="num">Size</th><th>Uploaded</th></tr></thead>
            <tbody>${list.flatMap((f) =>
              [...f.versions].reverse().map(
                (v, i) => html`<tr data-function=${f.name} data-version=${v.version}>
                  <td>${i === 0 ? f.name : ''}</td><td class="num">${v.version}</td>
                  <td><${Short} text=${v.digest} /></td>
                  <td>${v.worlds.map((w) => html`<span class="tag" title=${w}>${world(w)}</span>`)}</td>
                  <td class="num">${formatBytes(v.size)}</td><td>${formatTime(v.uploaded_at)}</td>
                </tr>`,
              ),
            )}</tbody>
          </table>`}
  </section>`;
}

function Upload({ api, onUploaded }) {
  const [name, setName] = useState('');
  const [file, setFile] = useState(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    setNotice(null);
    try {
      const bytes = await file.arrayBuffer();
      const answer = await api.put(`/v1/functions/${encodeURIComponent(name)}`, bytes, { type: 'application/wasm' });
      setNotice(`Stored ${answer.name} version ${answer.version} (${answer.worlds.map(world).join(', ')}).`);
      onUploaded();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const pick = (event) => {
    const chosen = event.currentTarget.files?.[0] ?? null;
    setFile(chosen);
    if (chosen && name === '') setName(chosen.name.replace(/\.wasm$/, '').toLowerCase().replace(/[^a-z0-9-]/g, '-'));
  };
  return html`<form class="upload card" onSubmit=${submit} aria-label="Upload a function">
    <h2>Upload</h2>
    <div class="row">
      <label>Name <input name="name" value=${name} pattern=${'[a-z0-9\\-]{1,63}'} required placeholder="revenue"
        onInput=${(e) => setName(e.currentTarget.value)} /></label>
      <label>Component or module <input name="file" type="file" accept=".wasm,application/wasm" required onChange=${pick} /></label>
      <button type="submit" class="primary" disabled=${busy || !file || name === ''}>Upload</button>
    </div>
    <p class="muted small">Uploading new bytes under a name stores its next version; the same bytes again answer the existing version.</p>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    <${ErrorLine} error=${error} />
  </form>`;
}
