#!/usr/bin/env node
// Builds the console into dist/: index.html, console.js and console.css,
// which `weir` embeds (host/src/api/console.rs). The output depends on the
// sources and the pinned packages only (no timestamps, no hashes in
// names), so dist/ is committed and `cargo build` needs no Node.js.
//
//   node build.mjs            build into dist/
//   node build.mjs --check    build into a temporary directory and fail
//                             when it differs from the committed dist/
//   node build.mjs --out DIR  build into DIR

import { build } from 'esbuild';
import { mkdtemp, readFile, rm, writeFile, mkdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const FILES = ['index.html', 'console.js', 'console.css'];
/** The bundle budget: more means something heavy slipped in. */
const MAX_JS_BYTES = 150 * 1024;

/** The bundled packages and their licences, for the banner. */
async function banner() {
  const names = ['preact', 'htm', 'uplot'];
  const parts = [];
  for (const name of names) {
    const pkg = JSON.parse(await readFile(join(root, 'node_modules', name, 'package.json'), 'utf8'));
    parts.push(`${pkg.name} ${pkg.version} (${pkg.license})`);
  }
  return `/* Weir console; bundles ${parts.join(', ')}. */`;
}

/** Build into `out`; the sizes of the files written. */
export async function buildInto(out) {
  await mkdir(out, { recursive: true });
  const text = await banner();
  const result = await build({
    absWorkingDir: root,
    entryPoints: ['src/main.js'],
    outfile: join(out, 'console.js'),
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    legalComments: 'eof',
    banner: { js: text, css: text },
    sourcemap: false,
    metafile: false,
    logLevel: 'warning',
    write: true,
  });
  if (result.errors.length > 0) throw new Error('esbuild failed');
  await writeFile(join(out, 'index.html'), await readFile(join(root, 'src', 'index.html')));
  const sizes = {};
  for (const file of FILES) sizes[file] = (await stat(join(out, file))).size;
  if (sizes['console.js'] > MAX_JS_BYTES) {
    throw new Error(`console.js is ${sizes['console.js']} bytes, over the ${MAX_JS_BYTES} budget`);
  }
  return sizes;
}

async function main(args) {
  const check = args.includes('--check');
  const outIndex = args.indexOf('--out');
  if (check) {
    const temp = await mkdtemp(join(tmpdir(), 'weir-console-'));
    try {
      await buildInto(temp);
      const stale = [];
      for (const file of FILES) {
        const fresh = await readFile(join(temp, file));
        const committed = await readFile(join(root, 'dist', file)).catch(() => null);
        if (committed === null || !fresh.equals(committed)) stale.push(file);
      }
      if (stale.length > 0) {
        console.error(
          `console/dist is stale: ${stale.join(', ')} differ from a fresh build.\n` +
            'Run `npm ci && node build.mjs` in console/ and commit console/dist.',
        );
        process.exit(1);
      }
      console.log('console/dist matches its sources');
    } finally {
      await rm(temp, { recursive: true, force: true });
    }
    return;
  }
  const out = outIndex >= 0 ? args[outIndex + 1] : join(root, 'dist');
  const sizes = await buildInto(out);
  for (const [file, size] of Object.entries(sizes)) console.log(`${file.padEnd(12)} ${String(size).padStart(7)} bytes`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((e) => {
    console.error(e.message ?? e);
    process.exit(1);
  });
}
